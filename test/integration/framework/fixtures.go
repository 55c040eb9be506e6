package framework

// Event fixtures with every field set, and the conversions between core/v1
// and events.k8s.io/v1 as kube-apiserver v1.36.3 does them
// (pkg/apis/events/v1/conversion.go), written out field by field so that the
// tests have an oracle independent of the server's conversion code; Events
// as client-go's two recorders write them; raw request bodies.

import (
	"bytes"
	"encoding/json"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// FullCoreEvent is a core/v1 Event with every field set, old (count, source,
// timestamps) and new (eventTime, series, action, related, reporting*)
// alike; core/v1 accepts all of them.
func FullCoreEvent(namespace, name string) *corev1.Event {
	now := time.Now()
	return &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Namespace:   namespace,
			Labels:      map[string]string{"app": "web"},
			Annotations: map[string]string{"example.com/note": "fixture"},
		},
		InvolvedObject: corev1.ObjectReference{
			Kind:            "Pod",
			Namespace:       namespace,
			Name:            "web-0",
			UID:             "uid-web-0",
			APIVersion:      "v1",
			ResourceVersion: "42",
			FieldPath:       "spec.containers{web}",
		},
		Reason:         "BackOff",
		Message:        "Back-off restarting failed container",
		Source:         corev1.EventSource{Component: "kubelet", Host: "node-1"},
		FirstTimestamp: metav1.NewTime(now.Add(-time.Hour).Truncate(time.Second)),
		LastTimestamp:  metav1.NewTime(now.Add(-time.Minute).Truncate(time.Second)),
		Count:          7,
		Type:           corev1.EventTypeWarning,
		EventTime:      metav1.NewMicroTime(now.Add(-time.Hour).Truncate(time.Microsecond)),
		Series: &corev1.EventSeries{
			Count:            7,
			LastObservedTime: metav1.NewMicroTime(now.Add(-time.Minute).Truncate(time.Microsecond)),
		},
		Action: "Restarting",
		Related: &corev1.ObjectReference{
			Kind:       "Node",
			Name:       "node-1",
			UID:        "uid-node-1",
			APIVersion: "v1",
		},
		ReportingController: "kubelet",
		ReportingInstance:   "node-1",
	}
}

// FullEventsV1Event is an events.k8s.io/v1 Event with every field that
// version accepts on create (the deprecated* fields must stay unset).
func FullEventsV1Event(namespace, name string) *eventsv1.Event {
	now := time.Now()
	return &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Namespace:   namespace,
			Labels:      map[string]string{"app": "scheduler"},
			Annotations: map[string]string{"example.com/note": "fixture"},
		},
		EventTime: metav1.NewMicroTime(now.Add(-time.Minute).Truncate(time.Microsecond)),
		Series: &eventsv1.EventSeries{
			Count:            3,
			LastObservedTime: metav1.NewMicroTime(now.Truncate(time.Microsecond)),
		},
		ReportingController: "example.com/scheduler",
		ReportingInstance:   "scheduler-1",
		Action:              "Binding",
		Reason:              "Scheduled",
		Regarding: corev1.ObjectReference{
			Kind:            "Pod",
			Namespace:       namespace,
			Name:            "web-1",
			UID:             "uid-web-1",
			APIVersion:      "v1",
			ResourceVersion: "7",
		},
		Related: &corev1.ObjectReference{
			Kind:       "Node",
			Name:       "node-2",
			UID:        "uid-node-2",
			APIVersion: "v1",
		},
		Note: "Successfully assigned web-1 to node-2",
		Type: corev1.EventTypeNormal,
	}
}

// EventsV1FromCore is how an Event stored through core/v1 reads through
// events.k8s.io/v1.
func EventsV1FromCore(in *corev1.Event) *eventsv1.Event {
	out := &eventsv1.Event{
		ObjectMeta:               *in.ObjectMeta.DeepCopy(),
		EventTime:                in.EventTime,
		ReportingController:      in.ReportingController,
		ReportingInstance:        in.ReportingInstance,
		Action:                   in.Action,
		Reason:                   in.Reason,
		Regarding:                in.InvolvedObject,
		Note:                     in.Message,
		Type:                     in.Type,
		DeprecatedSource:         in.Source,
		DeprecatedFirstTimestamp: in.FirstTimestamp,
		DeprecatedLastTimestamp:  in.LastTimestamp,
		DeprecatedCount:          in.Count,
	}
	if in.Series != nil {
		out.Series = &eventsv1.EventSeries{Count: in.Series.Count, LastObservedTime: in.Series.LastObservedTime}
	}
	if in.Related != nil {
		related := *in.Related
		out.Related = &related
	}
	return out
}

