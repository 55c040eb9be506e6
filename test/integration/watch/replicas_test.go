package watch

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// TestWatchResumeAcrossReplicas runs two replicas over one 3-member etcd
// cluster. A watch started on replica A resumes on replica B from A's last
// resource version without a 410, although B's watch cache started after
// it. When no Event changes, both replicas' resource versions follow etcd's
// revision within a few progress-notify intervals.
func TestWatchResumeAcrossReplicas(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cluster := framework.StartEtcdCluster(t, 3)
	kv := cluster.Client(t)
	a := framework.StartServer(t, framework.ServerOptions{EtcdServers: cluster.Endpoints()})
	clientA := a.Client(t)
	const ns = "replicas"

	createEvents(ctx, t, clientA, ns, "a-1", "a-2")
	list, err := clientA.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w := watchEvents(ctx, t, clientA, ns, metav1.ListOptions{
		ResourceVersion: list.ResourceVersion, AllowWatchBookmarks: true, TimeoutSeconds: ptr.To[int64](60),
	})
	want := createEvents(ctx, t, clientA, ns, "a-3")
	watchCtx, cancelWatch := context.WithTimeout(ctx, 20*time.Second)
	gotA, _ := framework.Observe(watchCtx, w, framework.HasChanges(1))
	cancelWatch()
	assertChanges(t, "watch on A", gotA, want)
	rv := framework.LastRV(gotA, list.ResourceVersion)

	// Events and other keys change before replica B exists.
	later := createEvents(ctx, t, clientA, ns, "a-4")
	putOtherKeys(ctx, t, kv, 5)
	b := framework.StartServer(t, framework.ServerOptions{EtcdServers: cluster.Endpoints()})
	clientB, configB := b.Client(t), b.Config(t)
	if start := cacheRV(ctx, t, clientB, ns); framework.RVInt(t, start) <= framework.RVInt(t, rv) {
		t.Fatalf("B's cache is at %s, not after the client's %s: the test would not cross the cache's start", start, rv)
	}
	later = append(later, createEvents(ctx, t, clientA, ns, "a-5")...)

	fromEtcd := resumesFrom(t, configB, "etcd")
	w = watchEvents(ctx, t, clientB, ns, metav1.ListOptions{
		ResourceVersion: rv, AllowWatchBookmarks: true, TimeoutSeconds: ptr.To[int64](60),
	})
	watchCtx, cancelWatch = context.WithTimeout(ctx, 20*time.Second)
	gotB, _ := framework.Observe(watchCtx, w, framework.HasChanges(len(later)))
	cancelWatch()
	t.Logf("watch from A's %s resumed on B: %v", rv, gotB)
	if g := framework.Gone(gotB); len(g) > 0 {
		t.Fatalf("resume on B: %v", g)
	}
	assertChanges(t, "resume on B", gotB, later)
	if got := resumesFrom(t, configB, "etcd") - fromEtcd; got != 1 {
		t.Errorf("B served %v resumes from etcd history, want 1", got)
	}

	// No Event changes; other keys do, then stop. Both replicas follow
	// etcd's revision through progress notifications (1s here).
	putOtherKeys(ctx, t, kv, 10)
	final := etcdRevision(ctx, t, kv)
	start := time.Now()
	var rvA, rvB string
	// Without progress notifications they would not move for etcd's default
	// 10m; the generous bound (not a few intervals) is for a loaded machine
	// running the other tests in parallel.
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, framework.PollTimeout, true,
		func(ctx context.Context) (bool, error) {
			rvA, rvB = cacheRV(ctx, t, clientA, ns), cacheRV(ctx, t, clientB, ns)
			return framework.RVInt(t, rvA) == final && framework.RVInt(t, rvB) == final, nil
		})
	t.Logf("etcd at %d; after %v replica A at %s, B at %s", final, time.Since(start).Round(time.Millisecond), rvA, rvB)
	if err != nil {
		t.Errorf("replicas did not reach etcd's revision %d within %v (progress notifications every %v): A %s, B %s",
			final, framework.PollTimeout, framework.DefaultEtcdProgressNotifyInterval, rvA, rvB)
	}

	// A client on either replica now gets bookmarks at that revision.
	for name, client := range map[string]kubernetes.Interface{"A": clientA, "B": clientB} {
		w := watchEvents(ctx, t, client, ns, metav1.ListOptions{
			ResourceVersion: rv, AllowWatchBookmarks: true, TimeoutSeconds: ptr.To[int64](3),
		})
		got, _ := framework.Observe(ctx, w, nil)
		bookmarks := framework.OfType(got, watch.Bookmark)
		if len(bookmarks) == 0 || framework.RVInt(t, bookmarks[len(bookmarks)-1].RV) != final {
			t.Errorf("replica %s: bookmarks %v, want one at %d", name, bookmarks, final)
		}
	}
}

// cacheRV is the resource version of the server's watch cache: a LIST at
// resourceVersion=0 is served from the cache as it is.
func cacheRV(ctx context.Context, t *testing.T, client kubernetes.Interface, ns string) string {
	t.Helper()
	list, err := client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		t.Fatal(err)
	}
	return list.ResourceVersion
}
