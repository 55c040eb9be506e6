package core

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// Event is the union of core/v1 Event and events.k8s.io/v1 Event. Fields are
// named as in core/v1; events.k8s.io/v1 renames some of them (Regarding,
// Note, Deprecated*) and the conversions map those names.
//
// It has no TypeMeta (see GetObjectKind).
type Event struct {
	metav1.ObjectMeta

	// InvolvedObject is events.k8s.io/v1's Regarding.
	InvolvedObject ObjectReference
	Reason         string
	// Message is events.k8s.io/v1's Note.
	Message string
	// Source is events.k8s.io/v1's DeprecatedSource.
	Source EventSource
	// FirstTimestamp, LastTimestamp and Count are events.k8s.io/v1's
	// Deprecated* fields, kept for recorders that still write core/v1.
	FirstTimestamp metav1.Time
	LastTimestamp  metav1.Time
	Count          int32
	Type           string

	EventTime           metav1.MicroTime
	Series              *EventSeries
	Action              string
	Related             *ObjectReference
	ReportingController string
	ReportingInstance   string
}

// EventSeries has no State: the events KEP removed it, and neither
// external version carries it any more.
type EventSeries struct {
	Count            int32
	LastObservedTime metav1.MicroTime
}

type EventSource struct {
	Component string
	Host      string
}

type ObjectReference struct {
	Kind            string
	Namespace       string
	Name            string
	UID             types.UID
	APIVersion      string
	ResourceVersion string
	FieldPath       string
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

type EventList struct {
	metav1.TypeMeta
	metav1.ListMeta

	Items []Event
}
