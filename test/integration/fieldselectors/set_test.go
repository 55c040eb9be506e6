package fieldselectors

import (
	"bytes"
	"context"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// TestSetFieldSelectors: each set-based form (`in` and `notin`, over
// indexed and unindexed fields, alone and beside others) selects, through
// core/v1, events.k8s.io/v1 and history's eventrecords, in a namespace and
// across namespaces, the same Events as its plain forms in kube-apiserver's
// grammar (the union of the `=` lists of its values; notin as `!=` terms);
// every `in` over an indexed field is answered by the watch cache from index
// buckets without scanning a single Event (its
// apiserver_cache_list_fetched_objects_total for no index stays put); and a
// malformed set selector, or the internal `reason:in=` spelling that
// kube-apiserver's grammar does not have, gets kube-apiserver v1.36.3's 400,
// compared byte for byte with the real kube-apiserver's answer.
func TestSetFieldSelectors(t *testing.T) {
	t.Parallel()
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "_output", "bin", "kube-apiserver")); err != nil {
		t.Skip("kube-apiserver " + framework.KubeVersion + " is not built (_output/bin/kube-apiserver; hack/build-kube.sh): " +
			"cannot compare refusals with it")
	}
	ours := framework.StartServer(t, framework.ServerOptions{EtcdServers: framework.StartEtcd(t).ClientURL(),
		ExtraArgs: []string{"--history-batch-interval=100ms"}})
	kube := framework.StartKubeAPIServer(t, framework.KubeAPIServerOptions{})
	ctx := framework.PollCtx(t)
	ns := framework.UniqueName("sets")
	client := ours.Client(t)
	// Another pod in another namespace, with another reporter: lists
	// across namespaces must tell them apart.
	ns2 := framework.UniqueName("sets-other")
	pod := corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "web-0", UID: types.UID(framework.UniqueName("uid")), APIVersion: "v1"}
	pod2 := corev1.ObjectReference{Kind: "Pod", Namespace: ns2, Name: "web-1", UID: types.UID(framework.UniqueName("uid")), APIVersion: "v1"}
	for _, e := range []struct {
		name, reason, typ, reporter string
		pod                         corev1.ObjectReference
	}{
		{"back-off", "BackOff", corev1.EventTypeWarning, "kubelet", pod},
		{"failed", "Failed", corev1.EventTypeWarning, "kubelet", pod},
		{"started", "Started", corev1.EventTypeNormal, "kubelet", pod},
		{"pulled", "Pulled", corev1.EventTypeNormal, "kubelet", pod},
		{"unhealthy", "Unhealthy", corev1.EventTypeWarning, "kubelet", pod},
		{"web-1-scheduled", "Scheduled", corev1.EventTypeNormal, "default-scheduler", pod2},
		{"web-1-failed-mount", "FailedMount", corev1.EventTypeWarning, "kubelet", pod2},
	} {
		now := metav1.Now()
		if _, err := client.CoreV1().Events(e.pod.Namespace).Create(ctx, &corev1.Event{
			ObjectMeta: metav1.ObjectMeta{Name: e.name}, InvolvedObject: e.pod, Reason: e.reason, Type: e.typ,
			Count: 1, FirstTimestamp: now, LastTimestamp: now, Source: corev1.EventSource{Component: e.reporter},
			ReportingController: e.reporter,
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	c := framework.AdminRawClient(t, ours)
	names := func(t *testing.T, path, selector string) []string {
		t.Helper()
		resp := c.Do(t, "GET", path+"?"+url.Values{"fieldSelector": {selector}}.Encode(), nil, map[string]string{"Accept": "application/json"})
		if resp.Code != 200 {
			t.Fatalf("GET %s ?fieldSelector=%s: %d %s", path, selector, resp.Code, resp.Body)
		}
		var list struct {
			Items []struct {
				Metadata metav1.ObjectMeta `json:"metadata"`
				Event    *struct {
					Metadata metav1.ObjectMeta `json:"metadata"`
				} `json:"event"`
			} `json:"items"`
		}
		framework.DecodeJSON(t, resp, &list)
		var out []string
		for _, item := range list.Items {
			if item.Event != nil {
				out = append(out, item.Event.Metadata.Name)
			} else {
				out = append(out, item.Metadata.Name)
			}
		}
		sort.Strings(out)
		return out
	}
	err = wait.PollUntilContextTimeout(ctx, framework.PollInterval, 30*time.Second, true, func(context.Context) (bool, error) {
		return len(names(t, framework.EventRecordsPath+"/eventrecords", "")) == 7, nil
	})
	if err != nil {
		t.Fatalf("history never held the 7 Events: %v", err)
	}
	// indexed says which lists of the Events APIs an index must answer:
	// every one, those across namespaces (a reporter's), or none (a scan).
	const (
		scan = iota
		everywhere
		acrossNamespaces
	)
	u1, u2 := string(pod.UID), string(pod2.UID)
	cases := []struct {
		selector string
		coreV1   string   // the same in core/v1 spelling, when it differs
		want     []string // in ns
		indexed  int
	}{
		{selector: "reason in (BackOff,Failed)", want: []string{"back-off", "failed"}},
		{selector: "type notin (Normal)", want: []string{"back-off", "failed", "unhealthy"}},
		{selector: "type notin (Normal),reason notin (Unhealthy)", want: []string{"back-off", "failed"}},
		{selector: "reason in (Started,BackOff),type=Normal", want: []string{"started"}},
		{selector: "regarding.name in (web-0,web-1),reason in (Pulled)", coreV1: "involvedObject.name in (web-0,web-1),reason in (Pulled)", want: []string{"pulled"}, indexed: everywhere},
		{selector: "type in (Warning),reason notin (Failed)", want: []string{"back-off", "unhealthy"}},
		// Answered with one index lookup per uid (event storage's listSetByIndex).
		{selector: "regarding.uid in (" + u1 + ",other-uid),type=Warning", coreV1: "involvedObject.uid in (" + u1 + ",other-uid),type=Warning",
			want: []string{"back-off", "failed", "unhealthy"}, indexed: everywhere},
		{selector: "regardingOrRelated.uid in (other-uid," + u1 + ")", coreV1: "involvedObjectOrRelated.uid in (other-uid," + u1 + ")",
			want: []string{"back-off", "failed", "pulled", "started", "unhealthy"}, indexed: everywhere},
		// Other sets beside the indexed `in` filter its buckets.
		{selector: "regarding.uid in (" + u1 + "," + u2 + "),type notin (Normal)", coreV1: "involvedObject.uid in (" + u1 + "," + u2 + "),type notin (Normal)",
			want: []string{"back-off", "failed", "unhealthy"}, indexed: everywhere},
		{selector: "regarding.name in (web-0,web-1),type in (Warning)", coreV1: "involvedObject.name in (web-0,web-1),type in (Warning)",
			want: []string{"back-off", "failed", "unhealthy"}, indexed: everywhere},
		// A set over an unindexed field beside an `=` on an indexed one:
		// that field's bucket.
		{selector: "reason in (BackOff,Scheduled),regarding.uid=" + u1, coreV1: "reason in (BackOff,Scheduled),involvedObject.uid=" + u1,
			want: []string{"back-off"}, indexed: everywhere},
		// A reporter's buckets serve lists across namespaces.
		{selector: "reportingController in (kubelet,default-scheduler)", coreV1: "reportingComponent in (kubelet,default-scheduler)",
			want: []string{"back-off", "failed", "pulled", "started", "unhealthy"}, indexed: acrossNamespaces},
		{selector: "reportingController in (default-scheduler)", coreV1: "reportingComponent in (default-scheduler)", indexed: acrossNamespaces},
		// notin is one pass over the scope (setselector.go says why).
		{selector: "regarding.uid notin (" + u2 + ")", coreV1: "involvedObject.uid notin (" + u2 + ")",
			want: []string{"back-off", "failed", "pulled", "started", "unhealthy"}},
		{selector: "regardingOrRelated.name notin (web-0)", coreV1: "involvedObjectOrRelated.name notin (web-0)"},
	}
	config := ours.Config(t)
	scanned := func() float64 {
		return framework.MetricValue(t, config, "apiserver_cache_list_fetched_objects_total", map[string]string{"resource": "events", "index": ""})
	}
	indexedLists := func() float64 {
		return framework.MetricValue(t, config, "apiserver_cache_list_total", map[string]string{"resource": "events"}) -
			framework.MetricValue(t, config, "apiserver_cache_list_total", map[string]string{"resource": "events", "index": ""})
	}
	for _, tc := range cases {
		core := tc.selector
		if tc.coreV1 != "" {
			core = tc.coreV1
		}
		for _, q := range []struct {
			path, selector    string
			events, namespace bool
		}{
			{"/api/v1/namespaces/" + ns + "/events", core, true, true},
			{"/apis/events.k8s.io/v1/namespaces/" + ns + "/events", tc.selector, true, true},
			{framework.EventRecordsPath + "/namespaces/" + ns + "/eventrecords", tc.selector, false, true},
			{"/api/v1/events", core, true, false},
			{"/apis/events.k8s.io/v1/events", tc.selector, true, false},
			{framework.EventRecordsPath + "/eventrecords", tc.selector, false, false},
		} {
			wantIndex := q.events && (tc.indexed == everywhere || (tc.indexed == acrossNamespaces && !q.namespace))
			scannedBefore, indexedBefore := scanned(), indexedLists()
			got := names(t, q.path, q.selector)
			if wantIndex {
				if d := scanned() - scannedBefore; d != 0 {
					t.Errorf("GET %s ?fieldSelector=%s scanned %v Events; want index lookups only", q.path, q.selector, d)
				}
				if indexedLists() == indexedBefore {
					t.Errorf("GET %s ?fieldSelector=%s: no list served from an index", q.path, q.selector)
				}
			}
			// The same answer as kube-apiserver's own forms: the union
			// of the lists each `in` value selects, notin as `!=` terms.
			var scan []string
			for _, plain := range plainForms(t, q.selector) {
				scan = append(scan, names(t, q.path, plain)...)
			}
			slices.Sort(scan)
			scan = slices.Compact(scan)
			if !slices.Equal(got, scan) {
				t.Errorf("GET %s ?fieldSelector=%s: %v, but its plain forms %v select %v", q.path, q.selector, got, plainForms(t, q.selector), scan)
			}
			if q.namespace && !slices.Equal(got, tc.want) {
				t.Errorf("GET %s ?fieldSelector=%s: %v, want %v", q.path, q.selector, got, tc.want)
			}
		}
	}

	// Refusals: what labels.Parse cannot read goes to kube-apiserver's own
	// parser, so the 400 is kube-apiserver's, byte for byte.
	kc := framework.NewRawClient(t, kube.RestConfig(), kube.AdminToken)
	for _, selector := range []string{
		"reason in (BackOff",
		"reason in BackOff,Failed",
		"reason in (Back Off)",
		"reason notin",
		"reason,type in (Normal)",
		"reason in (BackOff))",
		// kube-apiserver has no set form of its own: these are unknown
		// labels there, and here too, though they spell the internal form.
		"reason:in=BackOff",
		"type:notin=Normal,reason=BackOff",
		"type:sent=Normal",
		"type:in:sent=Normal",
	} {
		for _, path := range []string{"/api/v1/namespaces/default/events", "/apis/events.k8s.io/v1/namespaces/default/events"} {
			query := path + "?" + url.Values{"fieldSelector": {selector}}.Encode()
			our := c.Do(t, "GET", query, nil, map[string]string{"Accept": "application/json"})
			theirs := kc.Do(t, "GET", query, nil, map[string]string{"Accept": "application/json"})
			if theirs.Code != 400 {
				t.Fatalf("kube-apiserver answered %q with %d, want 400: %s", selector, theirs.Code, theirs.Body)
			}
			if our.Code != theirs.Code || !bytes.Equal(our.Body, theirs.Body) {
				t.Errorf("GET %s ?fieldSelector=%s:\nevent-apiserver %d %s\n kube-apiserver %d %s", path, selector, our.Code, our.Body, theirs.Code, theirs.Body)
			}
		}
	}
	t.Run("sets not served", func(t *testing.T) { testSetSelectorsNotServed(t, c, kc) })

	// History names an unknown label as the Events APIs do.
	resp := c.Do(t, "GET", framework.EventRecordsPath+"/eventrecords?"+url.Values{"fieldSelector": {"reason:in=BackOff"}}.Encode(), nil, map[string]string{"Accept": "application/json"})
	if st := resp.Status(t); resp.Code != 400 || st.Message != "field label not supported: reason:in" {
		t.Errorf("eventrecords with reason:in=BackOff: %d %q", resp.Code, st.Message)
	}
}

// plainForms spells a set-based selector in kube-apiserver's grammar: one
// selector per combination of its `in` values (the set selects their
// union), each notin as `!=` terms.
func plainForms(t *testing.T, selector string) []string {
	t.Helper()
	parsed, err := labels.Parse(selector)
	if err != nil {
		t.Fatalf("parsing %q: %v", selector, err)
	}
	requirements, _ := parsed.Requirements()
	forms := [][]string{{}}
	for _, r := range requirements {
		var next [][]string
		switch r.Operator() {
		case selection.In:
			for _, form := range forms {
				for _, v := range r.ValuesUnsorted() {
					next = append(next, append(slices.Clone(form), r.Key()+"="+v))
				}
			}
		case selection.NotIn:
			for _, form := range forms {
				f := slices.Clone(form)
				for _, v := range r.ValuesUnsorted() {
					f = append(f, r.Key()+"!="+v)
				}
				next = append(next, f)
			}
		case selection.Equals, selection.DoubleEquals:
			for _, form := range forms {
				next = append(next, append(slices.Clone(form), r.Key()+"="+r.ValuesUnsorted()[0]))
			}
		case selection.NotEquals:
			for _, form := range forms {
				next = append(next, append(slices.Clone(form), r.Key()+"!="+r.ValuesUnsorted()[0]))
			}
		default:
			t.Fatalf("selector %q: operator %s", selector, r.Operator())
		}
		forms = next
	}
	out := make([]string, 0, len(forms))
	for _, f := range forms {
		out = append(out, strings.Join(f, ","))
	}
	return out
}
