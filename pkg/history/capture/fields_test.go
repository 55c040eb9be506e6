package capture_test

import (
	"bytes"
	"math/rand"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/eventapiserver/event-apiserver/pkg/apis/core"
	corefuzzer "github.com/eventapiserver/event-apiserver/pkg/apis/core/fuzzer"
	"github.com/eventapiserver/event-apiserver/pkg/apiserver"
	"github.com/eventapiserver/event-apiserver/pkg/history"
	"github.com/eventapiserver/event-apiserver/pkg/history/capture"
)

// TestVersionFromProto: reading the fields from the protobuf gives what
// decoding the whole Event through the server's scheme and NewVersion give,
// on fuzzed Events and on times with sub-second parts (which Time drops and
// MicroTime keeps to the microsecond); anything but a core/v1 Event in the
// protobuf envelope is left to the full decode.
func TestVersionFromProto(t *testing.T) {
	encoder := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	decoder := apiserver.Codecs.UniversalDecoder(core.SchemeGroupVersion)
	seed := rand.Int63()
	t.Logf("fuzzer seed %d", seed)
	f := fuzzer.FuzzerFor(fuzzer.MergeFuzzerFuncs(metafuzzer.Funcs, corefuzzer.Funcs), rand.NewSource(seed), apiserver.Codecs)
	observed := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	at := time.Date(2026, 11, 1, 10, 30, 15, 123456789, time.UTC)
	var events []*corev1.Event
	for i := 0; i < 1000; i++ {
		e := &corev1.Event{}
		f.Fill(e)
		events = append(events, e)
	}
	events = append(events,
		&corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "created-only", CreationTimestamp: metav1.NewTime(at)}},
		&corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "nothing"}},
		&corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "last"}, LastTimestamp: metav1.NewTime(at), EventTime: metav1.NewMicroTime(at.Add(time.Hour))},
		&corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "event-time"}, EventTime: metav1.NewMicroTime(at), FirstTimestamp: metav1.NewTime(at.Add(-time.Hour))},
		&corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "series"}, EventTime: metav1.NewMicroTime(at),
			Series:  &corev1.EventSeries{Count: 2, LastObservedTime: metav1.NewMicroTime(at.Add(time.Minute))},
			Related: &corev1.ObjectReference{Kind: "Node", Name: "n", UID: "node-uid"}},
		&corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "empty-series"}, FirstTimestamp: metav1.NewTime(at), Series: &corev1.EventSeries{Count: 2}},
		&corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "epoch"}, LastTimestamp: metav1.NewTime(time.Unix(0, 0))},
	)
	for i, e := range events {
		// As the storage writes it.
		e.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Event"}
		var buf bytes.Buffer
		if err := encoder.Encode(e, &buf); err != nil {
			t.Fatal(err)
		}
		value := buf.Bytes()
		obj, _, err := decoder.Decode(value, nil, &core.Event{})
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		want := history.NewVersion(obj.(*core.Event), 7, value, observed)
		got, ok := capture.VersionFromProto(value, 7, observed)
		if !ok {
			t.Fatalf("event %d (%s): not read from its protobuf", i, e.Name)
		}
		// Equal instants; the decoder's times are in the local zone.
		if !got.LastSeen.Equal(want.LastSeen) {
			t.Errorf("event %d (%s): last seen %v, want %v", i, e.Name, got.LastSeen, want.LastSeen)
		}
		got.LastSeen, want.LastSeen = time.Time{}, time.Time{}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("event %d (%s):\n got %+v\nwant %+v", i, e.Name, got, want)
		}
	}

	var buf bytes.Buffer
	if err := encoder.Encode(&corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: metav1.ObjectMeta{Name: "p"}}, &buf); err != nil {
		t.Fatal(err)
	}
	for name, value := range map[string][]byte{
		"json":      []byte(`{"kind":"Event","apiVersion":"v1","metadata":{"name":"e"}}`),
		"pod":       buf.Bytes(),
		"truncated": buf.Bytes()[:len(buf.Bytes())-3],
		"empty":     nil,
	} {
		if _, ok := capture.VersionFromProto(value, 1, observed); ok {
			t.Errorf("%s: read as a core/v1 Event", name)
		}
	}
}

// BenchmarkVersion compares what capture spends per version to describe an
// Event like TestHistoryCaptureCPU's: its fields read from the protobuf, or
// the Event decoded through the server's scheme and NewVersion.
//
//	go test -run NONE -bench Version -benchmem ./pkg/history/capture/
func BenchmarkVersion(b *testing.B) {
	encoder := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	decoder := apiserver.Codecs.UniversalDecoder(core.SchemeGroupVersion)
	now := metav1.Now()
	e := &corev1.Event{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Event"},
		ObjectMeta: metav1.ObjectMeta{Name: "measured-1234", Namespace: "bench-abc", UID: "0b9f3a4e-1111-2222-3333-444455556666", CreationTimestamp: now,
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "integration.test", Operation: "Update", APIVersion: "v1", Time: &now, FieldsType: "FieldsV1",
				FieldsV1: metav1.NewFieldsV1(`{"f:count":{},"f:firstTimestamp":{},"f:involvedObject":{},"f:lastTimestamp":{},"f:message":{},"f:reason":{},"f:source":{"f:component":{},"f:host":{}},"f:type":{}}`)}}},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "bench-abc", Name: "pod-12", UID: "uid"},
		Reason:         "BackOff", Message: string(bytes.Repeat([]byte("m"), 200)), Type: corev1.EventTypeWarning,
		Source: corev1.EventSource{Component: "kubelet", Host: "node"}, Count: 1, LastTimestamp: now, FirstTimestamp: now,
	}
	var buf bytes.Buffer
	if err := encoder.Encode(e, &buf); err != nil {
		b.Fatal(err)
	}
	value := buf.Bytes()
	b.Run("proto", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, ok := capture.VersionFromProto(value, 1, now.Time); !ok {
				b.Fatal("not read")
			}
		}
	})
	b.Run("decode", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			obj, _, err := decoder.Decode(value, nil, &core.Event{})
			if err != nil {
				b.Fatal(err)
			}
			_ = history.NewVersion(obj.(*core.Event), 1, value, now.Time)
		}
	})
}
