package fieldselectors

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	genericapifilters "k8s.io/apiserver/pkg/endpoints/filters"
	apirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/klog/v2"

	"github.com/eventapiserver/event-apiserver/pkg/apis/core"
)

var (
	coreEvents   = corev1.SchemeGroupVersion.WithResource("events")
	eventsEvents = eventsv1.SchemeGroupVersion.WithResource("events")
)

func TestRewriteSets(t *testing.T) {
	core, events, records := tableFor(coreEvents), tableFor(eventsEvents), eventRecords
	cases := []struct {
		name, in, want string
		table          *table
	}{
		{"in", "reason in (BackOff,Failed)", `reason:in=BackOff\,Failed`, core},
		{"notin", "type notin (Normal)", "type:notin=Normal", core},
		{"with equality", "reason in (BackOff),involvedObject.name=web-0", `involvedObject.name=web-0,reason:in=BackOff`, core},
		{"not equal", "type!=Normal,reason in (A)", "reason:in=A,type!=Normal", core},
		{"a label of the version", "source in (kubelet)", "source:in=kubelet", core},
		{"the window beside a set", "since=168h,reason in (A)", "reason:in=A,since=168h", records},
		// Left to the field selector parser, which refuses or reads them
		// exactly as kube-apiserver does.
		{"no set", "reason=BackOff", "", core},
		{"unclosed", "reason in (BackOff", "", core},
		{"value outside label syntax", "reason in (a b)", "", core},
		{"exists", "reason,type in (A)", "", core},
		{"greater than", "count>1,type in (A)", "", core},
		{"field value with parentheses", "involvedObject.fieldPath=spec.containers{a}(b)", "", core},
		{"unknown label", "color in (red)", "", core},
		{"unknown label beside a set", "reason in (A),color=red", "", core},
		{"a label of the other version", "source in (kubelet)", "", events},
		{"the window", "since in (1h)", "", records},
		{"the window on Events", "since=1h,reason in (A)", "", events},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := tc.table.rewrite(tc.in)
			if got != tc.want || ok != (tc.want != "") {
				t.Fatalf("rewrite(%q) = %q, %v; want %q", tc.in, got, ok, tc.want)
			}
			if ok {
				if _, err := fields.ParseSelector(got); err != nil {
					t.Fatalf("the rewritten %q does not parse as a field selector: %v", got, err)
				}
			}
		})
	}
}

// TestSetFormsFromTables: for every resource and label, a set is served
// exactly when the label has a set form; otherwise the selector reaches
// the handler as sent, and kube-apiserver's parser refuses it with its own
// message.
func TestSetFormsFromTables(t *testing.T) {
	for _, table := range tables {
		setForms, plainOnly := Labels(table.resource)
		if len(setForms) == 0 {
			t.Fatalf("%v: no labels", table.resource)
		}
		unserved := append(slices.Clone(plainOnly), "color", "message", "spec.nodeName")
		for _, label := range setForms {
			for _, selector := range []string{label + " in (a,b)", label + " notin (a)"} {
				if _, ok := table.rewrite(selector); !ok {
					t.Errorf("%v: %q is not served", table.resource, selector)
				}
			}
		}
		for _, label := range unserved {
			for _, selector := range []string{label + " in (a)", label + " notin (a,b)", "type=x," + label + " in (a)"} {
				if got, ok := table.rewrite(selector); ok {
					t.Errorf("%v: %q rewritten to %q; want it left to kube-apiserver's parser", table.resource, selector, got)
				}
				_, err := fields.ParseSelector(selector)
				if err == nil || err.Error() != kubeCannotParse(selector) {
					t.Errorf("%v: %q: kube-apiserver's parser says %v", table.resource, selector, err)
				}
			}
		}
	}
}

// kubeCannotParse is fields.ParseSelector's error for a selector with a
// term that has no `=`: the first such term in sorted order (the selectors
// here have no escaped commas).
func kubeCannotParse(selector string) string {
	parts := strings.Split(selector, ",")
	slices.Sort(parts)
	for _, p := range parts {
		if !strings.Contains(p, "=") {
			return fmt.Sprintf("invalid selector: '%s'; can't understand '%s'", selector, p)
		}
	}
	return ""
}

