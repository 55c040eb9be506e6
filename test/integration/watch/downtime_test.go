package watch

import (
	"context"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// downtimeResult is what a client saw resuming after the server's downtime.
type downtimeResult struct {
	// resumed is the watch from the client's last RV before compaction;
	// compacted the same watch after etcd compacted past that RV.
	resumed, compacted []framework.Seen
	want               []framework.Seen
}

// TestWatchResumeAfterDowntime: while the server is down, Events change
// (written to etcd as another API server would) and so do other keys. A
// client resuming from its last resource version gets every Event change it
// missed, in order, without a 410, served from etcd's history because the
// restarted watch cache starts after that resource version. Once etcd has
// compacted past it, the client gets kube-apiserver's 410. kube-apiserver
// v1.36.3 runs the same scenario on its own etcd, for comparison.
func TestWatchResumeAfterDowntime(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	ours := startOurTarget(t)
	fromEtcd := resumesFrom(t, ours.config, "etcd")
	oursResult := runDowntimeScenario(ctx, t, ours)
	// After the restart the counter started again from zero.
	if got := resumesFrom(t, ours.config, "etcd"); got < 1 {
		t.Errorf("%s: no watch was served from etcd history (counter %v before, %v after restart)", ours.name, fromEtcd, got)
	}

	var kubeResult *downtimeResult
	if kube := startKubeTarget(t); kube != nil {
		kubeResult = runDowntimeScenario(ctx, t, kube)
	}

	if g := framework.Gone(oursResult.resumed); len(g) > 0 {
		t.Errorf("%s: resume before compaction got %v", ours.name, g)
	}
	assertChanges(t, ours.name+" resume after downtime", oursResult.resumed, oursResult.want)
	if g := framework.Gone(oursResult.compacted); len(g) != 1 {
		t.Errorf("%s: resume after compaction got %v, want one 410", ours.name, oursResult.compacted)
	}
	if kubeResult == nil {
		return
	}
	if len(framework.Gone(kubeResult.resumed)) == 0 && len(framework.Gone(oursResult.resumed)) > 0 {
		t.Errorf("kube-apiserver resumed without 410, we did not")
	}
	assertChanges(t, "kube-apiserver resume after downtime (reference)", kubeResult.resumed, kubeResult.want)
	kubeGone, oursGone := framework.Gone(kubeResult.compacted), framework.Gone(oursResult.compacted)
	if len(kubeGone) == 1 && len(oursGone) == 1 && kubeGone[0].Status.Message != oursGone[0].Status.Message {
		t.Errorf("after compaction: kube-apiserver says %q, we say %q", kubeGone[0].Status.Message, oursGone[0].Status.Message)
	}
}

// runDowntimeScenario drives one server through the scenario and logs what
// its client saw.
func runDowntimeScenario(ctx context.Context, t *testing.T, target *apiTarget) *downtimeResult {
	t.Helper()
	// kube-apiserver admits Events only in existing namespaces.
	const ns = "default"
	prefix := fmt.Sprintf("downtime-%d", time.Now().UnixNano()%100000)
	name := func(s string) string { return prefix + "-" + s }

	before := createEvents(ctx, t, target.client, ns, name("a"), name("b"))
	list, err := target.client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The client is up to date at the list's resource version, which is at
	// least that of the last create.
	rv := list.ResourceVersion
	if framework.RVInt(t, rv) < framework.RVInt(t, before[1].RV) {
		t.Fatalf("%s: list at %s is older than the create at %s", target.name, rv, before[1].RV)
	}

	if err := target.stop(); err != nil {
		t.Fatal(err)
	}
	// While the server is down: Events created, modified and deleted in
	// etcd, between writes to other keys.
	var want []framework.Seen
	putOtherKeys(ctx, t, target.etcd, 3)
	putEventInEtcd(ctx, t, target.etcd, watchTestEvent(ns, name("c")))
	want = append(want, framework.Seen{Type: watch.Added, Name: name("c")})
	putOtherKeys(ctx, t, target.etcd, 3)
	modified := watchTestEvent(ns, name("a"))
	modified.Count, modified.Message = 2, "modified while the server was down"
	putEventInEtcd(ctx, t, target.etcd, modified)
	want = append(want, framework.Seen{Type: watch.Modified, Name: name("a")})
	deleteEventInEtcd(ctx, t, target.etcd, ns, name("b"))
	want = append(want, framework.Seen{Type: watch.Deleted, Name: name("b")})
	putOtherKeys(ctx, t, target.etcd, 3)
	putEventInEtcd(ctx, t, target.etcd, watchTestEvent(ns, name("d")))
	want = append(want, framework.Seen{Type: watch.Added, Name: name("d")})
	putOtherKeys(ctx, t, target.etcd, 3)
	if err := target.start(); err != nil {
		t.Fatal(err)
	}

	resume := func() []framework.Seen {
		t.Helper()
		w := watchEvents(ctx, t, target.client, ns, metav1.ListOptions{
			ResourceVersion: rv, TimeoutSeconds: ptr.To[int64](30),
		})
		watchCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		got, _ := framework.Observe(watchCtx, w, func(got []framework.Seen) bool {
			return framework.HasChanges(len(want))(framework.WithPrefix(got, prefix))
		})
		return framework.WithPrefix(got, prefix)
	}
	result := &downtimeResult{want: want, resumed: resume()}
	t.Logf("%s: resume from %s after downtime: %v", target.name, rv, result.resumed)

	// etcd compacts past the client's resource version.
	rev := etcdRevision(ctx, t, target.etcd)
	if _, err := target.etcd.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	result.compacted = resume()
	t.Logf("%s: resume from %s after etcd compacted at %d: %v", target.name, rv, rev, result.compacted)
	return result
}
