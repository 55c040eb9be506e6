// +k8s:deepcopy-gen=package

// Package core holds the internal Event type that both served API groups
// (core/v1 and events.k8s.io/v1) convert to and from. Like kube-apiserver's
// pkg/apis/core it is never serialized: storage and the wire use the
// external k8s.io/api types.
package core
