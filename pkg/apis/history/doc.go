// +k8s:deepcopy-gen=package
// +groupName=history.eventapiserver.io

// Package history is the history.eventapiserver.io API group: Event versions
// kept beyond the Events' TTL, read-only. Its internal EventRecord holds the
// internal Event, so that one conversion path (pkg/apis/events/v1)
// shows it as events.k8s.io/v1 does.
package history
