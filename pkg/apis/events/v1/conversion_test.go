package v1_test

import (
	"math/rand"
	"reflect"
	"testing"
	"time"

	k8scorev1 "k8s.io/api/core/v1"
	k8seventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	runtimeserializer "k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/diff"
	"sigs.k8s.io/randfill"

	"github.com/eventapiserver/event-apiserver/pkg/apis/core"
	corefuzzer "github.com/eventapiserver/event-apiserver/pkg/apis/core/fuzzer"
	coreinstall "github.com/eventapiserver/event-apiserver/pkg/apis/core/install"
	eventsinstall "github.com/eventapiserver/event-apiserver/pkg/apis/events/install"
)

const iterations = 2000

func servedScheme() (*runtime.Scheme, runtimeserializer.CodecFactory) {
	scheme := runtime.NewScheme()
	coreinstall.Install(scheme)
	eventsinstall.Install(scheme)
	return scheme, runtimeserializer.NewCodecFactory(scheme)
}

func convert(t *testing.T, scheme *runtime.Scheme, in, out runtime.Object) {
	t.Helper()
	if err := scheme.Convert(in, out, nil); err != nil {
		t.Fatalf("convert %T to %T: %v", in, out, err)
	}
}

// TestCrossVersionRoundTrip: an Event written through one API and read
// through the other, then written back, must come out as it went in. This is
// what happens when one client uses core/v1 and another events.k8s.io/v1 on
// the same stored object.
func TestCrossVersionRoundTrip(t *testing.T) {
	scheme, codecs := servedScheme()
	seed := rand.Int63()
	t.Logf("fuzzer seed %d", seed)
	f := fuzzer.FuzzerFor(fuzzer.MergeFuzzerFuncs(metafuzzer.Funcs, corefuzzer.Funcs), rand.NewSource(seed), codecs)

	tests := []struct {
		name        string
		from, other func() runtime.Object
	}{
		{
			name:  "core/v1 → internal → events.k8s.io/v1 → internal → core/v1",
			from:  func() runtime.Object { return &k8scorev1.Event{} },
			other: func() runtime.Object { return &k8seventsv1.Event{} },
		},
		{
			name:  "events.k8s.io/v1 → internal → core/v1 → internal → events.k8s.io/v1",
			from:  func() runtime.Object { return &k8seventsv1.Event{} },
			other: func() runtime.Object { return &k8scorev1.Event{} },
		},
		{
			name:  "core/v1 list → internal → events.k8s.io/v1 list → internal → core/v1 list",
			from:  func() runtime.Object { return &k8scorev1.EventList{} },
			other: func() runtime.Object { return &k8seventsv1.EventList{} },
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for i := 0; i < iterations; i++ {
				original := tc.from()
				f.Fill(original)

				firstInternal := internalFor(original)
				convert(t, scheme, original.DeepCopyObject(), firstInternal)
				other := tc.other()
				convert(t, scheme, firstInternal.DeepCopyObject(), other)
				secondInternal := internalFor(original)
				convert(t, scheme, other, secondInternal)
				if !apiequality.Semantic.DeepEqual(firstInternal, secondInternal) {
					t.Fatalf("internal objects differ (-first +second):\n%s", diff.Diff(firstInternal, secondInternal))
				}
				back := tc.from()
				convert(t, scheme, secondInternal, back)
				if !apiequality.Semantic.DeepEqual(original, back) {
					t.Fatalf("round trip changed the object (-original +back):\n%s", diff.Diff(original, back))
				}
			}
		})
	}
}

func internalFor(obj runtime.Object) runtime.Object {
	if _, ok := obj.(*k8scorev1.EventList); ok {
		return &core.EventList{}
	}
	if _, ok := obj.(*k8seventsv1.EventList); ok {
		return &core.EventList{}
	}
	return &core.Event{}
}

