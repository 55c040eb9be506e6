package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +genclient
// +genclient:onlyVerbs=create
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// EventRecordCount counts the EventRecords of its namespace over time, as
// LocalSubjectAccessReview answers a question about one namespace: create
// one with a spec, get the status back; nothing is stored. Creating one
// needs create on eventrecordcounts and list on eventrecords in the
// namespace: a count tells no more than the list would.
type EventRecordCount struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`

	Spec EventRecordCountSpec `json:"spec" protobuf:"bytes,2,opt,name=spec"`
	// Status is the answer, filled by the server.
	// +optional
	Status EventRecordCountStatus `json:"status,omitempty" protobuf:"bytes,3,opt,name=status"`
}

// +genclient
// +genclient:nonNamespaced
// +genclient:onlyVerbs=create
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ClusterEventRecordCount counts EventRecords across all namespaces, as
// SubjectAccessReview is LocalSubjectAccessReview's cluster-wide twin.
// Creating one needs list on eventrecords across all namespaces.
type ClusterEventRecordCount struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`

	Spec EventRecordCountSpec `json:"spec" protobuf:"bytes,2,opt,name=spec"`
	// +optional
	Status EventRecordCountStatus `json:"status,omitempty" protobuf:"bytes,3,opt,name=status"`
}

// EventRecordCountSpec is the question: which records (as a list of
// eventrecords selects them), grouped how, in buckets of what length.
type EventRecordCountSpec struct {
	// FieldSelector selects the records as eventrecords' fieldSelector
	// does, since and until included (the window; since defaults to 24h
	// before until, until to now). Only labels of the fields history keeps
	// in columns are accepted, with = and !=: regarding.uid, regarding.name,
	// regarding.namespace, regarding.kind, related.uid, related.name,
	// reason, type, reportingController, metadata.namespace, metadata.name
	// and the regardingOrRelated labels of those.
	// +optional
	FieldSelector string `json:"fieldSelector,omitempty" protobuf:"bytes,1,opt,name=fieldSelector"`
	// GroupBy is one or two of reason, type, regarding.kind,
	// metadata.namespace, reportingController, regarding.name.
	// +listType=atomic
	GroupBy []string `json:"groupBy" protobuf:"bytes,2,rep,name=groupBy"`
	// BucketSize is the length of a time bucket, default 1h; buckets start
	// at multiples of it since the Unix epoch (hours on the hour, days at
	// midnight UTC).
	// +optional
	BucketSize metav1.Duration `json:"bucketSize,omitempty" protobuf:"bytes,3,opt,name=bucketSize"`
	// Top is how many groups, the largest first, are answered, default 10,
	// at most 100; the rest are counted in status.other.
	// +optional
	Top int32 `json:"top,omitempty" protobuf:"varint,4,opt,name=top"`
}

// EventRecordCountStatus is the answer. What is counted is stored
// versions of Events (EventRecords): each create or update a recorder made.
type EventRecordCountStatus struct {
	// Since and Until are the window counted, [since, until).
	Since metav1.Time `json:"since" protobuf:"bytes,1,opt,name=since"`
	Until metav1.Time `json:"until" protobuf:"bytes,2,opt,name=until"`
	// Total is how many records the selector matched in the window.
	Total int64 `json:"total" protobuf:"varint,3,opt,name=total"`
	// Other is how many of them are in no group of Groups.
	Other int64 `json:"other" protobuf:"varint,4,opt,name=other"`
	// Groups are the largest groups, by total, descending; ties ordered
	// by their values.
	// +listType=atomic
	// +optional
	Groups []EventRecordCountGroup `json:"groups,omitempty" protobuf:"bytes,5,rep,name=groups"`
	// Buckets are every bucket the window touches, oldest first, each with
	// a count per group; without until in the selector, also any later
	// bucket holding records last seen after now (a recorder's clock
	// ahead), which a list returns too.
	// +listType=atomic
	// +optional
	Buckets []EventRecordCountBucket `json:"buckets,omitempty" protobuf:"bytes,6,rep,name=buckets"`
}

// EventRecordCountGroup is one group: its values, one per spec.groupBy
// entry in that order, and its records in the window.
type EventRecordCountGroup struct {
	// +listType=atomic
	Values []string `json:"values" protobuf:"bytes,1,rep,name=values"`
	Total  int64    `json:"total" protobuf:"varint,2,opt,name=total"`
}

// EventRecordCountBucket is one time bucket, [start, start+bucketSize).
type EventRecordCountBucket struct {
	Start metav1.Time `json:"start" protobuf:"bytes,1,opt,name=start"`
	// Counts has one count per entry of status.groups, in that order.
	// +listType=atomic
	Counts []int64 `json:"counts" protobuf:"varint,2,rep,name=counts"`
}
