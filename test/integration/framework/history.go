package framework

// What the Event history tests share: the stores every history test runs
// against, eventrecords read through the typed client, what etcd held (the
// truth history must match), and a writer that keeps Events changing.

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/eventapiserver/event-apiserver/internal/pgtest"
	historyv1alpha1 "github.com/eventapiserver/event-apiserver/pkg/apis/history/v1alpha1"
	historyclient "github.com/eventapiserver/event-apiserver/pkg/generated/clientset/versioned/typed/history/v1alpha1"
)

// EventsPrefix is where Events are kept in etcd, by namespace and name.
const EventsPrefix = "/registry/events/"

// HistoryStores are the stores every history test runs against; Args
// starts what a store needs and returns the server flags that select it.
var HistoryStores = []struct {
	Name string
	Args func(t *testing.T) []string
}{
	{"sqlite", func(*testing.T) []string { return nil }},
	{"postgres", func(t *testing.T) []string {
		return []string{"--history-store=postgres", "--history-dsn=" + pgtest.Start(t)}
	}},
}

// VersionKey names one Event version: uid and resourceVersion (etcd revision).
type VersionKey struct {
	UID string
	RV  string
}

// EtcdTruth is every Event version and deletion etcd held, collected by the
// test's own watch from revision 1: what history must hold.
type EtcdTruth struct {
	mu       sync.Mutex
	versions map[VersionKey]*corev1.Event
	deleted  map[string]bool
	revision int64
	errs     []error
}

// WatchEtcdTruth follows the Events prefix from the first revision until
// the test ends.
func WatchEtcdTruth(t *testing.T, client *clientv3.Client) *EtcdTruth {
	t.Helper()
	truth := &EtcdTruth{versions: map[VersionKey]*corev1.Event{}, deleted: map[string]bool{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	watch := client.Watch(ctx, EventsPrefix, clientv3.WithPrefix(), clientv3.WithPrevKV(), clientv3.WithRev(1))
	go func() {
		defer close(done)
		for resp := range watch {
			truth.mu.Lock()
			if err := resp.Err(); err != nil && ctx.Err() == nil {
				truth.errs = append(truth.errs, err)
			}
			for _, ev := range resp.Events {
				value := ev.Kv.Value
				if ev.Type == clientv3.EventTypeDelete {
					value = ev.PrevKv.Value
				}
				obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(value, nil, &corev1.Event{})
				if err != nil {
					truth.errs = append(truth.errs, fmt.Errorf("decoding %s: %w", ev.Kv.Key, err))
					continue
				}
				event := obj.(*corev1.Event)
				if ev.Type == clientv3.EventTypeDelete {
					truth.deleted[string(event.UID)] = true
					continue
				}
				event.ResourceVersion = fmt.Sprint(ev.Kv.ModRevision)
				truth.versions[VersionKey{string(event.UID), event.ResourceVersion}] = event
			}
			truth.revision = resp.Header.Revision
			truth.mu.Unlock()
		}
	}()
	return truth
}

// WaitVersions waits until etcd held n Event versions, w writing them.
func (e *EtcdTruth) WaitVersions(ctx context.Context, t *testing.T, w *HistoryWriter, what string, n int) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, PollInterval, 60*time.Second, true, func(context.Context) (bool, error) {
		versions, _ := e.Snapshot(t)
		return len(versions) >= n, nil
	})
	if err != nil {
		t.Fatalf("%s: waiting for %d Event versions in etcd: %v (writer errors: %v)", what, n, err, w.Errors())
	}
}

// Revision is the etcd revision the watch has reached.
func (e *EtcdTruth) Revision() int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.revision
}

// Snapshot copies the versions and deletions seen so far (deleted by uid),
// failing the test if the watch failed.
func (e *EtcdTruth) Snapshot(t *testing.T) (map[VersionKey]*corev1.Event, map[string]bool) {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.errs) > 0 {
		t.Fatalf("etcd truth watch: %v", e.errs)
	}
	versions := make(map[VersionKey]*corev1.Event, len(e.versions))
	for k, v := range e.versions {
		versions[k] = v
	}
	deleted := make(map[string]bool, len(e.deleted))
	for k := range e.deleted {
		deleted[k] = true
	}
	return versions, deleted
}

// EventRecordsPath is the history group's API path.
const EventRecordsPath = "/apis/history.eventapiserver.io/v1alpha1"

// HistoryClient is the typed history.eventapiserver.io client over c's
// connection: its server, credentials and TLS.
func HistoryClient(t *testing.T, c *RawClient) historyclient.HistoryV1alpha1Interface {
	t.Helper()
	client, err := historyclient.NewForConfig(&rest.Config{Host: c.BaseURL, BearerToken: c.Token, Transport: c.HTTP.Transport, Timeout: c.HTTP.Timeout})
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// ListAllEventRecords follows continue tokens with pages of limit;
// namespace "" lists all namespaces.
func ListAllEventRecords(t *testing.T, c *RawClient, namespace, fieldSelector string, limit int) []historyv1alpha1.EventRecord {
	t.Helper()
	records := HistoryClient(t, c).EventRecords(namespace)
	var out []historyv1alpha1.EventRecord
	opts := metav1.ListOptions{FieldSelector: fieldSelector, Limit: int64(limit)}
	for pages := 0; ; pages++ {
		if pages > 10000 {
			t.Fatal("more than 10000 pages: the continue token does not advance")
		}
		list, err := records.List(context.Background(), opts)
		if err != nil {
			t.Fatalf("listing eventrecords %q: %v", fieldSelector, err)
		}
		if limit > 0 && len(list.Items) > limit {
			t.Fatalf("page of %d records for limit %d", len(list.Items), limit)
		}
		out = append(out, list.Items...)
		if list.Continue == "" {
			return out
		}
		opts.Continue = list.Continue
	}
}

// RecordKeys are the versions records hold, in their order.
func RecordKeys(records []historyv1alpha1.EventRecord) []VersionKey {
	keys := make([]VersionKey, 0, len(records))
	for _, r := range records {
		keys = append(keys, VersionKey{string(r.Event.UID), r.Event.ResourceVersion})
	}
	return keys
}

// HistoryWriter creates Events through both APIs and updates them as series,
// as fast as a ticker allows, until stopped.
type HistoryWriter struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	errs   []error
}

// StartHistoryWriter starts writing into ns (a Pod's Events: create, then
// patch as a series, through each API in turn, every 20 ms); Stop ends it.
func StartHistoryWriter(client kubernetes.Interface, ns string) *HistoryWriter {
	ctx, cancel := context.WithCancel(context.Background())
	w := &HistoryWriter{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		ticker := time.NewTicker(20 * time.Millisecond)
		defer ticker.Stop()
		pod := corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "crashing", UID: types.UID(UniqueName("uid")), APIVersion: "v1"}
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

// Stop stops the writes and waits for the last.
func (w *HistoryWriter) Stop() {
	w.cancel()
	<-w.done
}

// Errors are the writes that failed.
func (w *HistoryWriter) Errors() []error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]error(nil), w.errs...)
}
