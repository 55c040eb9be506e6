package history

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// TestHistoryCrashResume kills a replica with SIGKILL while it captures,
// keeps writing through a second replica on the same etcd, restarts the
// first, and then finds every Event version etcd held during the run in each
// replica's history exactly once: each its own file with sqlite, one
// database both write to with postgres.
func TestHistoryCrashResume(t *testing.T) {
	t.Parallel()
	for _, store := range framework.HistoryStores {
		t.Run(store.Name, func(t *testing.T) { testHistoryCrashResume(t, store.Args(t)) })
	}
}

func testHistoryCrashResume(t *testing.T, storeArgs []string) {
	etcd := framework.StartEtcd(t)
	opts := framework.ServerOptions{
		EtcdServers: etcd.ClientURL(),
		EventTTL:    4 * time.Second,
		// Slow batches leave changes queued and unstored when the kill comes.
		ExtraArgs: append([]string{"--history-batch-interval=300ms", "--history-batch-size=40"}, storeArgs...),
	}
	first := framework.StartServer(t, opts)
	second := framework.StartServer(t, opts)
	truth := framework.WatchEtcdTruth(t, etcd.Client(t))
	ctx := framework.PollCtx(t)
	ns := framework.UniqueName("crash")

	w := framework.StartHistoryWriter(second.Client(t), ns)
	defer w.Stop()
	waitVersions := func(what string, n int) { t.Helper(); truth.WaitVersions(ctx, t, w, what, n) }

	c1 := framework.AdminRawClient(t, first)
	err := wait.PollUntilContextTimeout(ctx, framework.PollInterval, 60*time.Second, true, func(context.Context) (bool, error) {
		list, err := framework.HistoryClient(t, c1).EventRecords(ns).List(ctx, metav1.ListOptions{Limit: 30})
		return err == nil && len(list.Items) == 30, nil
	})
	if err != nil {
		t.Fatalf("the first replica's history never held 30 records: %v", err)
	}
	before, _ := truth.Snapshot(t)
	if err := first.Kill(); err != nil {
		t.Fatal(err)
	}
	waitVersions("while the first replica is down", len(before)+60)
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	after, _ := truth.Snapshot(t)
	waitVersions("after the restart", len(after)+60)
	w.Stop()
	if errs := w.Errors(); len(errs) > 0 {
		t.Fatalf("writer: %v", errs)
	}

	// Every Event expires; then the truth is complete.
	err = wait.PollUntilContextTimeout(ctx, framework.PollInterval, 60*time.Second, true, func(context.Context) (bool, error) {
		versions, deleted := truth.Snapshot(t)
		uids := map[string]bool{}
		for k := range versions {
			uids[k.UID] = true
		}
		return len(deleted) == len(uids), nil
	})
	if err != nil {
		t.Fatalf("Events did not all expire: %v", err)
	}
	versions, deleted := truth.Snapshot(t)
	t.Logf("etcd held %d versions of %d Events", len(versions), len(deleted))

	for name, server := range map[string]*framework.Server{"killed and restarted": first, "running beside it": second} {
		t.Run(name, func(t *testing.T) {
			c := framework.AdminRawClient(t, server)
			var keys []framework.VersionKey
			err := wait.PollUntilContextTimeout(ctx, framework.PollInterval, 60*time.Second, true, func(context.Context) (bool, error) {
				records := framework.ListAllEventRecords(t, c, ns, "", 500)
				keys = framework.RecordKeys(records)
				for _, r := range records {
					if r.Live {
						return false, nil
					}
				}
				return len(keys) >= len(versions), nil
			})
			if err != nil {
				t.Errorf("history has %d records (or some live), etcd held %d versions: %v", len(keys), len(versions), err)
			}
			seen := map[framework.VersionKey]int{}
			for _, k := range keys {
				seen[k]++
			}
			for k, n := range seen {
				if n != 1 {
					t.Errorf("version %v stored %d times", k, n)
				}
				if versions[k] == nil {
					t.Errorf("version %v is in history but etcd never held it", k)
				}
			}
			missing := 0
			for k := range versions {
				if seen[k] == 0 {
					missing++
					if missing <= 10 {
						t.Errorf("version %v of %s is missing from history", k, versions[k].Name)
					}
				}
			}
			if missing > 0 {
				t.Errorf("%d of %d versions missing", missing, len(versions))
			}
		})
	}
	// The store flags took effect: the embedded file exists only without them.
	for _, server := range []*framework.Server{first, second} {
		_, err := os.Stat(filepath.Join(server.DataDir, "history", "history.db"))
		if embedded := len(storeArgs) == 0; embedded != (err == nil) {
			t.Errorf("store flags %v: embedded history file: %v", storeArgs, err)
		}
	}
	if !first.LogContains("Resuming Event history capture") || first.LogContains("etcd compacted past") {
		t.Error("the restarted replica did not resume from its stored revision")
	}
}
