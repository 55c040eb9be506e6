package v1alpha1

import (
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +genclient
// +genclient:onlyVerbs=get,list,watch
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// EventRecord is one version of an Event kept in history beyond the Events'
// TTL. Records are read-only; list them with the events.k8s.io/v1 field
// selectors plus `since` and `until` (RFC 3339 times or durations before
// now, e.g. since=168h), `note` and `cluster`, newest first.
type EventRecord struct {
	metav1.TypeMeta `json:",inline"`
	// Standard object metadata. The name is <event name>.<event resourceVersion>.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`

	// Event is this version of the Event, as events.k8s.io/v1 shows it.
	Event eventsv1.Event `json:"event" protobuf:"bytes,2,opt,name=event"`
	// LastSeen is when the Event last happened as of this version: the
	// series' last observation, else deprecatedLastTimestamp, else eventTime.
	LastSeen metav1.Time `json:"lastSeen" protobuf:"bytes,3,opt,name=lastSeen"`
	// Live is true while the Event is still in etcd, i.e. neither deleted
	// nor expired; its newest version is then served by the Events API too.
	Live bool `json:"live" protobuf:"varint,4,opt,name=live"`
	// DeletedAt is when history saw the Event leave etcd, deleted or
	// expired with its lease.
	// +optional
	DeletedAt *metav1.Time `json:"deletedAt,omitempty" protobuf:"bytes,5,opt,name=deletedAt"`
	// Cluster is the cluster the Event happened in: a member cluster of a
	// fleet, or the server's own cluster (--history-cluster-name). Select
	// on it with the field label cluster (=, !=, in, notin).
	Cluster string `json:"cluster" protobuf:"bytes,6,opt,name=cluster"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// EventRecordList is a page of EventRecords, newest first.
type EventRecordList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`

	Items []EventRecord `json:"items" protobuf:"bytes,2,rep,name=items"`
}
