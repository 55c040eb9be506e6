package install_test

import (
	"math/rand"
	"reflect"
	"testing"

	k8seventsv1 "k8s.io/api/events/v1"
	k8seventsv1beta1 "k8s.io/api/events/v1beta1"
	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	"k8s.io/apimachinery/pkg/api/apitesting/roundtrip"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	runtimeserializer "k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/diff"

	"github.com/eventapiserver/event-apiserver/pkg/apis/core"
	corefuzzer "github.com/eventapiserver/event-apiserver/pkg/apis/core/fuzzer"
	"github.com/eventapiserver/event-apiserver/pkg/apis/events"
	"github.com/eventapiserver/event-apiserver/pkg/apis/events/install"
)

// TestInstall checks that Install alone, without the core group, registers
// what the events.k8s.io handlers need: the shared internal Event under the
// group's internal version, events.k8s.io/v1 as the preferred version, and
// v1beta1, which kube-apiserver's scheme knows too.
func TestInstall(t *testing.T) {
	scheme := runtime.NewScheme()
	install.Install(scheme)

	tests := []struct {
		name string
		gvk  schema.GroupVersionKind
		want reflect.Type
	}{
		{"internal Event is core's", events.SchemeGroupVersion.WithKind("Event"), reflect.TypeOf(core.Event{})},
		{"internal EventList is core's", events.SchemeGroupVersion.WithKind("EventList"), reflect.TypeOf(core.EventList{})},
		{"v1 Event", k8seventsv1.SchemeGroupVersion.WithKind("Event"), reflect.TypeOf(k8seventsv1.Event{})},
		{"v1 EventList", k8seventsv1.SchemeGroupVersion.WithKind("EventList"), reflect.TypeOf(k8seventsv1.EventList{})},
		{"v1beta1 Event", k8seventsv1beta1.SchemeGroupVersion.WithKind("Event"), reflect.TypeOf(k8seventsv1beta1.Event{})},
		{"v1beta1 EventList", k8seventsv1beta1.SchemeGroupVersion.WithKind("EventList"), reflect.TypeOf(k8seventsv1beta1.EventList{})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := scheme.AllKnownTypes()[tc.gvk]
			if !ok {
				t.Fatalf("%v is not registered", tc.gvk)
			}
			if got != tc.want {
				t.Errorf("%v is %v, want %v", tc.gvk, got, tc.want)
			}
		})
	}

	if got, want := scheme.PrioritizedVersionsForGroup(events.GroupName), []schema.GroupVersion{k8seventsv1.SchemeGroupVersion, k8seventsv1beta1.SchemeGroupVersion}; !reflect.DeepEqual(got, want) {
		t.Errorf("version priority %v, want %v", got, want)
	}
}

// TestRoundTripBareInstall: internal → events.k8s.io/v1 → JSON or protobuf →
// internal with only this group installed, so the group does not depend on
// conversions the core group would register.
func TestRoundTripBareInstall(t *testing.T) {
	scheme := runtime.NewScheme()
	install.Install(scheme)
	codecs := runtimeserializer.NewCodecFactory(scheme)
	seed := rand.Int63()
	t.Logf("fuzzer seed %d", seed)
	f := fuzzer.FuzzerFor(fuzzer.MergeFuzzerFuncs(metafuzzer.Funcs, corefuzzer.Funcs), rand.NewSource(seed), codecs)

	for _, gv := range []schema.GroupVersion{k8seventsv1.SchemeGroupVersion, k8seventsv1beta1.SchemeGroupVersion} {
		for _, kind := range []string{"Event", "EventList"} {
			t.Run("external "+gv.Version+" "+kind, func(t *testing.T) {
				roundtrip.RoundTripSpecificKind(t, gv.WithKind(kind), scheme, codecs, f, nil)
			})
		}
	}

	for _, info := range codecs.SupportedMediaTypes() {
		if info.MediaType != runtime.ContentTypeJSON && info.MediaType != runtime.ContentTypeProtobuf {
			continue
		}
		t.Run("internal Event via "+info.MediaType, func(t *testing.T) {
			codec := codecs.CodecForVersions(info.Serializer, info.Serializer, k8seventsv1.SchemeGroupVersion, events.SchemeGroupVersion)
			for i := 0; i < 200; i++ {
				original := &core.Event{}
				f.Fill(original)
				data, err := runtime.Encode(codec, original)
				if err != nil {
					t.Fatalf("encode: %v", err)
				}
				decoded, err := runtime.Decode(codec, data)
				if err != nil {
					t.Fatalf("decode: %v", err)
				}
				if !apiequality.Semantic.DeepEqual(original, decoded) {
					t.Fatalf("decoded object differs (-original +decoded):\n%s", diff.Diff(original, decoded))
				}
			}
		})
	}
}
