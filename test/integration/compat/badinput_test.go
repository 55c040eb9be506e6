package compat

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

const (
	contentProtobuf = "application/vnd.kubernetes.protobuf"
)

// badInputCase is a request the server must refuse with a 4xx Status, and
// the Status kube-apiserver v1.36.3 answers it with.
type badInputCase struct {
	name string
	// setup requests run first and must succeed (2xx).
	setup []framework.Request
	req   framework.Request
	// want is kube-apiserver's answer: code, reason and message.
	wantCode    int
	wantReason  metav1.StatusReason
	wantMessage string
}

// protobufOf encodes obj in the "k8s\x00" envelope with client-go's scheme.
func protobufOf(obj runtime.Object, gv runtime.GroupVersioner) []byte {
	var buf bytes.Buffer
	codec := scheme.Codecs.EncoderForVersion(protobuf.NewSerializer(scheme.Scheme, scheme.Scheme), gv)
	if err := codec.Encode(obj, &buf); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

func badInputCases() []badInputCase {
	post := func(path, contentType string, body []byte) framework.Request {
		return framework.Request{Method: http.MethodPost, Path: path, ContentType: contentType, Body: body}
	}
	longNote := strings.Repeat("n", 1025)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pod-as-event", Namespace: "default"}}
	eventsEvent := &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Name: "group-mismatch-pb", Namespace: "default"}}

	return []badInputCase{
		{
			name:        "malformed JSON, core/v1",
			req:         post(framework.CoreEventsPath, framework.ContentJSON, []byte(`{"apiVersion":"v1","kind":"Event","metadata":{"name":"x"`)),
			wantCode:    http.StatusBadRequest,
			wantReason:  metav1.StatusReasonBadRequest,
			wantMessage: `the object provided is unrecognized (must be of type Event): couldn't get version/kind; json parse error: unexpected end of JSON input ({"apiVersion":"v1","kind":"Eve ...)`,
		},
		{
			name:        "malformed JSON, events.k8s.io/v1",
			req:         post(framework.EventsEventsPath, framework.ContentJSON, []byte(`{"apiVersion":"events.k8s.io/v1","kind":"Event",`)),
			wantCode:    http.StatusBadRequest,
			wantReason:  metav1.StatusReasonBadRequest,
			wantMessage: `the object provided is unrecognized (must be of type Event): couldn't get version/kind; json parse error: unexpected end of JSON input ({"apiVersion":"events.k8s.io/v ...)`,
		},
		{
			name:        "JSON that is not an object",
			req:         post(framework.CoreEventsPath, framework.ContentJSON, []byte(`["not", "an", "event"]`)),
			wantCode:    http.StatusBadRequest,
			wantReason:  metav1.StatusReasonBadRequest,
			wantMessage: `the object provided is unrecognized (must be of type Event): couldn't get version/kind; json parse error: json: cannot unmarshal array into Go value of type struct { APIVersion string "json:\"apiVersion,omitempty\""; Kind string "json:\"kind,omitempty\"" } (5b226e6f74222c2022616e222c20226576656e74225d)`,
		},
		{
			name:        "empty body",
			req:         post(framework.CoreEventsPath, framework.ContentJSON, nil),
			wantCode:    http.StatusBadRequest,
			wantReason:  metav1.StatusReasonBadRequest,
			wantMessage: `the object provided is unrecognized (must be of type Event): couldn't get version/kind; json parse error: unexpected end of JSON input (<empty>)`,
		},
		{
			name:        "wrong type for a field",
			req:         post(framework.CoreEventsPath, framework.ContentJSON, framework.CoreBody("wrong-type", func(m map[string]any) { m["count"] = "seven" })),
			wantCode:    http.StatusBadRequest,
			wantReason:  metav1.StatusReasonBadRequest,
			wantMessage: `Event in version "v1" cannot be handled as a Event: json: cannot unmarshal string into Go struct field Event.count of type int32`,
		},
		{
			name:        "protobuf without the k8s envelope",
			req:         post(framework.CoreEventsPath, contentProtobuf, []byte("this is not protobuf")),
			wantCode:    http.StatusBadRequest,
			wantReason:  metav1.StatusReasonBadRequest,
			wantMessage: `the object provided is unrecognized (must be of type Event): provided data does not appear to be a protobuf message, expected prefix [107 56 115 0] (74686973206973206e6f742070726f746f627566)`,
		},
		{
			name:        "protobuf envelope with a truncated message",
			req:         post(framework.CoreEventsPath, contentProtobuf, []byte("k8s\x00\x0a\x05\x0a\x02v1")),
			wantCode:    http.StatusBadRequest,
			wantReason:  metav1.StatusReasonBadRequest,
			wantMessage: `the object provided is unrecognized (must be of type Event): unexpected EOF (6b3873000a050a027631)`,
		},
		{
			name:        "protobuf envelope with garbage",
			req:         post(framework.EventsEventsPath, contentProtobuf, append([]byte("k8s\x00"), 0xff, 0xff, 0xff, 0xff, 0x0f)),
			wantCode:    http.StatusBadRequest,
			wantReason:  metav1.StatusReasonBadRequest,
			wantMessage: `the object provided is unrecognized (must be of type Event): proto: illegal wireType 7 (6b387300ffffffff0f)`,
		},
		{
			name: "unknown field with fieldValidation=Strict",
			req: post(framework.CoreEventsPath+"?fieldValidation=Strict", framework.ContentJSON,
				framework.CoreBody("strict", func(m map[string]any) { m["spec"] = map[string]any{} })),
			wantCode:    http.StatusBadRequest,
			wantReason:  metav1.StatusReasonBadRequest,
			wantMessage: `Event in version "v1" cannot be handled as a Event: strict decoding error: unknown field "spec"`,
		},
		{
			name:        "unsupported media type",
			req:         post(framework.CoreEventsPath, "text/plain", []byte("hello")),
			wantCode:    http.StatusUnsupportedMediaType,
			wantReason:  metav1.StatusReasonUnsupportedMediaType,
			wantMessage: `the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf`,
		},
		{
			name:        "wrong kind in body: EventList",
			req:         post(framework.CoreEventsPath, framework.ContentJSON, []byte(`{"apiVersion":"v1","kind":"EventList","items":[]}`)),
			wantCode:    http.StatusBadRequest,
			wantReason:  metav1.StatusReasonBadRequest,
			wantMessage: `EventList in version "v1" cannot be handled as a Event: converting (v1.EventList) to (core.Event): unknown conversion`,
		},
		{
			name:        "wrong kind in body: Pod as JSON",
			req:         post(framework.CoreEventsPath, framework.ContentJSON, []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"pod-as-event"}}`)),
			wantCode:    http.StatusBadRequest,
			wantReason:  metav1.StatusReasonBadRequest,
			wantMessage: `Pod in version "v1" cannot be handled as a Event: converting (v1.Pod) to (core.Event): unknown conversion`,
		},
		{
			name:        "unknown kind in body",
			req:         post(framework.CoreEventsPath, framework.ContentJSON, []byte(`{"apiVersion":"v1","kind":"Foo","metadata":{"name":"foo"}}`)),
			wantCode:    http.StatusBadRequest,
			wantReason:  metav1.StatusReasonBadRequest,
			wantMessage: `Foo in version "v1" cannot be handled as a Event: no kind "Foo" is registered for version "v1" in scheme "pkg/runtime/scheme.go:111"`,
		},
		{
			name:        "unknown group in body",
			req:         post(framework.CoreEventsPath, framework.ContentJSON, []byte(`{"apiVersion":"example.com/v1","kind":"Event","metadata":{"name":"foo"}}`)),
			wantCode:    http.StatusBadRequest,
			wantReason:  metav1.StatusReasonBadRequest,
			wantMessage: `Event in version "v1" cannot be handled as a Event: no kind "Event" is registered for version "example.com/v1" in scheme "pkg/runtime/scheme.go:111"`,
		},
		{
			name:        "wrong kind in body: Deployment",
			req:         post(framework.EventsEventsPath, framework.ContentJSON, []byte(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"foo"}}`)),
			wantCode:    http.StatusBadRequest,
			wantReason:  metav1.StatusReasonBadRequest,
			wantMessage: `Deployment in version "v1" cannot be handled as a Event: converting (v1.Deployment) to (core.Event): unknown conversion`,
		},
		{
			name:        "wrong kind in body: Pod as protobuf",
			req:         post(framework.CoreEventsPath, contentProtobuf, protobufOf(pod, corev1.SchemeGroupVersion)),
			wantCode:    http.StatusBadRequest,
			wantReason:  metav1.StatusReasonBadRequest,
			wantMessage: `Pod in version "v1" cannot be handled as a Event: converting (v1.Pod) to (core.Event): unknown conversion`,
		},
		{
			name:        "events.k8s.io/v1 Event sent to core/v1",
			req:         post(framework.CoreEventsPath, framework.ContentJSON, framework.EventsV1Body("group-mismatch", nil)),
			wantCode:    http.StatusBadRequest,
			wantReason:  metav1.StatusReasonBadRequest,
			wantMessage: `the API version in the data (events.k8s.io/v1) does not match the expected API version (v1)`,
		},
		{
			name:        "core/v1 Event sent to events.k8s.io/v1",
			req:         post(framework.EventsEventsPath, framework.ContentJSON, framework.CoreBody("group-mismatch", nil)),
			wantCode:    http.StatusBadRequest,
			wantReason:  metav1.StatusReasonBadRequest,
			wantMessage: `the API version in the data (v1) does not match the expected API version (events.k8s.io/v1)`,
		},
		{
			name:        "events.k8s.io/v1 protobuf sent to core/v1",
			req:         post(framework.CoreEventsPath, contentProtobuf, protobufOf(eventsEvent, eventsv1.SchemeGroupVersion)),
			wantCode:    http.StatusBadRequest,
			wantReason:  metav1.StatusReasonBadRequest,
			wantMessage: `the API version in the data (events.k8s.io/v1) does not match the expected API version (v1)`,
		},
		{
			name: "namespace in body does not match the URL, core/v1",
			req: post(framework.CoreEventsPath, framework.ContentJSON, framework.CoreBody("ns-mismatch", func(m map[string]any) {
				m["metadata"] = map[string]any{"name": "ns-mismatch", "namespace": "other"}
			})),
			wantCode:    http.StatusBadRequest,
			wantReason:  metav1.StatusReasonBadRequest,
			wantMessage: `the namespace of the provided object does not match the namespace sent on the request`,
		},
		{
			name: "namespace in body does not match the URL, events.k8s.io/v1",
			req: post(framework.EventsEventsPath, framework.ContentJSON, framework.EventsV1Body("ns-mismatch", func(m map[string]any) {
				m["metadata"] = map[string]any{"name": "ns-mismatch", "namespace": "other"}
			})),
			wantCode:    http.StatusBadRequest,
			wantReason:  metav1.StatusReasonBadRequest,
			wantMessage: `the namespace of the provided object does not match the namespace sent on the request`,
		},
		{
			name:        "name with a slash, core/v1",
			req:         post(framework.CoreEventsPath, framework.ContentJSON, framework.CoreBody("a/b", nil)),
			wantCode:    http.StatusUnprocessableEntity,
			wantReason:  metav1.StatusReasonInvalid,
			wantMessage: `Event "a/b" is invalid: metadata.name: Invalid value: "a/b": may not contain '/'`,
		},
		{
			name:        "name not a DNS subdomain, events.k8s.io/v1",
			req:         post(framework.EventsEventsPath, framework.ContentJSON, framework.EventsV1Body("Bad_Name", nil)),
			wantCode:    http.StatusUnprocessableEntity,
			wantReason:  metav1.StatusReasonInvalid,
			wantMessage: `Event "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
		},
		{
			name: "no name",
			req: post(framework.CoreEventsPath, framework.ContentJSON, framework.CoreBody("", func(m map[string]any) {
				m["metadata"] = map[string]any{"namespace": "default"}
			})),
			wantCode:    http.StatusUnprocessableEntity,
			wantReason:  metav1.StatusReasonInvalid,
			wantMessage: `Event "" is invalid: metadata.name: Required value: name or generateName is required`,
		},
		{
			name: "involvedObject in another namespace, core/v1",
			req: post(framework.CoreEventsPath, framework.ContentJSON, framework.CoreBody("other-ns", func(m map[string]any) {
				m["involvedObject"] = map[string]any{"kind": "Pod", "name": "p", "namespace": "other"}
			})),
			wantCode:    http.StatusUnprocessableEntity,
			wantReason:  metav1.StatusReasonInvalid,
			wantMessage: `Event "other-ns" is invalid: involvedObject.namespace: Invalid value: "other": does not match event.namespace`,
		},
		{
			name:        "eventTime missing, events.k8s.io/v1",
			req:         post(framework.EventsEventsPath, framework.ContentJSON, framework.EventsV1Body("no-time", func(m map[string]any) { delete(m, "eventTime") })),
			wantCode:    http.StatusUnprocessableEntity,
			wantReason:  metav1.StatusReasonInvalid,
			wantMessage: `Event "no-time" is invalid: eventTime: Required value`,
		},
		{
			name: "reportingController, reportingInstance and action missing, events.k8s.io/v1",
			req: post(framework.EventsEventsPath, framework.ContentJSON, framework.EventsV1Body("no-reporter", func(m map[string]any) {
				delete(m, "reportingController")
				delete(m, "reportingInstance")
				delete(m, "action")
			})),
			wantCode:    http.StatusUnprocessableEntity,
			wantReason:  metav1.StatusReasonInvalid,
			wantMessage: `Event "no-reporter" is invalid: [reportingController: Required value, reportingController: Invalid value: "": name part must be non-empty, reportingController: Invalid value: "": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]'), reportingInstance: Required value, action: Required value]`,
		},
		{
			name: "reportingComponent missing on a new-style core/v1 Event",
			req: post(framework.CoreEventsPath, framework.ContentJSON, framework.CoreBody("core-no-reporter", func(m map[string]any) {
				m["eventTime"] = "2024-05-01T10:00:00.000000Z"
			})),
			wantCode:    http.StatusUnprocessableEntity,
			wantReason:  metav1.StatusReasonInvalid,
			wantMessage: `Event "core-no-reporter" is invalid: [reportingComponent: Required value, reportingComponent: Invalid value: "": name part must be non-empty, reportingComponent: Invalid value: "": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]'), reportingInstance: Required value, action: Required value]`,
		},
		{
			name:        "invalid type, events.k8s.io/v1",
			req:         post(framework.EventsEventsPath, framework.ContentJSON, framework.EventsV1Body("bad-type", func(m map[string]any) { m["type"] = "Bogus" })),
			wantCode:    http.StatusUnprocessableEntity,
			wantReason:  metav1.StatusReasonInvalid,
			wantMessage: `Event "bad-type" is invalid: type: Invalid value: "": has invalid value: Bogus`,
		},
		{
			name:        "note too long, events.k8s.io/v1",
			req:         post(framework.EventsEventsPath, framework.ContentJSON, framework.EventsV1Body("long-note", func(m map[string]any) { m["note"] = longNote })),
			wantCode:    http.StatusUnprocessableEntity,
			wantReason:  metav1.StatusReasonInvalid,
			wantMessage: `Event "long-note" is invalid: message: Invalid value: "": can have at most 1024 characters`,
		},
		{
			name: "deprecated fields set on create, events.k8s.io/v1",
			req: post(framework.EventsEventsPath, framework.ContentJSON, framework.EventsV1Body("deprecated", func(m map[string]any) {
				m["deprecatedCount"] = 3
				m["deprecatedSource"] = map[string]any{"component": "kubelet"}
				m["deprecatedFirstTimestamp"] = "2024-05-01T10:00:00Z"
			})),
			wantCode:    http.StatusUnprocessableEntity,
			wantReason:  metav1.StatusReasonInvalid,
			wantMessage: `Event "deprecated" is invalid: [firstTimestamp: Invalid value: "": needs to be unset, count: Invalid value: "": needs to be unset, source: Invalid value: "": needs to be unset]`,
		},
		{
			name: "series count below 2, events.k8s.io/v1",
			req: post(framework.EventsEventsPath, framework.ContentJSON, framework.EventsV1Body("short-series", func(m map[string]any) {
				m["series"] = map[string]any{"count": 1, "lastObservedTime": "2024-05-01T10:00:00.000000Z"}
			})),
			wantCode:    http.StatusUnprocessableEntity,
			wantReason:  metav1.StatusReasonInvalid,
			wantMessage: `Event "short-series" is invalid: series.count: Invalid value: "": should be at least 2`,
		},
		{
			name:  "immutable field changed, events.k8s.io/v1",
			setup: []framework.Request{post(framework.EventsEventsPath, framework.ContentJSON, framework.EventsV1Body("immutable", nil))},
			req: framework.Request{Method: http.MethodPatch, Path: framework.EventsEventsPath + "/immutable", ContentType: framework.ContentMerge,
				Body: []byte(`{"note":"changed","reason":"Changed"}`)},
			wantCode:    http.StatusUnprocessableEntity,
			wantReason:  metav1.StatusReasonInvalid,
			wantMessage: `Event "immutable" is invalid: [reason: Invalid value: "Changed": field is immutable, message: Invalid value: "changed": field is immutable]`,
		},
		{
			name: "patch of a missing Event",
			req: framework.Request{Method: http.MethodPatch, Path: framework.CoreEventsPath + "/missing", ContentType: framework.ContentMerge,
				Body: []byte(`{"count":2}`)},
			wantCode:    http.StatusNotFound,
			wantReason:  metav1.StatusReasonNotFound,
			wantMessage: `events "missing" not found`,
		},
		{
			name:        "get of a missing Event, events.k8s.io/v1",
			req:         framework.Request{Method: http.MethodGet, Path: framework.EventsEventsPath + "/missing"},
			wantCode:    http.StatusNotFound,
			wantReason:  metav1.StatusReasonNotFound,
			wantMessage: `events.events.k8s.io "missing" not found`,
		},
		{
			name: "create of an existing Event",
			setup: []framework.Request{
				post(framework.CoreEventsPath, framework.ContentJSON, framework.CoreBody("exists", nil)),
			},
			req:         post(framework.CoreEventsPath, framework.ContentJSON, framework.CoreBody("exists", nil)),
			wantCode:    http.StatusConflict,
			wantReason:  metav1.StatusReasonAlreadyExists,
			wantMessage: `events "exists" already exists`,
		},
		{
			name:        "unsupported field selector, core/v1",
			req:         framework.Request{Method: http.MethodGet, Path: framework.CoreEventsPath + "?fieldSelector=message%3Dx"},
			wantCode:    http.StatusBadRequest,
			wantReason:  metav1.StatusReasonBadRequest,
			wantMessage: `field label not supported: message`,
		},
		{
			name:        "core/v1 field label on events.k8s.io/v1",
			req:         framework.Request{Method: http.MethodGet, Path: framework.EventsEventsPath + "?fieldSelector=involvedObject.name%3Dx"},
			wantCode:    http.StatusBadRequest,
			wantReason:  metav1.StatusReasonBadRequest,
			wantMessage: `field label not supported: involvedObject.name`,
		},
		{
			name:        "malformed field selector",
			req:         framework.Request{Method: http.MethodGet, Path: framework.CoreEventsPath + "?fieldSelector=%3D%3D%3D"},
			wantCode:    http.StatusBadRequest,
			wantReason:  metav1.StatusReasonBadRequest,
			wantMessage: `invalid field selector: unescaped character in value: 61`,
		},
		{
			name:        "malformed label selector",
			req:         framework.Request{Method: http.MethodGet, Path: framework.CoreEventsPath + "?labelSelector=a%20in%20(b"},
			wantCode:    http.StatusBadRequest,
			wantReason:  metav1.StatusReasonBadRequest,
			wantMessage: `unable to parse requirement: found '', expected: ',' or ')'`,
		},
		{
			name:        "malformed resourceVersion on a list",
			req:         framework.Request{Method: http.MethodGet, Path: framework.CoreEventsPath + "?resourceVersion=abc&resourceVersionMatch=Exact"},
			wantCode:    http.StatusBadRequest,
			wantReason:  metav1.StatusReasonBadRequest,
			wantMessage: `invalid resource version: resourceVersion: Invalid value: "abc": strconv.ParseUint: parsing "abc": invalid syntax`,
		},
	}
}

