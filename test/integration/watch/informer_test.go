package watch

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// TestInformerRestartWithoutRelist runs a client-go SharedInformerFactory
// Event informer (WatchList for its first sync, as client-go v0.36.3 does by
// default) across a server restart during which Events and other keys
// change in etcd. It counts the informer's full reads, LISTs and WatchList
// watches: after the first sync there must be none, only resuming watches.
// kube-apiserver v1.36.3, which watches etcd directly for every client, runs
// the same scenario beside ours when it has been built.
//
// The server is killed (SIGKILL) and started again. A graceful stop is not
// used here because of a race in k8s.io/apiserver's shutdown that both
// servers share: a watch the client re-opens at the moment the server starts
// shutting down can be admitted and then closed at once without an event,
// which client-go's reflector treats as a "very short watch" and answers
// with a relist. Without --shutdown-watch-termination-grace-period, a
// SIGTERM with watches open takes the request timeout (60s) instead.
func TestInformerRestartWithoutRelist(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	ours := runInformerRestart(ctx, t, startOurTarget(t))
	if ours != 0 {
		t.Errorf("event-apiserver: the informer relisted %d times across the restart", ours)
	}
	if kube := startKubeTarget(t); kube != nil {
		n := runInformerRestart(ctx, t, kube)
		t.Logf("relists across a restart: event-apiserver %d, kube-apiserver %d", ours, n)
		if ours > n {
			t.Errorf("we relisted more than kube-apiserver")
		}
	}
}

// runInformerRestart returns how often the informer read everything again
// after its first sync.
func runInformerRestart(ctx context.Context, t *testing.T, target *apiTarget) int {
	t.Helper()
	const ns = "default"
	prefix := fmt.Sprintf("informer-%d", time.Now().UnixNano()%100000)
	informer := startCountingInformer(ctx, t, target.config, ns)
	has := func(names ...string) func(context.Context) (bool, error) {
		return func(context.Context) (bool, error) {
			added := map[string]bool{}
			for _, n := range informer.added() {
				added[n] = true
			}
			for _, n := range names {
				if !added[n] {
					return false, nil
				}
			}
			return true, nil
		}
	}

	createEvents(ctx, t, target.client, ns, prefix+"-a", prefix+"-b")
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, has(prefix+"-a", prefix+"-b")); err != nil {
		t.Fatalf("%s: informer misses Events written before the restart", target.name)
	}

	t.Logf("%s: %s informer has a and b at resource version %s; killing the server",
		target.name, time.Now().Format("15:04:05.000"), informer.informer.LastSyncResourceVersion())
	if err := target.kill(); err != nil {
		t.Fatal(err)
	}
	putOtherKeys(ctx, t, target.etcd, 5)
	putEventInEtcd(ctx, t, target.etcd, watchTestEvent(ns, prefix+"-c"))
	putOtherKeys(ctx, t, target.etcd, 5)
	if err := target.start(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %s server ready again", target.name, time.Now().Format("15:04:05.000"))
	createEvents(ctx, t, target.client, ns, prefix+"-d")

	// The reflector backs off while the server is away (up to 30s).
	start := time.Now()
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 90*time.Second, true, has(prefix+"-c", prefix+"-d")); err != nil {
		t.Fatalf("%s: informer misses Events written during and after the restart", target.name)
	}
	var ours []string
	for _, n := range informer.added() {
		if strings.HasPrefix(n, prefix) {
			ours = append(ours, n)
		}
	}
	if want := []string{prefix + "-a", prefix + "-b", prefix + "-c", prefix + "-d"}; fmt.Sprint(ours) != fmt.Sprint(want) {
		t.Errorf("%s: informer added %v, want %v", target.name, ours, want)
	}
	relists := informer.requests.relists() - informer.initialRelists
	t.Logf("%s: informer caught up %v after the restart; %d relists; requests: %v",
		target.name, time.Since(start).Round(time.Millisecond), relists, informer.requests)
	return relists
}
