package install_test

import (
	"math/rand"
	"testing"

	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	"k8s.io/apimachinery/pkg/runtime"
	runtimeserializer "k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/diff"
	"sigs.k8s.io/randfill"

	corefuzzer "github.com/eventapiserver/event-apiserver/pkg/apis/core/fuzzer"
	coreinstall "github.com/eventapiserver/event-apiserver/pkg/apis/core/install"
	eventsinstall "github.com/eventapiserver/event-apiserver/pkg/apis/events/install"
	historyapi "github.com/eventapiserver/event-apiserver/pkg/apis/history"
	"github.com/eventapiserver/event-apiserver/pkg/apis/history/install"
	"github.com/eventapiserver/event-apiserver/pkg/apis/history/v1alpha1"
)

// TestRoundTrip sends fuzzed internal EventRecords through
// history.eventapiserver.io/v1alpha1 JSON and back: the Event inside takes
// the events.k8s.io/v1 conversion and must lose nothing. (The group has no
// protobuf: it is read-only and its Events are stored as core/v1.)
func TestRoundTrip(t *testing.T) {
	scheme := runtime.NewScheme()
	coreinstall.Install(scheme)
	eventsinstall.Install(scheme)
	install.Install(scheme)
	codecs := runtimeserializer.NewCodecFactory(scheme)
	seed := rand.Int63()
	t.Logf("fuzzer seed %d", seed)
	f := fuzzer.FuzzerFor(fuzzer.MergeFuzzerFuncs(metafuzzer.Funcs, corefuzzer.Funcs, func(runtimeserializer.CodecFactory) []interface{} {
		return []interface{}{func(r *historyapi.EventRecord, c randfill.Continue) {
			c.FillNoCustom(r)
			c.Fill(&r.Event)
		}}
	}), rand.NewSource(seed), codecs)
	json, ok := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), runtime.ContentTypeJSON)
	if !ok {
		t.Fatal("no JSON serializer")
	}
	codec := codecs.CodecForVersions(json.Serializer, json.Serializer, v1alpha1.SchemeGroupVersion, historyapi.SchemeGroupVersion)
	filled := 0
	for i := 0; i < 500; i++ {
		original := &historyapi.EventRecordList{Items: make([]historyapi.EventRecord, 3)}
		f.Fill(&original.ListMeta)
		for j := range original.Items {
			f.Fill(&original.Items[j])
		}
		for _, r := range original.Items {
			if r.Event.Name != "" && r.Event.Message != "" {
				filled++
			}
		}
		data, err := runtime.Encode(codec, original)
		if err != nil {
			t.Fatalf("encode: %v", err)
		}
		decoded, err := runtime.Decode(codec, data)
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		if !apiequality.Semantic.DeepEqual(original, decoded) {
			t.Fatalf("decoded differs (-original +decoded):\n%s", diff.Diff(original, decoded))
		}
	}
	if filled == 0 {
		t.Fatal("the fuzzer filled no record's Event: the round trip proved nothing")
	}
}