// TestBadInput sends malformed, mistyped and invalid requests with the admin
// token: each gets the 4xx Status kube-apiserver v1.36.3 answers with (code,
// reason and message, taken from its code and checked against it live by
// TestBadInputMatchesKubeAPIServer), never a 500.
func TestBadInput(t *testing.T) {
	t.Parallel()
	server := framework.StartServer(t, framework.ServerOptions{})
	client := framework.AdminRawClient(t, server)
	for _, tc := range badInputCases() {
		t.Run(tc.name, func(t *testing.T) {
			for _, s := range tc.setup {
				if r := client.Send(t, s); r.Code/100 != 2 {
					t.Fatalf("setup %s %s: %d %s", s.Method, s.Path, r.Code, r.Body)
				}
			}
			r := client.Send(t, tc.req)
			if r.Code < 400 || r.Code >= 500 {
				t.Fatalf("got %d, want a 4xx: %s", r.Code, r.Body)
			}
			got := r.Status(t)
			if r.Code != tc.wantCode || got.Code != int32(tc.wantCode) || got.Reason != tc.wantReason || got.Message != tc.wantMessage {
				t.Errorf("got %d %s %q (status code %d)\nwant %d %s %q", r.Code, got.Reason, got.Message, got.Code,
					tc.wantCode, tc.wantReason, tc.wantMessage)
			}
			if got.Status != metav1.StatusFailure {
				t.Errorf("status %q, want %q", got.Status, metav1.StatusFailure)
			}
		})
	}
}