// chain is the part of the handler chain set selectors take part in: the
// resolution first, WithRequestInfo with the wrapped resolver, a filter
// standing for the audit and authorization (which must see the request as
// sent), and the handler.
func chain(kube apirequest.RequestInfoResolver, audit, handler http.HandlerFunc) http.Handler {
	resolver := RequestInfoResolver(kube)
	inner := WithResolvedSelectors(handler)
	middle := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		audit(w, r)
		inner.ServeHTTP(w, r)
	})
	return WithSetSelectors(genericapifilters.WithRequestInfo(middle, resolver), resolver)
}

func kubeResolver() *apirequest.RequestInfoFactory {
	return &apirequest.RequestInfoFactory{APIPrefixes: sets.NewString("api", "apis"), GrouplessAPIPrefixes: sets.NewString("api")}
}

// TestSetSelectorChain: the handlers get the rewrite, the audit and the
// authorizers the request as sent, and the RequestInfo is resolved as
// kube-apiserver resolves the same request with `=` only: no error logged,
// and a list of the one name metadata.name requires.
func TestSetSelectorChain(t *testing.T) {
	var logged bytes.Buffer
	klog.LogToStderr(false)
	klog.SetOutput(&logged)
	t.Cleanup(func() { klog.SetOutput(io.Discard); klog.LogToStderr(true) })

	const sent = "metadata.name=web-0.1,reason in (BackOff,Failed)"
	cases := []struct {
		name, path, handlerSees string
		wantName                string
	}{
		{"core/v1", "/api/v1/namespaces/ns/events", `metadata.name=web-0.1,reason:in=BackOff\,Failed`, "web-0.1"},
		{"events.k8s.io/v1", "/apis/events.k8s.io/v1/namespaces/ns/events", `metadata.name=web-0.1,reason:in=BackOff\,Failed`, "web-0.1"},
		{"eventrecords", "/apis/history.eventapiserver.io/v1alpha1/namespaces/ns/eventrecords", `metadata.name=web-0.1,reason:in=BackOff\,Failed`, "web-0.1"},
		// kube's resolver takes no name from a legacy watch path's selector.
		{"legacy watch path", "/api/v1/watch/namespaces/ns/events", `metadata.name=web-0.1,reason:in=BackOff\,Failed`, ""},
		// Not a resource with field selectors: left as sent.
		{"another resource", "/api/v1/namespaces/ns/pods", sent, ""},
		{"a subresource", "/api/v1/namespaces/ns/events/x/status", sent, "x"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			target := tc.path + "?" + url.Values{"fieldSelector": {sent}, "limit": {"5"}}.Encode()
			var audited, handled string
			var info *apirequest.RequestInfo
			h := chain(kubeResolver(),
				func(_ http.ResponseWriter, r *http.Request) {
					audited = r.URL.RequestURI()
					info, _ = apirequest.RequestInfoFrom(r.Context())
				},
				func(_ http.ResponseWriter, r *http.Request) { handled = r.URL.Query().Get("fieldSelector") })
			logged.Reset()
			h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", target, nil))
			if handled != tc.handlerSees {
				t.Errorf("the handler saw %q, want %q", handled, tc.handlerSees)
			}
			if audited != target {
				t.Errorf("the audit saw %s, want the request as sent", audited)
			}
			if info.Name != tc.wantName {
				t.Errorf("RequestInfo names %q, want %q", info.Name, tc.wantName)
			}
			if tc.wantName == "web-0.1" && (info.Verb != "list" && info.Verb != "watch" || info.Namespace != "ns") {
				t.Errorf("RequestInfo %+v, want a list or watch in ns", info)
			}
			if info.FieldSelector != "" && info.FieldSelector != sent {
				t.Errorf("authorizers would be shown the field selector %q, not the one sent", info.FieldSelector)
			}
			klog.Flush()
			if tc.handlerSees != sent && logged.Len() > 0 {
				t.Errorf("resolving logged:\n%s", logged.String())
			}
		})
	}
	// Without the resolution, kube's resolver logs the set form as an
	// error and loses the name: what the resolution is for.
	req := httptest.NewRequest("GET", "/api/v1/namespaces/ns/events?"+url.Values{"fieldSelector": {sent}}.Encode(), nil)
	if info, _ := kubeResolver().NewRequestInfo(req); info.Name != "" {
		t.Errorf("kube's resolver took the name %q from a set-based selector; the resolution is no longer needed", info.Name)
	}
}

