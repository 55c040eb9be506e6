// +k8s:deepcopy-gen=package
// +k8s:conversion-gen=github.com/eventapiserver/event-apiserver/pkg/apis/history
// +k8s:openapi-gen=true
// +k8s:openapi-model-package=io.eventapiserver.history.v1alpha1
// +groupName=history.eventapiserver.io

// Package v1alpha1 is history.eventapiserver.io/v1alpha1.
package v1alpha1
