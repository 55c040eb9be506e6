package compat

import (
	"bytes"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	eventsv1beta1 "k8s.io/api/events/v1beta1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/eventapiserver/event-apiserver/pkg/apiserver"
	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// testDecodeMatchesKubeAPIServer (a part of TestBadInputMatchesKubeAPIServer,
// which starts both servers) sends bodies that are no Event of the group
// they are sent to, to both groups of our server and of kube-apiserver
// v1.36.3, and compares the answers' code, reason, message and details: a
// body of every kind that kube-apiserver's scheme (as our scheme mirrors
// it) or client-go's knows, as JSON, one kind of each group version as
// protobuf, some as YAML, and the decode errors around them (other versions
// of Events, missing kind or apiVersion, an unknown version, creates,
// updates and patches that name another kind).
//
// kube-apiserver decodes a Pod sent to /api/v1/namespaces/x/events, fails
// to convert it to an Event and answers with its conversion message; so do
// we, because our scheme knows the kinds its does (pkg/apiserver/kinds.go).
// Left out: history.eventapiserver.io, which kube-apiserver does not know
// and we do, and kube's internal versions (`apiVersion: __internal`) of
// kinds other than Event, which only k8s.io/kubernetes defines.
func testDecodeMatchesKubeAPIServer(t *testing.T, ours, theirs *framework.RawClient) {
	paths := []string{framework.CoreEventsPath, framework.EventsEventsPath}
	served := map[string]schema.GroupVersionKind{
		framework.CoreEventsPath:   corev1.SchemeGroupVersion.WithKind("Event"),
		framework.EventsEventsPath: {Group: "events.k8s.io", Version: "v1", Kind: "Event"},
	}

	t.Run("every kind as JSON", func(t *testing.T) {
		for _, gvk := range knownKinds() {
			for _, path := range paths {
				if gvk == served[path] {
					continue
				}
				body := fmt.Sprintf(`{"apiVersion":%q,"kind":%q,"metadata":{"name":"decode-kind"}}`, gvk.GroupVersion().String(), gvk.Kind)
				compareDecode(t, ours, theirs, framework.Request{Method: http.MethodPost, Path: path, ContentType: framework.ContentJSON, Body: []byte(body)})
			}
		}
	})

	t.Run("a kind of each group version as protobuf", func(t *testing.T) {
		seen := map[schema.GroupVersion]bool{}
		for _, gvk := range knownKinds() {
			goType, ok := clientgoscheme.Scheme.AllKnownTypes()[gvk]
			if seen[gvk.GroupVersion()] || !ok || !strings.HasPrefix(goType.PkgPath(), "k8s.io/api/") {
				continue
			}
			seen[gvk.GroupVersion()] = true
			obj, err := clientgoscheme.Scheme.New(gvk)
			if err != nil {
				t.Fatal(err)
			}
			if m, err := metaAccessor(obj); err == nil {
				m.SetName("decode-protobuf")
			}
			for _, path := range paths {
				if gvk == served[path] {
					continue
				}
				compareDecode(t, ours, theirs, framework.Request{Method: http.MethodPost, Path: path, ContentType: contentProtobuf, Body: protobufIn(obj, gvk.GroupVersion())})
			}
		}
		if len(seen) < 50 {
			t.Errorf("only %d group versions sent as protobuf", len(seen))
		}
	})

	v1beta1 := &eventsv1beta1.Event{ObjectMeta: metav1.ObjectMeta{Name: "decode-v1beta1"}, Note: "n", Reason: "R"}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "decode-pod"}}
	var cases []framework.Request
	for _, path := range paths {
		post := func(contentType, body string) framework.Request {
			return framework.Request{Method: http.MethodPost, Path: path, ContentType: contentType, Body: []byte(body)}
		}
		cases = append(cases,
			// The other events group's versions: decoded, then refused by
			// version.
			post(framework.ContentJSON, `{"apiVersion":"events.k8s.io/v1beta1","kind":"Event","metadata":{"name":"decode-v1beta1"},"note":"n"}`),
			framework.Request{Method: http.MethodPost, Path: path, ContentType: contentProtobuf, Body: protobufIn(v1beta1, eventsv1beta1.SchemeGroupVersion)},
			post(framework.ContentJSON, `{"apiVersion":"events.k8s.io/v1beta1","kind":"EventList","items":[]}`),
			post(framework.ContentJSON, `{"apiVersion":"events.k8s.io/v1beta1","kind":"Event","metadata":{"name":"decode-v1beta1"},"deprecatedCount":"x"}`),
			framework.Request{Method: http.MethodPost, Path: path + "?fieldValidation=Strict", ContentType: framework.ContentJSON,
				Body: []byte(`{"apiVersion":"events.k8s.io/v1beta1","kind":"Event","metadata":{"name":"decode-v1beta1"},"bogus":1}`)},
			post(framework.ContentJSON, `{"apiVersion":"events.k8s.io/v2","kind":"Event","metadata":{"name":"decode-v2"}}`),
			post(framework.ContentJSON, `{"apiVersion":"v2","kind":"Event","metadata":{"name":"decode-v2"}}`),
			// Missing kind or apiVersion: the request's own fill them in.
			post(framework.ContentJSON, `{"kind":"Pod","metadata":{"name":"decode-no-version"}}`),
			post(framework.ContentJSON, `{"apiVersion":"apps/v1","metadata":{"name":"decode-no-kind"}}`),
			post(framework.ContentJSON, `{"apiVersion":"","kind":"","metadata":{"name":"decode-empty"}}`), // accepted by both on core/v1
			// Kinds of other groups, unversioned kinds under another group,
			// the internal version of Event.
			post(framework.ContentJSON, `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"decode-deploy"},"spec":{"replicas":"x"}}`),
			post(framework.ContentJSON, `{"apiVersion":"example.com/v1","kind":"Status"}`),
			post(framework.ContentJSON, `{"apiVersion":"example.com/v1","kind":"Pod"}`),
			post(framework.ContentJSON, `{"apiVersion":"__internal","kind":"Event","metadata":{"name":"decode-internal"}}`),
			post(framework.ContentJSON, `{"apiVersion":"events.k8s.io/__internal","kind":"Event","metadata":{"name":"decode-internal"}}`),
			post(framework.ContentJSON, `{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"Event"}]}`),
			// YAML and protobuf bodies of another kind.
			post("application/yaml", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: decode-yaml\n"),
			post("application/yaml", "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: decode-yaml\n"),
			post("application/yaml", "apiVersion: events.k8s.io/v1beta1\nkind: Event\nmetadata:\n  name: decode-yaml\n"),
			framework.Request{Method: http.MethodPost, Path: path, ContentType: contentProtobuf, Body: protobufIn(pod, corev1.SchemeGroupVersion)},
			// An update with another kind.
			framework.Request{Method: http.MethodPut, Path: path + "/decode-put", ContentType: framework.ContentJSON,
				Body: []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"decode-put"}}`)},
			framework.Request{Method: http.MethodPut, Path: path + "/decode-put", ContentType: framework.ContentJSON,
				Body: []byte(`{"apiVersion":"events.k8s.io/v1beta1","kind":"Event","metadata":{"name":"decode-put"}}`)},
		)
	}
	t.Run("other decode errors", func(t *testing.T) {
		for _, r := range cases {
			compareDecode(t, ours, theirs, r)
		}
	})

	// A patch that turns an Event into another kind: the patched object is
	// decoded with the scheme and refused as Invalid, quoting it.
	t.Run("patches to another kind", func(t *testing.T) {
		for i, path := range paths {
			name := fmt.Sprintf("decode-patch-%d", i)
			for _, c := range []*framework.RawClient{ours, theirs} {
				if r := c.Send(t, framework.Request{Method: http.MethodPost, Path: framework.CoreEventsPath, ContentType: framework.ContentJSON, Body: framework.CoreBody(name, nil)}); r.Code != http.StatusCreated {
					t.Fatalf("create on %s: %d %s", c.BaseURL, r.Code, r.Body)
				}
			}
			for _, patch := range []framework.Request{
				{ContentType: framework.ContentMerge, Body: []byte(`{"kind":"Pod"}`)},
				{ContentType: framework.ContentMerge, Body: []byte(`{"apiVersion":"apps/v1","kind":"Deployment"}`)},
				// Accepted: the patched object is a v1beta1 Event.
				{ContentType: framework.ContentMerge, Body: []byte(`{"apiVersion":"events.k8s.io/v1beta1"}`)},
				{ContentType: framework.ContentJSONPatch, Body: []byte(`[{"op":"replace","path":"/kind","value":"Pod"}]`)},
				{ContentType: framework.ContentApply, Body: []byte("apiVersion: v1\nkind: Pod\nmetadata:\n  name: " + name + "\n")},
			} {
				patch.Method, patch.Path = http.MethodPatch, path+"/"+name
				if patch.ContentType == framework.ContentApply {
					patch.Path += "?fieldManager=decode"
				}
				compareDecode(t, ours, theirs, patch)
			}
		}
	})
}

// knownKinds is every external kind our scheme or client-go's knows, but
// history's, sorted.
func knownKinds() []schema.GroupVersionKind {
	set := map[schema.GroupVersionKind]bool{}
	for _, s := range []*runtime.Scheme{apiserver.Scheme, clientgoscheme.Scheme} {
		for gvk := range s.AllKnownTypes() {
			if gvk.Version != runtime.APIVersionInternal && gvk.Group != "history.eventapiserver.io" {
				set[gvk] = true
			}
		}
	}
	out := make([]schema.GroupVersionKind, 0, len(set))
	for gvk := range set {
		out = append(out, gvk)
	}
	slices.SortFunc(out, func(a, b schema.GroupVersionKind) int { return strings.Compare(a.String(), b.String()) })
	return out
}

func metaAccessor(obj runtime.Object) (metav1.Object, error) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("%T has no metadata", obj)
	}
	return m, nil
}

// protobufIn encodes obj as gv in the "k8s\x00" envelope with client-go's
// scheme.
func protobufIn(obj runtime.Object, gv schema.GroupVersion) []byte {
	var buf bytes.Buffer
	codec := clientgoscheme.Codecs.EncoderForVersion(protobuf.NewSerializer(clientgoscheme.Scheme, clientgoscheme.Scheme), gv)
	if err := codec.Encode(obj, &buf); err != nil {
		panic(fmt.Sprintf("encoding %T as %v: %v", obj, gv, err))
	}
	return buf.Bytes()
}

// serverSet is what a message may quote of an object each server set
// itself.
var serverSet = regexp.MustCompile(`\\?"(uid|resourceVersion|creationTimestamp|time)\\?":\\?"[^"\\]*\\?"`)

// compareDecode sends r to both servers and reports where the answers'
// code, reason, message or details differ. Where kube-apiserver accepts the
// request, the codes must agree.
func compareDecode(t *testing.T, ours, theirs *framework.RawClient, r framework.Request) {
	t.Helper()
	o, k := ours.Send(t, r), theirs.Send(t, r)
	what := fmt.Sprintf("%s %s (%s) %.120q", r.Method, r.Path, r.ContentType, r.Body)
	if o.Code != k.Code {
		t.Errorf("%s: %d, kube-apiserver %d\nours: %.600s\nkube: %.600s", what, o.Code, k.Code, o.Body, k.Body)
		return
	}
	if k.Code < 400 {
		return
	}
	og, kg := o.Status(t), k.Status(t)
	for _, s := range []*metav1.Status{&og, &kg} {
		s.Message = serverSet.ReplaceAllString(s.Message, `"$1":"<set>"`)
		if s.Details != nil {
			for i := range s.Details.Causes {
				s.Details.Causes[i].Message = serverSet.ReplaceAllString(s.Details.Causes[i].Message, `"$1":"<set>"`)
			}
		}
	}
	if og.Reason != kg.Reason || og.Code != kg.Code || og.Message != kg.Message {
		t.Errorf("%s:\nours: %d %s %q\nkube: %d %s %q", what, og.Code, og.Reason, og.Message, kg.Code, kg.Reason, kg.Message)
	}
	if !apiequality.Semantic.DeepEqual(og.Details, kg.Details) {
		t.Errorf("%s: details differ:\nours: %+v\nkube: %+v", what, og.Details, kg.Details)
	}
}
