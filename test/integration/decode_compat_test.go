package integration

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
func testDecodeMatchesKubeAPIServer(t *testing.T, ours, theirs *rawClient) {
	paths := []string{coreEventsPath, eventsEventsPath}
	served := map[string]schema.GroupVersionKind{
		coreEventsPath:   corev1.SchemeGroupVersion.WithKind("Event"),
		eventsEventsPath: {Group: "events.k8s.io", Version: "v1", Kind: "Event"},
	}

	t.Run("every kind as JSON", func(t *testing.T) {
		for _, gvk := range knownKinds() {
			for _, path := range paths {
				if gvk == served[path] {
					continue
				}
				body := fmt.Sprintf(`{"apiVersion":%q,"kind":%q,"metadata":{"name":"decode-kind"}}`, gvk.GroupVersion().String(), gvk.Kind)
				compareDecode(t, ours, theirs, request{method: http.MethodPost, path: path, contentType: contentJSON, body: []byte(body)})
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
				compareDecode(t, ours, theirs, request{method: http.MethodPost, path: path, contentType: contentProtobuf, body: protobufIn(obj, gvk.GroupVersion())})
			}
		}
		if len(seen) < 50 {
			t.Errorf("only %d group versions sent as protobuf", len(seen))
		}
	})

	v1beta1 := &eventsv1beta1.Event{ObjectMeta: metav1.ObjectMeta{Name: "decode-v1beta1"}, Note: "n", Reason: "R"}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "decode-pod"}}
	var cases []request
	for _, path := range paths {
		post := func(contentType, body string) request {
			return request{method: http.MethodPost, path: path, contentType: contentType, body: []byte(body)}
		}
		cases = append(cases,
			// The other events group's versions: decoded, then refused by
			// version.
			post(contentJSON, `{"apiVersion":"events.k8s.io/v1beta1","kind":"Event","metadata":{"name":"decode-v1beta1"},"note":"n"}`),
			request{method: http.MethodPost, path: path, contentType: contentProtobuf, body: protobufIn(v1beta1, eventsv1beta1.SchemeGroupVersion)},
			post(contentJSON, `{"apiVersion":"events.k8s.io/v1beta1","kind":"EventList","items":[]}`),
			post(contentJSON, `{"apiVersion":"events.k8s.io/v1beta1","kind":"Event","metadata":{"name":"decode-v1beta1"},"deprecatedCount":"x"}`),
			request{method: http.MethodPost, path: path + "?fieldValidation=Strict", contentType: contentJSON,
				body: []byte(`{"apiVersion":"events.k8s.io/v1beta1","kind":"Event","metadata":{"name":"decode-v1beta1"},"bogus":1}`)},
			post(contentJSON, `{"apiVersion":"events.k8s.io/v2","kind":"Event","metadata":{"name":"decode-v2"}}`),
			post(contentJSON, `{"apiVersion":"v2","kind":"Event","metadata":{"name":"decode-v2"}}`),
			// Missing kind or apiVersion: the request's own fill them in.
			post(contentJSON, `{"kind":"Pod","metadata":{"name":"decode-no-version"}}`),
			post(contentJSON, `{"apiVersion":"apps/v1","metadata":{"name":"decode-no-kind"}}`),
			post(contentJSON, `{"apiVersion":"","kind":"","metadata":{"name":"decode-empty"}}`), // accepted by both on core/v1
			// Kinds of other groups, unversioned kinds under another group,
			// the internal version of Event.
			post(contentJSON, `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"decode-deploy"},"spec":{"replicas":"x"}}`),
			post(contentJSON, `{"apiVersion":"example.com/v1","kind":"Status"}`),
			post(contentJSON, `{"apiVersion":"example.com/v1","kind":"Pod"}`),
			post(contentJSON, `{"apiVersion":"__internal","kind":"Event","metadata":{"name":"decode-internal"}}`),
			post(contentJSON, `{"apiVersion":"events.k8s.io/__internal","kind":"Event","metadata":{"name":"decode-internal"}}`),
			post(contentJSON, `{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"Event"}]}`),
			// YAML and protobuf bodies of another kind.
			post("application/yaml", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: decode-yaml\n"),
			post("application/yaml", "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: decode-yaml\n"),
			post("application/yaml", "apiVersion: events.k8s.io/v1beta1\nkind: Event\nmetadata:\n  name: decode-yaml\n"),
			request{method: http.MethodPost, path: path, contentType: contentProtobuf, body: protobufIn(pod, corev1.SchemeGroupVersion)},
			// An update with another kind.
			request{method: http.MethodPut, path: path + "/decode-put", contentType: contentJSON,
				body: []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"decode-put"}}`)},
			request{method: http.MethodPut, path: path + "/decode-put", contentType: contentJSON,
				body: []byte(`{"apiVersion":"events.k8s.io/v1beta1","kind":"Event","metadata":{"name":"decode-put"}}`)},
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
			for _, c := range []*rawClient{ours, theirs} {
				if r := c.send(t, request{method: http.MethodPost, path: coreEventsPath, contentType: contentJSON, body: coreBody(name, nil)}); r.code != http.StatusCreated {
					t.Fatalf("create on %s: %d %s", c.baseURL, r.code, r.body)
				}
			}
			for _, patch := range []request{
				{contentType: contentMerge, body: []byte(`{"kind":"Pod"}`)},
				{contentType: contentMerge, body: []byte(`{"apiVersion":"apps/v1","kind":"Deployment"}`)},
				// Accepted: the patched object is a v1beta1 Event.
				{contentType: contentMerge, body: []byte(`{"apiVersion":"events.k8s.io/v1beta1"}`)},
				{contentType: contentJSONPatch, body: []byte(`[{"op":"replace","path":"/kind","value":"Pod"}]`)},
				{contentType: contentApply, body: []byte("apiVersion: v1\nkind: Pod\nmetadata:\n  name: " + name + "\n")},
			} {
				patch.method, patch.path = http.MethodPatch, path+"/"+name
				if patch.contentType == contentApply {
					patch.path += "?fieldManager=decode"
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
func compareDecode(t *testing.T, ours, theirs *rawClient, r request) {
	t.Helper()
	o, k := ours.send(t, r), theirs.send(t, r)
	what := fmt.Sprintf("%s %s (%s) %.120q", r.method, r.path, r.contentType, r.body)
	if o.code != k.code {
		t.Errorf("%s: %d, kube-apiserver %d\nours: %.600s\nkube: %.600s", what, o.code, k.code, o.body, k.body)
		return
	}
	if k.code < 400 {
		return
	}
	og, kg := o.status(t), k.status(t)
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
