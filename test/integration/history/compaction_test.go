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

// TestHistoryAfterCompaction stops a server, changes and deletes Events
// through another replica (history off) while it is down, compacts etcd past
// the stopped server's revision, and restarts it: capture relists, says so
// in its log and metrics, stores the Events' current versions and marks the
// Event deleted meanwhile as deleted. The versions replaced while it was down
// are lost: etcd no longer has them (the documented limit).
func TestHistoryAfterCompaction(t *testing.T) {
	t.Parallel()
	for _, store := range framework.HistoryStores {
		t.Run(store.Name, func(t *testing.T) { testHistoryAfterCompaction(t, store.Args(t)) })
	}
}

func testHistoryAfterCompaction(t *testing.T, storeArgs []string) {
	etcd := framework.StartEtcd(t)
	server := framework.StartServer(t, framework.ServerOptions{
		EtcdServers: etcd.ClientURL(),
		ExtraArgs:   append([]string{"--history-batch-interval=50ms"}, storeArgs...),
	})
	other := framework.StartServer(t, framework.ServerOptions{EtcdServers: etcd.ClientURL(), ExtraArgs: []string{"--history=false"}})
	c := framework.AdminRawClient(t, server)
	ctx := framework.PollCtx(t)
	ns := framework.UniqueName("compaction")
	events := other.Client(t).CoreV1().Events(ns)
	for _, name := range []string{"kept", "deleted"} {
		_, err := events.Create(ctx, &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: name},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "p", UID: "uid-p"},
			Reason:         "Started", Message: "v1", Type: corev1.EventTypeNormal, Count: 1, LastTimestamp: metav1.Now(),
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	waitRecords := func(what string, ok func(live, deleted map[string]string) bool) {
		t.Helper()
		var live, deleted map[string]string
		err := wait.PollUntilContextTimeout(ctx, framework.PollInterval, 60*time.Second, true, func(context.Context) (bool, error) {
			live, deleted = map[string]string{}, map[string]string{}
			for _, r := range framework.ListAllEventRecords(t, c, ns, "", 0) {
				if r.Live {
					live[r.Name] = r.Event.Note
				} else {
					deleted[r.Name] = r.Event.Note
				}
			}
			return ok(live, deleted), nil
		})
		if err != nil {
			t.Fatalf("%s: live %v, deleted %v", what, live, deleted)
		}
	}
	waitRecords("both created", func(live, _ map[string]string) bool { return len(live) == 2 })
	if err := server.Stop(); err != nil {
		t.Fatal(err)
	}

	for _, note := range []string{"v2", "v3"} {
		patch := []byte(`{"message":"` + note + `","count":2}`)
		if _, err := events.Patch(ctx, "kept", types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := events.Delete(ctx, "deleted", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	client := etcd.Client(t)
	head, err := client.Get(ctx, "/")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Compact(ctx, head.Header.Revision); err != nil {
		t.Fatal(err)
	}

	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	waitRecords("after the relist", func(live, deleted map[string]string) bool {
		notes := map[string]bool{}
		for _, n := range live {
			notes[n] = true
		}
		return len(deleted) == 1 && notes["v3"] && !notes["v2"]
	})
	if !server.LogContains("etcd compacted past the Event history capture's revision") {
		t.Error("no log line about the compaction")
	}
	metrics := c.Do(t, "GET", "/metrics", nil, nil)
	if !strings.Contains(string(metrics.Body), `event_apiserver_history_capture_relists_total{reason="compacted",source="etcd"} 1`) {
		t.Error("event_apiserver_history_capture_relists_total{reason=\"compacted\",source=\"etcd\"} is not 1")
	}
}
