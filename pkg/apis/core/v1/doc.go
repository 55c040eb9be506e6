// +k8s:conversion-gen=github.com/eventapiserver/event-apiserver/pkg/apis/core
// +k8s:conversion-gen-external-types=k8s.io/api/core/v1

// Package v1 converts between the internal Event and k8s.io/api/core/v1.
// The two are field-for-field identical, so everything here is generated.
package v1
