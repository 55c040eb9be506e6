package history

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// TestHistoryKubectl is the documented one-liner: one object's Events of
// the last week with plain kubectl, in `kubectl events`' columns; and
// `kubectl get events` still means core/v1 Events.
func TestHistoryKubectl(t *testing.T) {
	t.Parallel()
	server := framework.StartServer(t, framework.ServerOptions{ExtraArgs: []string{"--history-batch-interval=50ms"}})
	client := server.Client(t)
	ctx := framework.PollCtx(t)
	ns := framework.UniqueName("history-kubectl")
	uid := framework.UniqueName("uid")
	now := metav1.Now()
	for i, reason := range []string{"Pulling", "Pulled", "Started"} {
		_, err := client.CoreV1().Events(ns).Create(ctx, &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: "web-1." + strings.ToLower(reason)},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "web-1", UID: types.UID(uid)},
			Reason:         reason, Message: "step " + reason, Type: corev1.EventTypeNormal, Count: 1,
			FirstTimestamp: metav1.NewTime(now.Add(time.Duration(i) * time.Second)), LastTimestamp: metav1.NewTime(now.Add(time.Duration(i) * time.Second)),
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}

	var out string
	err := wait.PollUntilContextTimeout(ctx, framework.PollInterval, 30*time.Second, true, func(context.Context) (bool, error) {
		out = framework.MustKubectl(t, server.Kubeconfig, "get", "eventrecords", "-n", ns, "--field-selector", "regarding.uid="+uid+",since=168h")
		return strings.Count(out, "Pod/web-1") == 3, nil
	})
	if err != nil {
		t.Fatalf("kubectl get eventrecords never listed the 3 Events: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if fields := strings.Fields(lines[0]); strings.Join(fields, " ") != "LAST SEEN TYPE REASON OBJECT MESSAGE" {
		t.Errorf("header %q, want kubectl events' columns", lines[0])
	}
	for i, reason := range []string{"Started", "Pulled", "Pulling"} {
		if !strings.Contains(lines[i+1], reason) {
			t.Errorf("row %d = %q, want %s (newest first)", i+1, lines[i+1], reason)
		}
	}

	// The same week by the object's kind and name, as docs/operations.md
	// gives it for a pod whose uid the user does not have at hand.
	if out := framework.MustKubectl(t, server.Kubeconfig, "get", "eventrecords", "-n", ns, "--field-selector", "regarding.kind=Pod,regarding.name=web-1,since=168h"); strings.Count(out, "Pod/web-1") != 3 {
		t.Errorf("by kind and name: %s", out)
	}
	// kubectl watches history as any resource: the records first, then
	// the changes (none here) until the request's timeout ends the watch.
	if out, stderr, _ := framework.Kubectl(t, server.Kubeconfig, "get", "eventrecords", "-n", ns, "-w", "--request-timeout=2s"); strings.Count(out, "Pod/web-1") != 3 || strings.Contains(stderr, "not supported") {
		t.Errorf("kubectl get eventrecords -w: stdout %q, stderr %q", out, stderr)
	}

	if _, stderr, err := framework.Kubectl(t, server.Kubeconfig, "get", "eventrecords", "-n", ns, "--field-selector", "since=last-week"); err == nil || !strings.Contains(stderr, "invalid field selector since=last-week") {
		t.Errorf("a bad window: err %v, stderr %q", err, stderr)
	}
	if _, stderr, err := framework.Kubectl(t, server.Kubeconfig, "get", "eventrecords", "-n", ns, "--field-selector", "involvedObject.uid="+uid); err == nil || !strings.Contains(stderr, "field label not supported: involvedObject.uid") {
		t.Errorf("a core/v1 label: err %v, stderr %q", err, stderr)
	}

	// kubectl resolves "events" and "ev" to core/v1 Events, as before.
	for _, resource := range []string{"events", "ev"} {
		_, stderr, err := framework.Kubectl(t, server.Kubeconfig, "get", resource, "-n", ns, "-v=6")
		if err != nil || !strings.Contains(stderr, "/api/v1/namespaces/"+ns+"/events") {
			t.Errorf("kubectl get %s did not list core/v1 Events (%v):\n%s", resource, err, stderr)
		}
	}
}