// CoreFromEventsV1 is how an Event stored through events.k8s.io/v1 reads
// through core/v1.
func CoreFromEventsV1(in *eventsv1.Event) *corev1.Event {
	out := &corev1.Event{
		ObjectMeta:          *in.ObjectMeta.DeepCopy(),
		InvolvedObject:      in.Regarding,
		Reason:              in.Reason,
		Message:             in.Note,
		Source:              in.DeprecatedSource,
		FirstTimestamp:      in.DeprecatedFirstTimestamp,
		LastTimestamp:       in.DeprecatedLastTimestamp,
		Count:               in.DeprecatedCount,
		Type:                in.Type,
		EventTime:           in.EventTime,
		Action:              in.Action,
		ReportingController: in.ReportingController,
		ReportingInstance:   in.ReportingInstance,
	}
	if in.Series != nil {
		out.Series = &corev1.EventSeries{Count: in.Series.Count, LastObservedTime: in.Series.LastObservedTime}
	}
	if in.Related != nil {
		related := *in.Related
		out.Related = &related
	}
	return out
}

// RecorderStyleCoreEvent is what client-go's tools/record writes.
func RecorderStyleCoreEvent(namespace, name string) *corev1.Event {
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	return &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		InvolvedObject: corev1.ObjectReference{
			Kind: "Pod", Namespace: namespace, Name: "web-0", UID: types.UID("uid-web-0"), APIVersion: "v1",
			ResourceVersion: "42", FieldPath: "spec.containers{web}",
		},
		Reason:              "BackOff",
		Message:             "Back-off restarting failed container",
		Source:              corev1.EventSource{Component: "kubelet", Host: "node-1"},
		FirstTimestamp:      now,
		LastTimestamp:       now,
		Count:               3,
		Type:                corev1.EventTypeWarning,
		ReportingController: "kubelet",
		ReportingInstance:   "node-1",
	}
}

// SchedulerStyleEvent is what client-go's tools/events writes.
func SchedulerStyleEvent(namespace, name string) *eventsv1.Event {
	return &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: name, Namespace: namespace},
		EventTime:           metav1.NewMicroTime(time.Now().Truncate(time.Microsecond)),
		ReportingController: "default-scheduler",
		ReportingInstance:   "default-scheduler-node-1",
		Action:              "Scheduling",
		Reason:              "FailedScheduling",
		Regarding:           corev1.ObjectReference{Kind: "Pod", Namespace: namespace, Name: "web-1", UID: types.UID("uid-web-1"), APIVersion: "v1"},
		Related:             &corev1.ObjectReference{Kind: "Node", Name: "node-2", UID: types.UID("uid-node-2"), APIVersion: "v1"},
		Note:                "0/3 nodes are available",
		Type:                corev1.EventTypeWarning,
	}
}

// EventsV1Body is a valid events.k8s.io/v1 Event body in namespace
// default, after mutate (nil: none), to be broken one field at a time.
func EventsV1Body(name string, mutate func(m map[string]any)) []byte {
	m := map[string]any{
		"apiVersion":          "events.k8s.io/v1",
		"kind":                "Event",
		"metadata":            map[string]any{"name": name, "namespace": "default"},
		"eventTime":           "2024-05-01T10:00:00.000000Z",
		"reportingController": "example.com/ctrl",
		"reportingInstance":   "ctrl-1",
		"action":              "Testing",
		"reason":              "Tested",
		"regarding":           map[string]any{"kind": "Pod", "name": "p", "namespace": "default", "apiVersion": "v1"},
		"note":                "a note",
		"type":                "Normal",
	}
	if mutate != nil {
		mutate(m)
	}
	return MustJSON(m)
}

// CoreBody is a valid core/v1 Event body in namespace default as
// tools/record writes it, after mutate (nil: none).
func CoreBody(name string, mutate func(m map[string]any)) []byte {
	m := map[string]any{
		"apiVersion":     "v1",
		"kind":           "Event",
		"metadata":       map[string]any{"name": name, "namespace": "default"},
		"involvedObject": map[string]any{"kind": "Pod", "name": "p", "namespace": "default", "apiVersion": "v1"},
		"reason":         "Tested",
		"message":        "a message",
		"source":         map[string]any{"component": "test"},
		"firstTimestamp": "2024-05-01T10:00:00Z",
		"lastTimestamp":  "2024-05-01T10:00:00Z",
		"count":          1,
		"type":           "Normal",
	}
	if mutate != nil {
		mutate(m)
	}
	return MustJSON(m)
}

// MustJSON encodes v as kubectl would send it: no HTML escaping, no
// trailing newline.
func MustJSON(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err)
	}
	return bytes.TrimSpace(buf.Bytes())
}
