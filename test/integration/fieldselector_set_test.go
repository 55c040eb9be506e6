package integration

import (
	"bytes"
	"context"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// TestSetFieldSelectors: `reason in (...)` and `type notin (...)` select the
// same Events through core/v1, events.k8s.io/v1 and history's eventrecords,
// and a malformed set selector gets kube-apiserver v1.36.3's 400, compared
// byte for byte with the real kube-apiserver's answer.
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
	ctx := pollCtx(t)
	ns := uniqueName("sets")
	client := ours.Client(t)
	pod := corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "web-0", UID: types.UID(uniqueName("uid")), APIVersion: "v1"}
	for _, e := range []struct{ name, reason, typ string }{
		{"back-off", "BackOff", corev1.EventTypeWarning},
		{"failed", "Failed", corev1.EventTypeWarning},
		{"started", "Started", corev1.EventTypeNormal},
		{"pulled", "Pulled", corev1.EventTypeNormal},
		{"unhealthy", "Unhealthy", corev1.EventTypeWarning},
	} {
		now := metav1.Now()
		if _, err := client.CoreV1().Events(ns).Create(ctx, &corev1.Event{
			ObjectMeta: metav1.ObjectMeta{Name: e.name}, InvolvedObject: pod, Reason: e.reason, Type: e.typ,
			Count: 1, FirstTimestamp: now, LastTimestamp: now, Source: corev1.EventSource{Component: "kubelet"},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	c := adminRawClient(t, ours)
	names := func(t *testing.T, path, selector string) []string {
		t.Helper()
		resp := c.do(t, "GET", path+"?"+url.Values{"fieldSelector": {selector}}.Encode(), nil, map[string]string{"Accept": "application/json"})
		if resp.code != 200 {
			t.Fatalf("GET %s ?fieldSelector=%s: %d %s", path, selector, resp.code, resp.body)
		}
		var list struct {
			Items []struct {
				Metadata metav1.ObjectMeta `json:"metadata"`
				Event    *struct {
					Metadata metav1.ObjectMeta `json:"metadata"`
				} `json:"event"`
			} `json:"items"`
		}
		decodeJSON(t, resp, &list)
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
	err = wait.PollUntilContextTimeout(ctx, pollInterval, 30*time.Second, true, func(context.Context) (bool, error) {
		return len(names(t, eventRecordsPath+"/namespaces/"+ns+"/eventrecords", "")) == 5, nil
	})
	if err != nil {
		t.Fatalf("history never held the 5 Events: %v", err)
	}
	cases := []struct {
		selector string
		coreV1   string // the same in core/v1 spelling, when it differs
		want     []string
	}{
		{selector: "reason in (BackOff,Failed)", want: []string{"back-off", "failed"}},
		{selector: "type notin (Normal)", want: []string{"back-off", "failed", "unhealthy"}},
		{selector: "type notin (Normal),reason notin (Unhealthy)", want: []string{"back-off", "failed"}},
		{selector: "reason in (Started,BackOff),type=Normal", want: []string{"started"}},
		{selector: "regarding.name in (web-0,web-1),reason in (Pulled)", coreV1: "involvedObject.name in (web-0,web-1),reason in (Pulled)", want: []string{"pulled"}},
		{selector: "type in (Warning),reason notin (Failed)", want: []string{"back-off", "unhealthy"}},
		// Answered with one index lookup per uid (event storage's listSetByIndex).
		{selector: "regarding.uid in (" + string(pod.UID) + ",other-uid),type=Warning", coreV1: "involvedObject.uid in (" + string(pod.UID) + ",other-uid),type=Warning",
			want: []string{"back-off", "failed", "unhealthy"}},
		{selector: "regardingOrRelated.uid in (other-uid," + string(pod.UID) + ")", coreV1: "involvedObjectOrRelated.uid in (other-uid," + string(pod.UID) + ")",
			want: []string{"back-off", "failed", "pulled", "started", "unhealthy"}},
	}
	for _, tc := range cases {
		core := tc.selector
		if tc.coreV1 != "" {
			core = tc.coreV1
		}
		for path, selector := range map[string]string{
			"/api/v1/namespaces/" + ns + "/events":                   core,
			"/apis/events.k8s.io/v1/namespaces/" + ns + "/events":    tc.selector,
			eventRecordsPath + "/namespaces/" + ns + "/eventrecords": tc.selector,
			"/api/v1/events": core,
		} {
			got := names(t, path, selector)
			if !slices.Equal(got, tc.want) {
				t.Errorf("GET %s ?fieldSelector=%s: %v, want %v", path, selector, got, tc.want)
			}
		}
	}

	// Refusals: what labels.Parse cannot read goes to kube-apiserver's own
	// parser, so the 400 is kube-apiserver's, byte for byte.
	kc := newRawClient(t, kube.RestConfig(), kube.AdminToken)
	for _, selector := range []string{
		"reason in (BackOff",
		"reason in BackOff,Failed",
		"reason in (Back Off)",
		"reason notin",
		"reason,type in (Normal)",
		"reason in (BackOff))",
	} {
		for _, path := range []string{"/api/v1/namespaces/default/events", "/apis/events.k8s.io/v1/namespaces/default/events"} {
			query := path + "?" + url.Values{"fieldSelector": {selector}}.Encode()
			our := c.do(t, "GET", query, nil, map[string]string{"Accept": "application/json"})
			theirs := kc.do(t, "GET", query, nil, map[string]string{"Accept": "application/json"})
			if theirs.code != 400 {
				t.Fatalf("kube-apiserver answered %q with %d, want 400: %s", selector, theirs.code, theirs.body)
			}
			if our.code != theirs.code || !bytes.Equal(our.body, theirs.body) {
				t.Errorf("GET %s ?fieldSelector=%s:\nevent-apiserver %d %s\n kube-apiserver %d %s", path, selector, our.code, our.body, theirs.code, theirs.body)
			}
		}
	}
	// An unknown label in a set is refused with the usual message.
	resp := c.do(t, "GET", "/api/v1/namespaces/default/events?"+url.Values{"fieldSelector": {"color in (red)"}}.Encode(), nil, map[string]string{"Accept": "application/json"})
	if st := resp.status(t); resp.code != 400 || st.Message != "field label not supported: color" {
		t.Errorf("an unknown label in a set: %d %q", resp.code, st.Message)
	}
}
