package event_test

// Fuzz targets for what a create or update body goes through before it
// reaches etcd: decode with the server's codecs (JSON or protobuf, core/v1 or
// events.k8s.io/v1) into the internal Event, the registry's create and update
// rules, the selectable fields, the storm plugin's size and reporter checks,
// and the encoding to storage. Any input may be refused; none may panic.
//
//	go test ./pkg/registry/event -run '^$' -fuzz '^FuzzDecodeCoreV1JSON$' -fuzztime 20s
//
// hack/fuzz.sh runs every target for a bounded time.
//
// The codecs are built here from the install packages pkg/apiserver's
// scheme installs for Events (core first, then events.k8s.io), not taken
// from pkg/apiserver: a fuzzing build instruments every package it links,
// and pkg/apiserver links the whole server (about 1400 packages against
// about 600 here). What pkg/apiserver adds, the history group and the meta
// types of discovery, decodes to objects that are not Events, which these
// targets skip anyway.

import (
	"bytes"
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apiserver/pkg/admission"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/eventapiserver/event-apiserver/pkg/admission/storm"
	"github.com/eventapiserver/event-apiserver/pkg/apis/core"
	coreinstall "github.com/eventapiserver/event-apiserver/pkg/apis/core/install"
	eventsinstall "github.com/eventapiserver/event-apiserver/pkg/apis/events/install"
	"github.com/eventapiserver/event-apiserver/pkg/fieldselectors"
	"github.com/eventapiserver/event-apiserver/pkg/registry/event"
)

const (
	mediaJSON     = runtime.ContentTypeJSON
	mediaProtobuf = runtime.ContentTypeProtobuf
)

var (
	coreV1   = corev1.SchemeGroupVersion
	eventsV1 = eventsv1.SchemeGroupVersion

	scheme = newScheme()
	codecs = serializer.NewCodecFactory(scheme)
)

// newScheme installs what pkg/apiserver's scheme installs for Events, in
// its order: core first, so that the internal Event's first kind is core's.
func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	coreinstall.Install(s)
	eventsinstall.Install(s)
	utilruntime.Must(fieldselectors.AddFieldLabelConversions(s))
	return s
}

func FuzzDecodeCoreV1JSON(f *testing.F)       { fuzzDecode(f, coreV1, mediaJSON) }
func FuzzDecodeCoreV1Protobuf(f *testing.F)   { fuzzDecode(f, coreV1, mediaProtobuf) }
func FuzzDecodeEventsV1JSON(f *testing.F)     { fuzzDecode(f, eventsV1, mediaJSON) }
func FuzzDecodeEventsV1Protobuf(f *testing.F) { fuzzDecode(f, eventsV1, mediaProtobuf) }

// seedEvents are Events as real writers send them: the kubelet through
// tools/record (core/v1, a repeat with a count), the scheduler through
// tools/events (events.k8s.io/v1, a series), and a cluster-scoped one.
func seedEvents() []*core.Event {
	t0 := metav1.NewTime(time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC))
	mt0 := metav1.NewMicroTime(t0.Time)
	return []*core.Event{
		{
			ObjectMeta: metav1.ObjectMeta{Name: "web-0.17c9f0a5b3e1d2c4", Namespace: "default"},
			InvolvedObject: core.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web-0",
				UID: types.UID("3f1c2b4a-8d5e-4f6a-9b7c-0d1e2f3a4b5c"), APIVersion: "v1",
				ResourceVersion: "12345", FieldPath: "spec.containers{web}"},
			Reason:              "BackOff",
			Message:             "Back-off restarting failed container web in pod web-0_default(3f1c2b4a)",
			Source:              core.EventSource{Component: "kubelet", Host: "node-1"},
			FirstTimestamp:      t0,
			LastTimestamp:       metav1.NewTime(t0.Add(5 * time.Minute)),
			Count:               17,
			Type:                "Warning",
			ReportingController: "kubelet",
			ReportingInstance:   "node-1",
		},
		{
			ObjectMeta: metav1.ObjectMeta{Name: "web-1.17c9f0a5b3e1d2c5", Namespace: "default",
				Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"note": "seed"}},
			InvolvedObject: core.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web-1",
				UID: types.UID("4f1c2b4a-8d5e-4f6a-9b7c-0d1e2f3a4b5c"), APIVersion: "v1"},
			Related:             &core.ObjectReference{Kind: "Node", Name: "node-2", APIVersion: "v1"},
			Reason:              "Scheduled",
			Message:             "Successfully assigned default/web-1 to node-2",
			Action:              "Binding",
			EventTime:           mt0,
			Series:              &core.EventSeries{Count: 2, LastObservedTime: metav1.NewMicroTime(t0.Add(time.Second))},
			Type:                "Normal",
			ReportingController: "default-scheduler",
			ReportingInstance:   "default-scheduler-cp-1",
		},
		{
			ObjectMeta:     metav1.ObjectMeta{Name: "node-1.17c9f0a5b3e1d2c6", Namespace: "default"},
			InvolvedObject: core.ObjectReference{Kind: "Node", Name: "node-1", UID: "node-1"},
			Reason:         "NodeReady",
			Message:        "Node node-1 status is now: NodeReady",
			Source:         core.EventSource{Component: "kubelet", Host: "node-1"},
			FirstTimestamp: t0,
			LastTimestamp:  t0,
			Count:          1,
			Type:           "Normal",
		},
	}
}

