package storm

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	endpointsmetrics "k8s.io/apiserver/pkg/endpoints/metrics"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/eventapiserver/event-apiserver/pkg/apis/core"
	convcorev1 "github.com/eventapiserver/event-apiserver/pkg/apis/core/v1"
	"github.com/eventapiserver/event-apiserver/pkg/apiserver"
)

// earlyRequest is a POST of e to core/v1 events in namespace default, by
// the user attrs uses, as the generic filters leave it for the API handler.
func earlyRequest(t *testing.T, e *core.Event, contentType, query string, body []byte) *http.Request {
	t.Helper()
	if body == nil {
		var v1 corev1.Event
		if err := convcorev1.Convert_core_Event_To_v1_Event(e, &v1, nil); err != nil {
			t.Fatal(err)
		}
		v1.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Event"}
		info, ok := runtime.SerializerInfoForMediaType(apiserver.Codecs.SupportedMediaTypes(), contentType)
		if !ok {
			t.Fatalf("no serializer for %s", contentType)
		}
		var buf bytes.Buffer
		if err := info.Serializer.Encode(&v1, &buf); err != nil {
			t.Fatal(err)
		}
		body = buf.Bytes()
	}
	target := "/api/v1/namespaces/default/events"
	if query != "" {
		target += "?" + query
	}
	req := httptest.NewRequest(http.MethodPost, target, bytes.NewReader(body))
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Accept", contentType)
	ctx := request.WithRequestInfo(req.Context(), &request.RequestInfo{
		IsResourceRequest: true, Verb: "create", APIVersion: "v1", Namespace: "default", Resource: "events",
		Path: target,
	})
	ctx = request.WithUser(ctx, &user.DefaultInfo{Name: "system:node:n1"})
	return req.WithContext(ctx)
}