// TestResolvedOnce: the selector is parsed by one resolution per request,
// and a request without a set or a colon costs no resolution at all.
func TestResolvedOnce(t *testing.T) {
	for selector, want := range map[string]int{
		"reason in (A,B)":  2, // the path, then the rewritten request
		"reason=A,type!=B": 0,
		"reason:in=A":      2,
		"color in (red)":   1, // the path only: nothing to rewrite
		"":                 0,
		"involvedObject.fieldPath=spec.containers{a}": 0,
	} {
		counting := &countingResolver{RequestInfoResolver: kubeResolver()}
		h := WithSetSelectors(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), counting)
		target := "/api/v1/namespaces/ns/events?" + url.Values{"fieldSelector": {selector}}.Encode()
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", target, nil))
		if counting.calls != want {
			t.Errorf("%q: %d RequestInfo resolutions, want %d", selector, counting.calls, want)
		}
	}
}

type countingResolver struct {
	apirequest.RequestInfoResolver
	calls int
}

func (c *countingResolver) NewRequestInfo(req *http.Request) (*apirequest.RequestInfo, error) {
	c.calls++
	return c.RequestInfoResolver.NewRequestInfo(req)
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
			if sent := labelAsSent(r.Field); r.Field != "reason" && sent != tc.sent {
				t.Errorf("%q: labelAsSent(%q) = %q, want %q", got, r.Field, sent, tc.sent)
			}
		}
	}
	if got := labelAsSent("reason" + notInSuffix); got != "reason" {
		t.Errorf("labelAsSent of a set label = %q, want its field", got)
	}
}

// TestReadSelector: Read and Selector are each other's inverse.
func TestReadSelector(t *testing.T) {
	requirements := []Requirement{
		{Field: "involvedObject.uid", Values: []string{"a", "b"}, Set: true},
		{Field: "reason", Values: []string{"BackOff"}},
		{Field: "type", Values: []string{"Normal", "Warning"}, Not: true, Set: true},
		{Field: "type", Values: []string{"x,y"}, Not: true},
	}
	if got := Read(Selector(requirements)); !slices.EqualFunc(got, requirements, func(a, b Requirement) bool {
		return a.Field == b.Field && a.Not == b.Not && a.Set == b.Set && slices.Equal(a.Values, b.Values)
	}) {
		t.Errorf("Read(Selector(%+v)) = %+v", requirements, got)
	}
}

func TestIndexedSet(t *testing.T) {
	cases := []struct {
		selector   string
		namespaced bool
		set        string
		rest       int
	}{
		{"involvedObject.uid:in=a\\,b,type=Normal", true, "involvedObject.uid", 1},
		{"involvedObjectOrRelated.name:in=a", false, "involvedObjectOrRelated.name", 0},
		{"reportingComponent:in=kubelet", false, "reportingComponent", 0},
		// A reporter's bucket costs more than a namespace's scan.
		{"reportingComponent:in=kubelet", true, "", 1},
		{"reason:in=A\\,B", false, "", 1},
		{"involvedObject.uid:notin=a", false, "", 1},
		{"involvedObject.uid:in=a\\,b\\,c\\,d\\,e\\,f\\,g\\,h\\,i\\,j\\,k\\,l\\,m\\,n\\,o\\,p\\,q", false, "", 1},
		{"involvedObject.uid=a", false, "", 1},
	}
	for _, tc := range cases {
		set, rest, ok := IndexedSet(fields.ParseSelectorOrDie(tc.selector), tc.namespaced)
		if ok != (tc.set != "") || set.Field != tc.set || len(rest) != tc.rest {
			t.Errorf("IndexedSet(%q, namespaced %v) = %+v, %d others, %v; want %q, %d others", tc.selector, tc.namespaced, set, len(rest), ok, tc.set, tc.rest)
		}
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
		rewritten, ok := tableFor(coreEvents).rewrite(tc.selector)
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

// TestTablesResolveTheirResources: every table is found from its resource,
// and its kind's conversion answers for it.
func TestTablesResolveTheirResources(t *testing.T) {
	scheme := newScheme(t)
	for _, table := range tables {
		if tableFor(table.resource) != table {
			t.Errorf("%v: another table", table.resource)
		}
		if tableFor(schema.GroupVersionResource{Group: table.resource.Group, Version: "v2", Resource: table.resource.Resource}) != nil {
			t.Errorf("%v: a table for another version", table.resource)
		}
		sets, _ := Labels(table.resource)
		if _, _, err := scheme.ConvertFieldLabel(table.kind, sets[0]+inSuffix, "a"); err != nil {
			t.Errorf("%v: %v", table.kind, err)
		}
	}
}
