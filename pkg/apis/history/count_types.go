package history

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// EventRecordCount counts a namespace's EventRecords over time; nothing is
// stored (v1alpha1's doc).
type EventRecordCount struct {
	metav1.TypeMeta
	metav1.ObjectMeta

	Spec   EventRecordCountSpec
	Status EventRecordCountStatus
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ClusterEventRecordCount counts EventRecords across all namespaces.
type ClusterEventRecordCount struct {
	metav1.TypeMeta
	metav1.ObjectMeta

	Spec   EventRecordCountSpec
	Status EventRecordCountStatus
}

type EventRecordCountSpec struct {
	FieldSelector string
	GroupBy       []string
	BucketSize    metav1.Duration
	Top           int32
}

type EventRecordCountStatus struct {
	Since, Until metav1.Time
	Total        int64
	Other        int64
	Groups       []EventRecordCountGroup
	Buckets      []EventRecordCountBucket
}

type EventRecordCountGroup struct {
	Values []string
	Total  int64
}

type EventRecordCountBucket struct {
	Start  metav1.Time
	Counts []int64
}
