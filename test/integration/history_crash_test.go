package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// TestHistoryCrashResume kills a replica with SIGKILL while it captures,
// keeps writing through a second replica on the same etcd, restarts the
// first, and then finds every Event version etcd held during the run in each
// replica's history exactly once: each its own file with sqlite, one
// database both write to with postgres.
func TestHistoryCrashResume(t *testing.T) {
	t.Parallel()
	for _, store := range historyStores {
		t.Run(store.name, func(t *testing.T) { testHistoryCrashResume(t, store.args(t)) })
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
	truth := watchEtcdTruth(t, etcd.Client(t))
	ctx := pollCtx(t)
	ns := uniqueName("crash")

	w := startHistoryWriter(second.Client(t), ns)
	defer w.stop()
	waitVersions := func(what string, n int) {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, pollInterval, 60*time.Second, true, func(context.Context) (bool, error) {
			versions, _ := truth.snapshot(t)
			return len(versions) >= n, nil
		})
		if err != nil {
			t.Fatalf("%s: waiting for %d Event versions in etcd: %v (writer errors: %v)", what, n, err, w.errors())
		}
	}

	c1 := adminRawClient(t, first)
	err := wait.PollUntilContextTimeout(ctx, pollInterval, 60*time.Second, true, func(context.Context) (bool, error) {
		list, err := historyClient(t, c1).EventRecords(ns).List(ctx, metav1.ListOptions{Limit: 30})
		return err == nil && len(list.Items) == 30, nil
	})
	if err != nil {
		t.Fatalf("the first replica's history never held 30 records: %v", err)
	}
	before, _ := truth.snapshot(t)
	if err := first.Kill(); err != nil {
		t.Fatal(err)
	}
	waitVersions("while the first replica is down", len(before)+60)
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	after, _ := truth.snapshot(t)
	waitVersions("after the restart", len(after)+60)
	w.stop()
	if errs := w.errors(); len(errs) > 0 {
		t.Fatalf("writer: %v", errs)
	}

	// Every Event expires; then the truth is complete.
	err = wait.PollUntilContextTimeout(ctx, pollInterval, 60*time.Second, true, func(context.Context) (bool, error) {
		versions, deleted := truth.snapshot(t)
		uids := map[string]bool{}
		for k := range versions {
			uids[k.uid] = true
		}
		return len(deleted) == len(uids), nil
	})
	if err != nil {
		t.Fatalf("Events did not all expire: %v", err)
	}
	versions, deleted := truth.snapshot(t)
	t.Logf("etcd held %d versions of %d Events", len(versions), len(deleted))

	for name, server := range map[string]*framework.Server{"killed and restarted": first, "running beside it": second} {
		t.Run(name, func(t *testing.T) {
			c := adminRawClient(t, server)
			var keys []versionKey
			err := wait.PollUntilContextTimeout(ctx, pollInterval, 60*time.Second, true, func(context.Context) (bool, error) {
				records := listAllEventRecords(t, c, ns, "", 500)
				keys = recordKeys(records)
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
			seen := map[versionKey]int{}
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

// historyWriter creates Events through both APIs and updates them as series,
// as fast as a ticker allows, until stopped.
type historyWriter struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	errs   []error
}

func startHistoryWriter(client kubernetes.Interface, ns string) *historyWriter {
	ctx, cancel := context.WithCancel(context.Background())
	w := &historyWriter{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		ticker := time.NewTicker(20 * time.Millisecond)
		defer ticker.Stop()
		pod := corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "crashing", UID: types.UID(uniqueName("uid")), APIVersion: "v1"}
		for i := 0; ctx.Err() == nil; i++ {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
			}
			now := metav1.Now()
			var err error
			switch i % 4 {
			case 0:
				_, err = client.CoreV1().Events(ns).Create(ctx, &corev1.Event{
					ObjectMeta:     metav1.ObjectMeta{Name: fmt.Sprintf("core-%d", i)},
					InvolvedObject: pod, Reason: "BackOff", Message: fmt.Sprint("back-off ", i), Type: corev1.EventTypeWarning,
					Count: 1, FirstTimestamp: now, LastTimestamp: now, Source: corev1.EventSource{Component: "kubelet"},
				}, metav1.CreateOptions{})
			case 1:
				_, err = client.CoreV1().Events(ns).Patch(ctx, fmt.Sprintf("core-%d", i-1), types.StrategicMergePatchType,
					[]byte(fmt.Sprintf(`{"count":2,"lastTimestamp":%q}`, now.UTC().Format(time.RFC3339))), metav1.PatchOptions{})
			case 2:
				_, err = client.EventsV1().Events(ns).Create(ctx, &eventsv1.Event{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("events-%d", i)},
					EventTime:  metav1.NowMicro(), ReportingController: "test", ReportingInstance: "test-1",
					Action: "Restart", Reason: "Restarted", Regarding: pod, Note: fmt.Sprint("restarted ", i), Type: corev1.EventTypeNormal,
				}, metav1.CreateOptions{})
			case 3:
				_, err = client.EventsV1().Events(ns).Patch(ctx, fmt.Sprintf("events-%d", i-1), types.MergePatchType,
					[]byte(fmt.Sprintf(`{"series":{"count":2,"lastObservedTime":%q}}`, metav1.NowMicro().UTC().Format(metav1.RFC3339Micro))), metav1.PatchOptions{})
			}
			if err != nil && ctx.Err() == nil {
				w.mu.Lock()
				w.errs = append(w.errs, err)
				w.mu.Unlock()
			}
		}
	}()
	return w
}

func (w *historyWriter) stop() {
	w.cancel()
	<-w.done
}

func (w *historyWriter) errors() []error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]error(nil), w.errs...)
}
