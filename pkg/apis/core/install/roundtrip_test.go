package install_test

import (
	"math/rand"
	"testing"

	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	"k8s.io/apimachinery/pkg/api/apitesting/roundtrip"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	runtimeserializer "k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/util/diff"
	"sigs.k8s.io/randfill"

	corefuzzer "github.com/eventapiserver/event-apiserver/pkg/apis/core/fuzzer"
	coreinstall "github.com/eventapiserver/event-apiserver/pkg/apis/core/install"
	corev1 "github.com/eventapiserver/event-apiserver/pkg/apis/core/v1"
	eventsinstall "github.com/eventapiserver/event-apiserver/pkg/apis/events/install"
	eventsv1 "github.com/eventapiserver/event-apiserver/pkg/apis/events/v1"
)

const iterations = 500

// servedScheme is the scheme the server runs with: both groups installed.
func servedScheme() (*runtime.Scheme, runtimeserializer.CodecFactory) {
	scheme := runtime.NewScheme()
	coreinstall.Install(scheme)
	eventsinstall.Install(scheme)
	return scheme, runtimeserializer.NewCodecFactory(scheme)
}

func newFuzzer(t *testing.T, codecs runtimeserializer.CodecFactory) *randfill.Filler {
	seed := rand.Int63()
	t.Logf("fuzzer seed %d", seed)
	return fuzzer.FuzzerFor(fuzzer.MergeFuzzerFuncs(metafuzzer.Funcs, corefuzzer.Funcs), rand.NewSource(seed), codecs)
}

var externalKinds = []schema.GroupVersionKind{
	corev1.SchemeGroupVersion.WithKind("Event"),
	corev1.SchemeGroupVersion.WithKind("EventList"),
	eventsv1.SchemeGroupVersion.WithKind("Event"),
	eventsv1.SchemeGroupVersion.WithKind("EventList"),
}

func internalVersion(gv schema.GroupVersion) schema.GroupVersion {
	return schema.GroupVersion{Group: gv.Group, Version: runtime.APIVersionInternal}
}

// TestRoundTripServedScheme runs apimachinery's round-trip checks on the
// served scheme: internal → core/v1 → internal and internal →
// events.k8s.io/v1 → internal in JSON and protobuf, then each external kind
// through JSON and protobuf on its own.
func TestRoundTripServedScheme(t *testing.T) {
	scheme, codecs := servedScheme()
	f := newFuzzer(t, codecs)

	t.Run("internal", func(t *testing.T) {
		roundtrip.RoundTripTypes(t, scheme, codecs, f, nil)
	})
	for _, gvk := range externalKinds {
		t.Run(gvk.String(), func(t *testing.T) {
			roundtrip.RoundTripSpecificKind(t, gvk, scheme, codecs, f, nil)
		})
	}
}

// TestRoundTripThroughEachVersion is the internal round trip spelled out, so
// that it runs for every version even where the library test cannot:
// internal → external → JSON or protobuf → external → internal must give the
// object back, decoded fresh or into an existing object.
func TestRoundTripThroughEachVersion(t *testing.T) {
	scheme, codecs := servedScheme()
	f := newFuzzer(t, codecs)
	json, ok := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), runtime.ContentTypeJSON)
	if !ok {
		t.Fatal("no JSON serializer")
	}
	serializers := []struct {
		name       string
		serializer runtime.Serializer
	}{
		{"json", json.Serializer},
		{"protobuf", protobuf.NewSerializer(scheme, scheme)},
	}

	for _, gvk := range externalKinds {
		for _, s := range serializers {
			t.Run(gvk.String()+" "+s.name, func(t *testing.T) {
				// Decode to the internal version of the group the request
				// came through, as the handlers do.
				codec := codecs.CodecForVersions(s.serializer, s.serializer, gvk.GroupVersion(), internalVersion(gvk.GroupVersion()))
				internalGVK := internalVersion(gvk.GroupVersion()).WithKind(gvk.Kind)
				for i := 0; i < iterations; i++ {
					original := mustNew(t, scheme, internalGVK)
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

					into := mustNew(t, scheme, internalGVK)
					if err := runtime.DecodeInto(codec, data, into); err != nil {
						t.Fatalf("decode into: %v", err)
					}
					if !apiequality.Semantic.DeepEqual(original, into) {
						t.Fatalf("object decoded into differs (-original +decoded):\n%s", diff.Diff(original, into))
					}
				}
			})
		}
	}
}

// TestDecodeIntoLeavesTypeMetaEmpty: the create and update handlers and the
// etcd3 store decode into a new internal object. In kube-apiserver that object
// has no apiVersion or kind. If ours carried the wire's, an unchanged update
// through events.k8s.io/v1 would compare unequal to the stored object (whose
// TypeMeta would say v1), so the field manager would keep the new
// managedFields timestamps and the update would write a new resourceVersion.
func TestDecodeIntoLeavesTypeMetaEmpty(t *testing.T) {
	scheme, codecs := servedScheme()
	f := newFuzzer(t, codecs)
	pb := protobuf.NewSerializer(scheme, scheme)
	for _, gvk := range externalKinds {
		t.Run(gvk.String(), func(t *testing.T) {
			codec := codecs.CodecForVersions(pb, pb, gvk.GroupVersion(), internalVersion(gvk.GroupVersion()))
			internalGVK := internalVersion(gvk.GroupVersion()).WithKind(gvk.Kind)
			original := mustNew(t, scheme, internalGVK)
			f.Fill(original)
			data, err := runtime.Encode(codec, original)
			if err != nil {
				t.Fatal(err)
			}
			into := mustNew(t, scheme, internalGVK)
			if err := runtime.DecodeInto(codec, data, into); err != nil {
				t.Fatal(err)
			}
			// kube's conversions drop TypeMeta (metav1's drop function;
			// ours is in pkg/apis/core/v1/typemeta.go).
			if got := into.GetObjectKind().GroupVersionKind(); !got.Empty() {
				t.Errorf("decoding %v into an internal object set apiVersion/kind %v, want them empty", gvk, got)
			}
		})
	}
}

func mustNew(t *testing.T, scheme *runtime.Scheme, gvk schema.GroupVersionKind) runtime.Object {
	t.Helper()
	obj, err := scheme.New(gvk)
	if err != nil {
		t.Fatal(err)
	}
	return obj
}
