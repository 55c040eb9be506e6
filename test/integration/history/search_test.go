package history

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// TestHistorySearchKubectl is docs/operations.md's "what mentioned x509":
// plain kubectl carries note.contains through the whole server (the set
// selector handling, the field label conversion, the store's text index),
// combined with other selectors, the window and a namespace; a malformed
// term, an open window and a search over --history-max-query-rows get
// kubectl's "Error from server (BadRequest)" naming what is wrong.
func TestHistorySearchKubectl(t *testing.T) {
	t.Parallel()
	server := framework.StartServer(t, framework.ServerOptions{ExtraArgs: []string{"--history-batch-interval=50ms", "--history-max-query-rows=3"}})
	client := server.Client(t)
	ctx := framework.PollCtx(t)
	ns := []string{framework.UniqueName("search-a"), framework.UniqueName("search-b")}
	now := metav1.Now()
	for i, e := range []struct{ ns, reason, message string }{
		{ns[0], "Failed", `Failed to pull image "registry.internal/web:v2": x509: certificate signed by unknown authority`},
		{ns[1], "Failed", "Failed to pull image: X509: certificate has expired or is not yet valid"},
		{ns[0], "BackOff", "Back-off restarting failed container web in pod web-0"},
		{ns[1], "BackOff", "Back-off restarting failed container db in pod db-0"},
		{ns[1], "OOMKilling", "Memory cgroup out of memory: Killed process 4242 (java) 100% of limit"},
	} {
		_, err := client.CoreV1().Events(e.ns).Create(ctx, &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: fmt.Sprint("ev-", i)},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: e.ns, Name: fmt.Sprint("pod-", i)},
			Reason:         e.reason, Message: e.message, Type: corev1.EventTypeWarning, Count: 1,
			FirstTimestamp: now, LastTimestamp: now,
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	names := func(args ...string) string {
		out := framework.MustKubectl(t, server.Kubeconfig, append([]string{"get", "eventrecords", "-o", "custom-columns=NAME:.event.metadata.name", "--no-headers", "--sort-by=.event.metadata.name"}, args...)...)
		return strings.Join(strings.Fields(out), " ")
	}
	var got string
	err := wait.PollUntilContextTimeout(ctx, framework.PollInterval, 30*time.Second, true, func(context.Context) (bool, error) {
		got = names("-A", "--field-selector", "note.contains=x509,since=1h")
		return got == "ev-0 ev-1", nil
	})
	if err != nil {
		t.Fatalf("note.contains=x509 across namespaces: %q, want ev-0 ev-1: %v", got, err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-A", "--field-selector", "note.contains=X509: CERTIFICATE HAS,since=1h"}, "ev-1"},
		{[]string{"-n", ns[0], "--field-selector", "note.contains=x509,since=1h"}, "ev-0"},
		{[]string{"-A", "--field-selector", "note.contains=failed,reason=BackOff,since=1h"}, "ev-2 ev-3"},
		{[]string{"-A", "--field-selector", "note.contains=restarting,note.contains=container db,since=1h"}, "ev-3"},
		{[]string{"-A", "--field-selector", "note.contains=100%,since=1h"}, "ev-4"},
		{[]string{"-A", "--field-selector", "note.contains=100_,since=1h"}, ""},
		{[]string{"-A", "--field-selector", `note.contains=in pod web-0\,,since=1h`}, ""},
	} {
		if got := names(tc.args...); got != tc.want {
			t.Errorf("kubectl get eventrecords %s: %q, want %q", strings.Join(tc.args, " "), got, tc.want)
		}
	}
	for _, tc := range []struct {
		selector string
		stderr   []string
	}{
		{"note.contains=ab,since=1h", []string{"Error from server (BadRequest)", `the search term "ab" needs at least 3 letters or digits in a row`}},
		{"note.contains!=x509,since=1h", []string{"Error from server (BadRequest)", "note.contains supports only '='"}},
		{"note.contains=x509", []string{"Error from server (BadRequest)", "--history-max-query-window"}},
		{"note.contains=failed,since=1h", []string{"Error from server (BadRequest)", "more than 3 versions", "--history-max-query-rows"}},
	} {
		_, stderr, err := framework.Kubectl(t, server.Kubeconfig, "get", "eventrecords", "-A", "--field-selector", tc.selector)
		for _, want := range tc.stderr {
			if err == nil || !strings.Contains(stderr, want) {
				t.Errorf("%s: err %v, stderr %q, want it to say %q", tc.selector, err, stderr, want)
			}
		}
	}
}