// TestEarlyRefusal: once a user has a write refused, its next creates over
// budget are answered before the handler, with the very response the
// admission plugin gives; anything the handler would answer otherwise, and
// writes within budget, reach it with their body intact.
func TestEarlyRefusal(t *testing.T) {
	endpointsmetrics.Register()
	p := New(Config{Create: limitOf(0.001, 1), MaxReporters: 100})
	handlerCalls := 0
	var current *core.Event
	// The handler stands for the API handler: it reads the whole body and
	// runs the admission plugin.
	h := p.WithEarlyRefusal(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handlerCalls++
		if _, err := bytes.NewBuffer(nil).ReadFrom(r.Body); err != nil {
			t.Errorf("reading the body after the filter: %v", err)
		}
		if err := p.Admit(r.Context(), attrs(current, admission.Create, coreEvents, false), nil); err != nil {
			responsewriters.ErrorNegotiated(err, apiserver.Codecs, corev1.SchemeGroupVersion, w, r)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}), apiserver.Codecs)

	const (
		jsonType  = runtime.ContentTypeJSON
		protoType = runtime.ContentTypeProtobuf
	)
	mismatched := kubeletEvent("other-ns", "node-1")
	mismatched.Namespace = "elsewhere"
	owned := kubeletEvent("owned", "node-1")
	owned.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "p", UID: "u"}}
	for _, tc := range []struct {
		name        string
		event       *core.Event
		contentType string
		query       string
		body        []byte
		wantCode    int
		wantEarly   bool
	}{
		{name: "within budget", event: kubeletEvent("a", "node-1"), contentType: jsonType, wantCode: http.StatusCreated},
		{name: "first refusal, in admission", event: kubeletEvent("b", "node-1"), contentType: jsonType, wantCode: http.StatusTooManyRequests},
		{name: "json, early", event: kubeletEvent("c", "node-1"), contentType: jsonType, wantCode: http.StatusTooManyRequests, wantEarly: true},
		{name: "protobuf, early", event: kubeletEvent("d", "node-1"), contentType: protoType, wantCode: http.StatusTooManyRequests, wantEarly: true},
		{name: "another reporter of the user, within budget", event: kubeletEvent("e", "node-2"), contentType: protoType, wantCode: http.StatusCreated},
		{name: "client-go's timeout, early", event: kubeletEvent("t", "node-1"), contentType: protoType, query: "timeout=2m0s", wantCode: http.StatusTooManyRequests, wantEarly: true},
		{name: "fieldManager goes to the handler", event: kubeletEvent("m", "node-1"), contentType: jsonType, query: "timeout=1m0s&fieldManager=x", wantCode: http.StatusTooManyRequests},
		{name: "dry run goes to the handler", event: kubeletEvent("f", "node-1"), contentType: jsonType, query: "dryRun=All", wantCode: http.StatusTooManyRequests},
		{name: "a body that does not decode goes to the handler", event: kubeletEvent("g", "node-1"), contentType: jsonType, body: []byte(`{"kind":"Event",`), wantCode: http.StatusTooManyRequests},
		{name: "an unknown field (a warning) goes to the handler", event: kubeletEvent("h", "node-1"), contentType: jsonType,
			body:     []byte(`{"apiVersion":"v1","kind":"Event","metadata":{"name":"h"},"source":{"component":"kubelet","host":"node-1"},"reportingComponent":"kubelet","reportingInstance":"node-1","bogus":1}`),
			wantCode: http.StatusTooManyRequests},
		{name: "another namespace in the body goes to the handler", event: mismatched, contentType: jsonType, wantCode: http.StatusTooManyRequests},
		{name: "ownerReferences go to the handler", event: owned, contentType: jsonType, wantCode: http.StatusTooManyRequests},
	} {
		t.Run(tc.name, func(t *testing.T) {
			current = tc.event
			calls := handlerCalls
			counted := requestsCounted(t)
			req := earlyRequest(t, tc.event, tc.contentType, tc.query, tc.body)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			// The handler stands in for the API handler without its
			// instrumentation: only early answers count here.
			if got, want := requestsCounted(t)-counted, map[bool]float64{true: 1}[tc.wantEarly]; got != want {
				t.Errorf("apiserver_request_total{code=\"429\",resource=\"events\",verb=\"POST\"} grew by %g, want %g", got, want)
			}
			if w.Code != tc.wantCode {
				t.Fatalf("code %d, want %d: %s", w.Code, tc.wantCode, w.Body.String())
			}
			if early := handlerCalls == calls; early != tc.wantEarly {
				t.Fatalf("answered before the handler: %v, want %v", early, tc.wantEarly)
			}
			if !tc.wantEarly {
				return
			}
			// The admission plugin's answer for the same write now.
			want := httptest.NewRecorder()
			err := p.Admit(context.Background(), attrs(tc.event, admission.Create, coreEvents, false), nil)
			responsewriters.ErrorNegotiated(err, apiserver.Codecs, corev1.SchemeGroupVersion, want, earlyRequest(t, tc.event, tc.contentType, "", nil))
			if got, want := w.Header().Get("Retry-After"), want.Header().Get("Retry-After"); got != want || got == "" {
				t.Errorf("Retry-After %q, admission's %q", got, want)
			}
			if got, want := w.Header().Get("Content-Type"), want.Header().Get("Content-Type"); got != want {
				t.Errorf("Content-Type %q, admission's %q", got, want)
			}
			if !bytes.Equal(w.Body.Bytes(), want.Body.Bytes()) {
				t.Errorf("body\n%q\nadmission's\n%q", w.Body.String(), want.Body.String())
			}
			if tc.contentType == jsonType {
				var status metav1.Status
				if err := json.Unmarshal(w.Body.Bytes(), &status); err != nil || status.Reason != metav1.StatusReasonTooManyRequests {
					t.Errorf("status %+v (%v), want reason TooManyRequests", status, err)
				}
			}
		})
	}
}

// requestsCounted is apiserver_request_total for refused Event creates.
func requestsCounted(t *testing.T) float64 {
	t.Helper()
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"code": "429", "resource": "events", "verb": "POST", "scope": "resource", "version": "v1", "component": "apiserver"}
	var sum float64
	for _, f := range families {
		if f.GetName() != "apiserver_request_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			matched := 0
			for _, l := range m.GetLabel() {
				if v, ok := want[l.GetName()]; ok && v == l.GetValue() {
					matched++
				}
			}
			if matched == len(want) {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}
