// +k8s:conversion-gen=github.com/eventapiserver/event-apiserver/pkg/apis/core
// +k8s:conversion-gen-external-types=k8s.io/api/events/v1

// Package v1 converts between the internal Event and
// k8s.io/api/events/v1. The fields events.k8s.io/v1 renamed (Regarding,
// Note, Deprecated*) are converted by hand in conversion.go.
package v1
