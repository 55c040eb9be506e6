package fieldselectors

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
	apirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/klog/v2"

	"github.com/eventapiserver/event-apiserver/pkg/apis/core"
)

func TestRewriteSetSelector(t *testing.T) {
	cases := []struct {
		name, in, want string
		ok             bool
	}{
		{"in", "reason in (BackOff,Failed)", `reason:in=BackOff\,Failed`, true},
		{"notin", "type notin (Normal)", "type:notin=Normal", true},
		{"with equality", "reason in (BackOff),involvedObject.name=web-0", `involvedObject.name=web-0,reason:in=BackOff`, true},
		{"not equal", "type!=Normal,reason in (A)", "reason:in=A,type!=Normal", true},
		// Left to the field selector parser, which refuses or reads them
		// exactly as kube-apiserver does.
		{"no set", "reason=BackOff", "reason=BackOff", false},
		{"unclosed", "reason in (BackOff", "reason in (BackOff", false},
		{"value outside label syntax", "reason in (a b)", "reason in (a b)", false},
		{"exists", "reason,type in (A)", "reason,type in (A)", false},
		{"greater than", "count>1,type in (A)", "count>1,type in (A)", false},
		{"field value with parentheses", "involvedObject.fieldPath=spec.containers{a}(b)", "involvedObject.fieldPath=spec.containers{a}(b)", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := RewriteSetSelector(tc.in)
			if got != tc.want || ok != tc.ok {
				t.Fatalf("RewriteSetSelector(%q) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
			}
			if ok {
				if _, err := fields.ParseSelector(got); err != nil {
					t.Fatalf("the rewritten %q does not parse as a field selector: %v", got, err)
				}
			}
		})
	}
}

func TestWithSetSelectors(t *testing.T) {
	var seen string
	h := WithSetSelectors(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { seen = r.URL.Query().Get("fieldSelector") }))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/api/v1/events?limit=5&fieldSelector=reason+in+%28A%2CB%29", nil))
	if seen != `reason:in=A\,B` {
		t.Fatalf("handler saw %q", seen)
	}
}

// TestRequestInfoResolver: the RequestInfo of a request with a set-based
// selector is resolved as kube-apiserver resolves the same request with
// `=` only: no error logged, a list of the one name metadata.name
// requires, and the request itself left as sent.
func TestRequestInfoResolver(t *testing.T) {
	var logged bytes.Buffer
	klog.LogToStderr(false)
	klog.SetOutput(&logged)
	t.Cleanup(func() { klog.SetOutput(io.Discard); klog.LogToStderr(true) })

	kube := &apirequest.RequestInfoFactory{APIPrefixes: sets.NewString("api", "apis"), GrouplessAPIPrefixes: sets.NewString("api")}
	const target = "/api/v1/namespaces/ns/events?fieldSelector=metadata.name%3Dweb-0.1%2Creason+in+%28BackOff%2CFailed%29"
	req := httptest.NewRequest("GET", target, nil)
	info, err := RequestInfoResolver(kube).NewRequestInfo(req)
	if err != nil {
		t.Fatal(err)
	}
	if info.Verb != "list" || info.Resource != "events" || info.Namespace != "ns" || info.Name != "web-0.1" {
		t.Errorf("RequestInfo %+v, want a list of events/web-0.1 in ns", info)
	}
	if req.URL.RequestURI() != target {
		t.Errorf("the request became %s", req.URL.RequestURI())
	}
	if sent := "metadata.name=web-0.1,reason in (BackOff,Failed)"; info.FieldSelector != "" && info.FieldSelector != sent {
		t.Errorf("authorizers would be shown the field selector %q, not the one sent, %q", info.FieldSelector, sent)
	}
	klog.Flush()
	if logged.Len() > 0 {
		t.Errorf("resolving logged:\n%s", logged.String())
	}
	// Without the rewrite, kube's resolver logs the set form as an error
	// and loses the name: what the wrapper is for.
	if info, _ := kube.NewRequestInfo(req); info.Name != "" {
		t.Errorf("kube's resolver took the name %q from a set-based selector; the wrapper is no longer needed", info.Name)
	}
}

// TestClientLabels: a client's own spelling of an internal label is marked,
// so that it is refused naming the label as sent, as kube-apiserver
// refuses an unknown label; other selectors pass unchanged.
func TestClientLabels(t *testing.T) {
	cases := []struct{ in, want, sent string }{
		{"reason:in=BackOff", "reason:in:sent=BackOff", "reason:in"},
		{"type:notin!=Normal,reason=A", "reason=A,type:notin:sent!=Normal", "type:notin"},
		{"type:sent=Normal", "type:sent:sent=Normal", "type:sent"},
		{"reason=A:in", "", ""},
		{"reason=BackOff", "", ""},
	}
	for _, tc := range cases {
		got, ok := markClientLabels(tc.in)
		if ok != (tc.want != "") || (ok && got != tc.want) {
			t.Errorf("markClientLabels(%q) = %q, %v; want %q", tc.in, got, ok, tc.want)
			continue
		}
		if !ok {
			continue
		}
		parsed, err := fields.ParseSelector(got)
		if err != nil {
			t.Fatalf("%q: %v", got, err)
		}
		for _, r := range parsed.Requirements() {
			if base, suffix := splitSetLabel(r.Field); suffix != "" || base != r.Field {
				t.Errorf("%q: marked label %q reads as a set label", got, r.Field)
			}
			if sent := LabelAsSent(r.Field); r.Field != "reason" && sent != tc.sent {
				t.Errorf("%q: LabelAsSent(%q) = %q, want %q", got, r.Field, sent, tc.sent)
			}
		}
	}
	if got := LabelAsSent("reason" + notInSuffix); got != "reason" {
		t.Errorf("LabelAsSent of a set label = %q, want its field", got)
	}
}

func TestSetSelectorMatches(t *testing.T) {
	backOff := &core.Event{Reason: "BackOff", Type: "Warning", InvolvedObject: core.ObjectReference{Name: "web-0"}}
	started := &core.Event{Reason: "Started", Type: "Normal", InvolvedObject: core.ObjectReference{Name: "web-1"},
		Related: &core.ObjectReference{Name: "web-0"}}
	cases := []struct {
		selector string
		want     []bool
	}{
		{"reason in (BackOff,Failed)", []bool{true, false}},
		{"type notin (Normal)", []bool{true, false}},
		{"type notin (Normal,Warning)", []bool{false, false}},
		{"involvedObjectOrRelated.name in (web-0)", []bool{true, true}},
		{"involvedObjectOrRelated.name notin (web-0)", []bool{false, false}},
		{"reason in (BackOff,Started),type=Normal", []bool{false, true}},
	}
	for _, tc := range cases {
		rewritten, ok := RewriteSetSelector(tc.selector)
		if !ok {
			t.Fatalf("%q not rewritten", tc.selector)
		}
		field, err := fields.ParseSelector(rewritten)
		if err != nil {
			t.Fatal(err)
		}
		p := Matcher(labels.Everything(), field)
		for i, e := range []*core.Event{backOff, started} {
			if got, err := p.Matches(e); err != nil || got != tc.want[i] {
				t.Errorf("%q on %s: %v (%v), want %v", tc.selector, e.Reason, got, err, tc.want[i])
			}
		}
		// A set requirement pins no index bucket: the scope is scanned.
		if len(p.IndexFields) != 0 {
			t.Errorf("%q: index fields %v", tc.selector, p.IndexFields)
		}
	}
}
