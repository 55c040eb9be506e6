// +k8s:conversion-gen=github.com/eventapiserver/event-apiserver/pkg/apis/core
// +k8s:conversion-gen-external-types=k8s.io/api/events/v1beta1

// Package v1beta1 converts between the internal Event and
// k8s.io/api/events/v1beta1, a version this server does not serve, as
// kube-apiserver v1.36.3 does not: its scheme still knows the version
// (k8s.io/kubernetes pkg/apis/events/install), so a v1beta1 Event sent to
// either served version is decoded, converted and then refused with "the
// API version in the data (events.k8s.io/v1beta1) does not match the
// expected API version", and so it is here. The fields v1beta1 renamed
// (Regarding, Note, Deprecated*) are converted by hand in conversion.go, as
// kube-apiserver's pkg/apis/events/v1beta1 does.
package v1beta1