// TestBadInputMatchesKubeAPIServer sends the same requests to our server and
// to kube-apiserver v1.36.3 and compares code, reason, message and details.
// It skips when _output/bin/kube-apiserver has not been built
// (hack/build-kube.sh).
func TestBadInputMatchesKubeAPIServer(t *testing.T) {
	t.Parallel()
	kube := framework.StartKubeAPIServer(t, framework.KubeAPIServerOptions{})
	server := framework.StartServer(t, framework.ServerOptions{})
	ours := framework.AdminRawClient(t, server)
	theirs := framework.NewRawClient(t, kube.RestConfig(), kube.AdminToken)
	t.Run("bodies of other kinds", func(t *testing.T) { testDecodeMatchesKubeAPIServer(t, ours, theirs) })
	for _, tc := range badInputCases() {
		t.Run(tc.name, func(t *testing.T) {
			for _, s := range tc.setup {
				for who, c := range map[string]*framework.RawClient{"event-apiserver": ours, "kube-apiserver": theirs} {
					if r := c.Send(t, s); r.Code/100 != 2 {
						t.Fatalf("setup on %s %s %s: %d %s", who, s.Method, s.Path, r.Code, r.Body)
					}
				}
			}
			o, k := ours.Send(t, tc.req), theirs.Send(t, tc.req)
			if k.Code != tc.wantCode {
				t.Errorf("kube-apiserver answered %d, the test expects %d: %s", k.Code, tc.wantCode, k.Body)
			}
			if o.Code != k.Code {
				t.Fatalf("code %d, kube-apiserver %d\nours: %s\nkube: %s", o.Code, k.Code, o.Body, k.Body)
			}
			og, kg := o.Status(t), k.Status(t)
			if og.Reason != kg.Reason || og.Code != kg.Code {
				t.Errorf("reason %s (%d), kube-apiserver %s (%d)", og.Reason, og.Code, kg.Reason, kg.Code)
			}
			switch {
			case og.Message != kg.Message:
				t.Errorf("message differs:\nours: %q\nkube: %q", og.Message, kg.Message)
			case kg.Message != tc.wantMessage:
				t.Errorf("both servers say %q, the test expects %q", kg.Message, tc.wantMessage)
			}
			if !apiequality.Semantic.DeepEqual(og.Details, kg.Details) {
				t.Errorf("details differ:\nours: %+v\nkube: %+v", og.Details, kg.Details)
			}
		})
	}
}