// TestEveryFieldConverted fills every field of one side with a non-zero
// value, converts, and requires every field of the other side to be set and
// the way back to restore the original. A field the conversion forgets
// (a new field in k8s.io/api, a renamed one left to hand-written code) fails
// here even when the fuzzed round trips happen to pass.
func TestEveryFieldConverted(t *testing.T) {
	scheme, codecs := servedScheme()
	seed := rand.Int63()
	t.Logf("fuzzer seed %d", seed)
	f := fuzzer.FuzzerFor(fuzzer.MergeFuzzerFuncs(metafuzzer.Funcs, nonZeroFuncs), rand.NewSource(seed), codecs).
		NilChance(0).NumElements(1, 2)

	tests := []struct {
		name     string
		from, to func() runtime.Object
	}{
		{"core/v1 Event to internal", func() runtime.Object { return &k8scorev1.Event{} }, func() runtime.Object { return &core.Event{} }},
		{"events.k8s.io/v1 Event to internal", func() runtime.Object { return &k8seventsv1.Event{} }, func() runtime.Object { return &core.Event{} }},
		{"internal Event to core/v1", func() runtime.Object { return &core.Event{} }, func() runtime.Object { return &k8scorev1.Event{} }},
		{"internal Event to events.k8s.io/v1", func() runtime.Object { return &core.Event{} }, func() runtime.Object { return &k8seventsv1.Event{} }},
		{"core/v1 EventList to internal", func() runtime.Object { return &k8scorev1.EventList{} }, func() runtime.Object { return &core.EventList{} }},
		{"events.k8s.io/v1 EventList to internal", func() runtime.Object { return &k8seventsv1.EventList{} }, func() runtime.Object { return &core.EventList{} }},
		{"internal EventList to core/v1", func() runtime.Object { return &core.EventList{} }, func() runtime.Object { return &k8scorev1.EventList{} }},
		{"internal EventList to events.k8s.io/v1", func() runtime.Object { return &core.EventList{} }, func() runtime.Object { return &k8seventsv1.EventList{} }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for i := 0; i < 100; i++ {
				original := tc.from()
				f.Fill(original)
				if unset := zeroFields(reflect.ValueOf(original), ""); len(unset) > 0 {
					t.Fatalf("the fuzzer left fields of %T unset: %v", original, unset)
				}

				converted := tc.to()
				convert(t, scheme, original.DeepCopyObject(), converted)
				if unset := zeroFields(reflect.ValueOf(converted), ""); len(unset) > 0 {
					t.Fatalf("converting %T left fields of %T unset: %v", original, converted, unset)
				}
				back := tc.from()
				convert(t, scheme, converted, back)
				if !apiequality.Semantic.DeepEqual(original, back) {
					t.Fatalf("round trip changed the object (-original +back):\n%s", diff.Diff(original, back))
				}
			}
		})
	}
}

// nonZeroFuncs make the fuzzer fill every scalar with a non-zero value, so
// that a zero after conversion can only mean the field was not carried.
func nonZeroFuncs(_ runtimeserializer.CodecFactory) []interface{} {
	return []interface{}{
		func(s *string, c randfill.Continue) { *s = "s" + c.String(10) },
		func(u *types.UID, c randfill.Continue) { *u = types.UID("u" + c.String(10)) },
		func(i *int32, c randfill.Continue) { *i = 1 + c.Int31n(1000) },
	}
}

// zeroFields lists the zero-valued leaves under v. TypeMeta is not carried
// by conversion; ObjectMeta and ListMeta are copied whole, so their insides
// cannot be lost one field at a time and are not walked.
func zeroFields(v reflect.Value, path string) []string {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return []string{path}
		}
		return zeroFields(v.Elem(), path)
	case reflect.Slice:
		if v.Len() == 0 {
			return []string{path}
		}
		var zero []string
		for i := 0; i < v.Len(); i++ {
			zero = append(zero, zeroFields(v.Index(i), path+"[]")...)
		}
		return zero
	case reflect.Struct:
		switch v.Interface().(type) {
		case metav1.Time, metav1.MicroTime:
			if v.IsZero() {
				return []string{path}
			}
			return nil
		case metav1.TypeMeta, metav1.ObjectMeta, metav1.ListMeta:
			return nil
		}
		var zero []string
		for i := 0; i < v.NumField(); i++ {
			zero = append(zero, zeroFields(v.Field(i), path+"."+v.Type().Field(i).Name)...)
		}
		return zero
	default:
		if v.IsZero() {
			return []string{path}
		}
		return nil
	}
}

