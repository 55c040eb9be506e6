package history

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/eventapiserver/event-apiserver/pkg/apis/core"
)

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// EventRecord is one version of an Event as history keeps it.
type EventRecord struct {
	metav1.TypeMeta
	// ObjectMeta names the record <event name>.<event resourceVersion>.
	metav1.ObjectMeta

	Event core.Event
	// LastSeen is when the Event last happened as of this version.
	LastSeen metav1.Time
	// Live is true while the Event is still in etcd.
	Live bool
	// DeletedAt is when the Event left etcd: deleted or expired.
	DeletedAt *metav1.Time
	// Cluster is the cluster the Event happened in.
	Cluster string
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

type EventRecordList struct {
	metav1.TypeMeta
	metav1.ListMeta

	Items []EventRecord
}