// encode writes an internal Event in gv, as a client would send it.
func encode(t testing.TB, e *core.Event, gv schema.GroupVersion, mediaType string) []byte {
	t.Helper()
	info, ok := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), mediaType)
	if !ok {
		t.Fatalf("no serializer for %s", mediaType)
	}
	var buf bytes.Buffer
	if err := codecs.EncoderForVersion(info.Serializer, gv).Encode(e, &buf); err != nil {
		t.Fatalf("encoding seed %s as %s %s: %v", e.Name, gv, mediaType, err)
	}
	return buf.Bytes()
}

func fuzzDecode(f *testing.F, gv schema.GroupVersion, mediaType string) {
	var seeds [][]byte
	for _, e := range seedEvents() {
		seeds = append(seeds, encode(f, e, gv, mediaType))
	}
	if mediaType == mediaJSON {
		for _, s := range []string{
			`{}`,
			`{"apiVersion":"v1","kind":"Event","metadata":{"name":"x"},"count":-1,"series":{"count":0}}`,
			`{"apiVersion":"events.k8s.io/v1","kind":"Event","metadata":{"name":"x","namespace":"default"},` +
				`"eventTime":"2024-05-01T10:00:00.000000Z","regarding":{},"series":{"count":1},"note":"\uffff"}`,
			`{"kind":"Event","x":[[[[[[[[[[]]]]]]]]]]}`,
		} {
			f.Add([]byte(s))
		}
	} else {
		f.Add([]byte("k8s\x00"))
		f.Add([]byte("k8s\x00\x0a\x05\x0a\x02v1"))
	}

	info, ok := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), mediaType)
	if !ok {
		f.Fatalf("no serializer for %s", mediaType)
	}
	// As the create handler decodes: to the internal version, with the
	// request's kind as the default.
	decoder := codecs.DecoderToVersion(info.Serializer, core.SchemeGroupVersion)
	storageEncoder := codecs.EncoderForVersion(
		mustSerializer(f, mediaProtobuf), corev1.SchemeGroupVersion)
	defaultGVK := gv.WithKind("Event")
	strategy := event.NewStrategy(scheme)
	plugin := storm.New(storm.Config{MaxReporters: 10, MaxEventBytes: storm.DefaultMaxEventBytes})
	old := seedEvents()[0]
	for _, seed := range seeds {
		// Real Events must get through decoding, or the fuzzer starts
		// from nothing.
		if _, _, err := decoder.Decode(seed, &defaultGVK, &core.Event{}); err != nil {
			f.Fatalf("seed does not decode: %v", err)
		}
		f.Add(seed)
	}

	f.Fuzz(func(t *testing.T, body []byte) {
		obj, _, err := decoder.Decode(body, &defaultGVK, &core.Event{})
		if err != nil {
			return
		}
		e, ok := obj.(*core.Event)
		if !ok {
			return
		}
		ctx := requestContext(gv, e.Namespace)

		// Create, as the registry's BeforeCreate runs it, then admission.
		created := e.DeepCopy()
		_ = rest.BeforeCreate(strategy, ctx, created)
		_ = plugin.Validate(ctx, attributes(created, nil, gv), nil)

		// Update over a real Event, as a PATCH ends.
		updated := e.DeepCopy()
		updated.Name, updated.Namespace = old.Name, old.Namespace
		updated.ResourceVersion = "1"
		previous := old.DeepCopy()
		previous.ResourceVersion = "1"
		_ = rest.BeforeUpdate(strategy, ctx, updated, previous)
		_ = plugin.Validate(ctx, attributes(updated, previous, gv), nil)

		// What lists and watches filter on.
		_, _, _ = fieldselectors.GetAttrs(e)

		// What etcd would hold.
		var buf bytes.Buffer
		_ = storageEncoder.Encode(e, &buf)
	})
}

func mustSerializer(t testing.TB, mediaType string) runtime.Serializer {
	info, ok := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), mediaType)
	if !ok {
		t.Fatalf("no serializer for %s", mediaType)
	}
	return info.Serializer
}

// requestContext is what the handler chain puts in a request's context: the
// request's API version decides which validation rules apply.
func requestContext(gv schema.GroupVersion, namespace string) context.Context {
	ctx := genericapirequest.WithNamespace(context.Background(), namespace)
	return genericapirequest.WithRequestInfo(ctx, &genericapirequest.RequestInfo{
		IsResourceRequest: true, Verb: "create", APIGroup: gv.Group, APIVersion: gv.Version,
		Namespace: namespace, Resource: "events",
	})
}

func attributes(obj, old *core.Event, gv schema.GroupVersion) admission.Attributes {
	op, oldObj := admission.Create, runtime.Object(nil)
	if old != nil {
		op, oldObj = admission.Update, old
	}
	return admission.NewAttributesRecord(obj, oldObj, gv.WithKind("Event"), obj.Namespace, obj.Name,
		gv.WithResource("events"), "", op, nil, false, nil)
}