// TestFieldMapping pins which external field each internal field lands in.
// The fuzzed tests cannot see two fields swapped consistently both ways
// (firstTimestamp with lastTimestamp, say); this one can.
func TestFieldMapping(t *testing.T) {
	scheme, _ := servedScheme()
	first := metav1.NewTime(time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC))
	last := metav1.NewTime(time.Date(2024, 1, 2, 3, 9, 5, 0, time.UTC))
	eventTime := metav1.NewMicroTime(time.Date(2024, 1, 2, 3, 4, 5, 123456000, time.UTC))
	observed := metav1.NewMicroTime(time.Date(2024, 1, 2, 3, 9, 5, 654321000, time.UTC))
	meta := metav1.ObjectMeta{Name: "pod-a.17a", Namespace: "ns", UID: "event-uid", ResourceVersion: "42"}

	internal := &core.Event{
		ObjectMeta: meta,
		InvolvedObject: core.ObjectReference{
			Kind: "Pod", Namespace: "ns", Name: "pod-a", UID: "pod-uid",
			APIVersion: "v1", ResourceVersion: "7", FieldPath: "spec.containers{app}",
		},
		Reason:              "BackOff",
		Message:             "Back-off restarting failed container",
		Source:              core.EventSource{Component: "kubelet", Host: "node-a"},
		FirstTimestamp:      first,
		LastTimestamp:       last,
		Count:               5,
		Type:                "Warning",
		EventTime:           eventTime,
		Series:              &core.EventSeries{Count: 4, LastObservedTime: observed},
		Action:              "Restarting",
		Related:             &core.ObjectReference{Kind: "Node", Name: "node-a", UID: "node-uid"},
		ReportingController: "kubelet",
		ReportingInstance:   "kubelet-node-a",
	}
	regarding := k8scorev1.ObjectReference{
		Kind: "Pod", Namespace: "ns", Name: "pod-a", UID: "pod-uid",
		APIVersion: "v1", ResourceVersion: "7", FieldPath: "spec.containers{app}",
	}
	related := &k8scorev1.ObjectReference{Kind: "Node", Name: "node-a", UID: "node-uid"}

	tests := []struct {
		name     string
		external runtime.Object
		empty    func() runtime.Object
	}{
		{
			name: "core/v1 keeps the internal names",
			external: &k8scorev1.Event{
				ObjectMeta:          meta,
				InvolvedObject:      regarding,
				Reason:              "BackOff",
				Message:             "Back-off restarting failed container",
				Source:              k8scorev1.EventSource{Component: "kubelet", Host: "node-a"},
				FirstTimestamp:      first,
				LastTimestamp:       last,
				Count:               5,
				Type:                "Warning",
				EventTime:           eventTime,
				Series:              &k8scorev1.EventSeries{Count: 4, LastObservedTime: observed},
				Action:              "Restarting",
				Related:             related,
				ReportingController: "kubelet",
				ReportingInstance:   "kubelet-node-a",
			},
			empty: func() runtime.Object { return &k8scorev1.Event{} },
		},
		{
			name: "events.k8s.io/v1 renames involvedObject, message, source and the timestamps",
			external: &k8seventsv1.Event{
				ObjectMeta:               meta,
				EventTime:                eventTime,
				Series:                   &k8seventsv1.EventSeries{Count: 4, LastObservedTime: observed},
				ReportingController:      "kubelet",
				ReportingInstance:        "kubelet-node-a",
				Action:                   "Restarting",
				Reason:                   "BackOff",
				Regarding:                regarding,
				Related:                  related,
				Note:                     "Back-off restarting failed container",
				Type:                     "Warning",
				DeprecatedSource:         k8scorev1.EventSource{Component: "kubelet", Host: "node-a"},
				DeprecatedFirstTimestamp: first,
				DeprecatedLastTimestamp:  last,
				DeprecatedCount:          5,
			},
			empty: func() runtime.Object { return &k8seventsv1.Event{} },
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			external := tc.empty()
			convert(t, scheme, internal.DeepCopy(), external)
			if !apiequality.Semantic.DeepEqual(tc.external, external) {
				t.Errorf("internal → external (-want +got):\n%s", diff.Diff(tc.external, external))
			}
			back := &core.Event{}
			convert(t, scheme, tc.external.DeepCopyObject(), back)
			if !apiequality.Semantic.DeepEqual(internal, back) {
				t.Errorf("external → internal (-want +got):\n%s", diff.Diff(internal, back))
			}
		})
	}
}
