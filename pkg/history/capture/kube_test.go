package capture_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/testutil"

	"github.com/eventapiserver/event-apiserver/pkg/apis/core"
	"github.com/eventapiserver/event-apiserver/pkg/apiserver"
	"github.com/eventapiserver/event-apiserver/pkg/history"
	"github.com/eventapiserver/event-apiserver/pkg/history/capture"
	"github.com/eventapiserver/event-apiserver/pkg/history/sqlite"
)

// eventsAPI is kube-apiserver's Events API as capture uses it: a list at the
// current resourceVersion, and watches from a resourceVersion that replay
// the changes after it, answer 410 below the oldest one still held, and
// carry bookmarks. The integration tests hold capture to the real one
// (test/integration/deploy/history_only_test.go).
type eventsAPI struct {
	mu      sync.Mutex
	changed *sync.Cond
	rv      int64
	// oldest is the first resourceVersion a watch can start after.
	oldest  int64
	events  map[string]*corev1.Event
	log     []watch.Event
	watches []int64
	lists   int
}

func newEventsAPI() (*eventsAPI, *fake.Clientset) {
	a := &eventsAPI{rv: 100, oldest: 100, events: map[string]*corev1.Event{}}
	a.changed = sync.NewCond(&a.mu)
	client := fake.NewClientset()
	client.PrependReactor("list", "events", func(k8stesting.Action) (bool, runtime.Object, error) {
		a.mu.Lock()
		defer a.mu.Unlock()
		a.lists++
		list := &corev1.EventList{ListMeta: metav1.ListMeta{ResourceVersion: fmt.Sprint(a.rv)}}
		for _, e := range a.events {
			list.Items = append(list.Items, *e.DeepCopy())
		}
		return true, list, nil
	})
	client.PrependWatchReactor("events", func(action k8stesting.Action) (bool, watch.Interface, error) {
		rv, err := strconv.ParseInt(action.(k8stesting.WatchActionImpl).WatchRestrictions.ResourceVersion, 10, 64)
		if err != nil {
			return true, nil, apierrors.NewBadRequest(err.Error())
		}
		a.mu.Lock()
		defer a.mu.Unlock()
		a.watches = append(a.watches, rv)
		if rv < a.oldest {
			return true, nil, apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", rv, a.oldest))
		}
		ch := make(chan watch.Event)
		w := watch.NewProxyWatcher(ch)
		go a.serve(w, ch, rv)
		return true, w, nil
	})
	return a, client
}

// serve sends the changes after rv, and new ones as they come, until the
// watcher stops.
func (a *eventsAPI) serve(w *watch.ProxyWatcher, ch chan watch.Event, rv int64) {
	defer close(ch)
	stop := w.StopChan()
	go func() { <-stop; a.mu.Lock(); a.changed.Broadcast(); a.mu.Unlock() }()
	next := 0
	for {
		a.mu.Lock()
		for next < len(a.log) && resourceVersion(a.log[next]) <= rv {
			next++
		}
		for next >= len(a.log) {
			select {
			case <-stop:
				a.mu.Unlock()
				return
			default:
			}
			a.changed.Wait()
		}
		ev := a.log[next]
		next++
		a.mu.Unlock()
		select {
		case ch <- ev:
		case <-stop:
			return
		}
	}
}

func resourceVersion(ev watch.Event) int64 {
	rv, _ := strconv.ParseInt(ev.Object.(*corev1.Event).ResourceVersion, 10, 64)
	return rv
}

func (a *eventsAPI) record(typ watch.EventType, e *corev1.Event) {
	a.log = append(a.log, watch.Event{Type: typ, Object: e.DeepCopy()})
	a.changed.Broadcast()
}

// write creates or updates an Event, its count one more than before, with
// a message of size bytes; it returns the version's resourceVersion.
func (a *eventsAPI) write(name string, size int) int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.rv++
	e, ok := a.events[name]
	typ := watch.Modified
	if !ok {
		typ = watch.Added
		e = &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(fmt.Sprintf("uid-%s-%d", name, a.rv))},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "p-" + name, Namespace: "ns", UID: "pod"},
			Reason:         "R", Type: corev1.EventTypeNormal, FirstTimestamp: metav1.Now(),
		}
		a.events[name] = e
	}
	e.Count++
	e.Message = strings.Repeat("m", size)
	e.LastTimestamp = metav1.Now()
	e.ResourceVersion = fmt.Sprint(a.rv)
	a.record(typ, e)
	return a.rv
}

func (a *eventsAPI) delete(name string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.rv++
	e := a.events[name]
	delete(a.events, name)
	e.ResourceVersion = fmt.Sprint(a.rv)
	a.record(watch.Deleted, e)
}

// bookmark sends a bookmark at a resourceVersion no Event has.
func (a *eventsAPI) bookmark() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.rv += 10
	a.record(watch.Bookmark, &corev1.Event{ObjectMeta: metav1.ObjectMeta{ResourceVersion: fmt.Sprint(a.rv)}})
	return a.rv
}

// compact forgets the changes so far, as kube-apiserver's watch cache and
// etcd's compaction do: a watch from before now answers 410.
func (a *eventsAPI) compact() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.oldest = a.rv
	a.log = nil
}

func (a *eventsAPI) stats() (watches []int64, lists int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]int64(nil), a.watches...), a.lists
}

type kubeCaptureTest struct {
	t      *testing.T
	api    *eventsAPI
	client *fake.Clientset
	store  history.Store
	sqlite *sqlite.Store
	// behindTimeout is the source's BehindTimeout; zero: its default.
	behindTimeout time.Duration
}

func newKubeCaptureTest(t *testing.T) *kubeCaptureTest {
	s, err := sqlite.Open(filepath.Join(t.TempDir(), "history.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	api, client := newEventsAPI()
	return &kubeCaptureTest{t: t, api: api, client: client, store: s, sqlite: s}
}

func (k *kubeCaptureTest) run(maxQueueBytes int64) (c *capture.Capture, stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	source := capture.NewKubernetesSource(capture.KubernetesConfig{Client: k.client, BehindTimeout: k.behindTimeout})
	c = capture.New(source, capture.Config{
		Store:         k.store,
		Decoder:       apiserver.Codecs.UniversalDecoder(core.SchemeGroupVersion),
		BatchSize:     7,
		BatchInterval: 10 * time.Millisecond,
		MaxQueueBytes: maxQueueBytes,
	})
	go func() { defer close(done); c.Run(ctx) }()
	return c, func() { cancel(); <-done }
}

// versions is every stored (name, resourceVersion), failing on a repeat.
func (k *kubeCaptureTest) versions() map[string]bool {
	k.t.Helper()
	records, err := k.store.List(context.Background(), history.Query{Limit: 1 << 20})
	if err != nil {
		k.t.Fatal(err)
	}
	got := map[string]bool{}
	for _, r := range records {
		key := fmt.Sprintf("%s@%d", r.Name, r.Revision)
		if got[key] {
			k.t.Errorf("%s stored twice", key)
		}
		got[key] = true
	}
	return got
}

func (k *kubeCaptureTest) waitProgress(rv int64) {
	k.t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		got, ok, err := k.store.Progress(ctx, capture.KubernetesProgressKey)
		return err == nil && ok && got >= rv, nil
	})
	if err != nil {
		got, _, _ := k.store.Progress(context.Background(), capture.KubernetesProgressKey)
		k.t.Fatalf("progress %d, want %d", got, rv)
	}
}

func (k *kubeCaptureTest) deletedAt(name string) *time.Time {
	k.t.Helper()
	records, err := k.store.List(context.Background(), history.Query{Conditions: []history.Condition{{Columns: []history.Column{history.ColumnName}, Value: name}}})
	if err != nil || len(records) == 0 {
		k.t.Fatalf("no history of %s: %v", name, err)
	}
	return records[0].DeletedAt
}

// TestKubeCapture: Events there before capture starts are listed, every
// version written while it runs is stored once though the queue holds about
// two of them (capture stops reading and resumes its watch), a DELETED marks
// the Event's end, and after a stop capture resumes its watch from the
// stored resourceVersion, listing nothing again.
func TestKubeCapture(t *testing.T) {
	k := newKubeCaptureTest(t)
	want := map[string]bool{}
	write := func(name string) {
		want[fmt.Sprintf("%s@%d", name, k.api.write(name, 1000))] = true
	}
	for i := 0; i < 5; i++ {
		write(fmt.Sprint("before", i))
	}
	c, stop := k.run(3000)
	k.waitProgress(k.api.rv)
	for i := 0; i < 60; i++ {
		write(fmt.Sprint("e", i%20))
	}
	k.api.delete("e0")
	k.waitProgress(k.api.rv)
	if err := c.Ready(); err != nil {
		t.Errorf("Ready: %v", err)
	}
	stop()
	if k.deletedAt("e0") == nil {
		t.Error("e0's delete is not in history")
	}

	for i := 0; i < 10; i++ {
		write(fmt.Sprint("late", i))
	}
	watches, lists := k.api.stats()
	if lists != 1 {
		t.Errorf("%d lists before the restart, want 1 (the start)", lists)
	}
	resumeFrom := watches[len(watches)-1]
	_, stop = k.run(3000)
	defer stop()
	k.waitProgress(k.api.rv)
	watches, lists = k.api.stats()
	if lists != 1 {
		t.Errorf("capture listed again on resume (%d lists)", lists)
	}
	if len(watches) < 10 {
		t.Errorf("only %d watches: the small queue did not make capture stop reading", len(watches))
	}
	if got := watches[len(watches)-1]; got < resumeFrom {
		t.Errorf("resumed from %d, before the %d it had stored", got, resumeFrom)
	}
	got := k.versions()
	for v := range want {
		if !got[v] {
			t.Errorf("version %s not in history", v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("history holds %d versions, want %d", len(got), len(want))
	}
}

// TestKubeCaptureBookmark: a bookmark moves the stored progress, so a
// restart resumes after it, but only once the versions before it are
// stored, here behind a store that fails its first writes.
func TestKubeCaptureBookmark(t *testing.T) {
	k := newKubeCaptureTest(t)
	flaky := &flakyStore{Store: k.sqlite}
	k.store = flaky
	_, stop := k.run(1 << 20)
	k.waitProgress(k.api.rv)
	flaky.failures.Store(3)
	rv := k.api.write("a", 10)
	mark := k.api.bookmark()
	k.waitProgress(mark)
	if !k.versions()[fmt.Sprintf("a@%d", rv)] {
		t.Errorf("progress reached the bookmark %d before a@%d was stored", mark, rv)
	}
	stop()
	_, stop = k.run(1 << 20)
	defer stop()
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		watches, _ := k.api.stats()
		return watches[len(watches)-1] == mark, nil
	})
	if err != nil {
		watches, _ := k.api.stats()
		t.Errorf("watches from %v after the restart, want one from the bookmark %d", watches, mark)
	}
}

// TestKubeCaptureExpired: capture away while kube-apiserver forgot the
// changes it missed answers 410 on resume, relists, stores what is listed,
// marks the Event deleted meanwhile as gone, and counts exactly the versions
// it could not see in the lost-versions metric.
func TestKubeCaptureExpired(t *testing.T) {
	k := newKubeCaptureTest(t)
	for _, name := range []string{"updated", "deleted", "same"} {
		k.api.write(name, 10)
	}
	_, stop := k.run(1 << 20)
	k.waitProgress(k.api.rv)
	stop()

	lostBefore := counterOf(t, history.RelistLostVersions, "kubernetes")
	expiredBefore := relists(t, "expired")
	// Away: "updated" gets three more versions of which the list shows the
	// last, "created" three of which likewise, "deleted" goes.
	var lost []string
	for i := 0; i < 3; i++ {
		lost = append(lost, fmt.Sprintf("updated@%d", k.api.write("updated", 10)))
		lost = append(lost, fmt.Sprintf("created@%d", k.api.write("created", 10)))
	}
	lost = lost[:len(lost)-2]
	k.api.delete("deleted")
	k.api.compact()

	_, stop = k.run(1 << 20)
	defer stop()
	k.waitProgress(k.api.rv)
	if got := relists(t, "expired") - expiredBefore; got != 1 {
		t.Errorf("%v relists for 410, want 1", got)
	}
	got := k.versions()
	for _, v := range lost {
		if got[v] {
			t.Errorf("%s is in history, yet the fake kube-apiserver never served it", v)
		}
	}
	if n := counterOf(t, history.RelistLostVersions, "kubernetes") - lostBefore; int(n) != len(lost) {
		t.Errorf("lost versions metric grew by %v, %d versions were lost", n, len(lost))
	}
	if k.deletedAt("deleted") == nil {
		t.Error("the Event deleted while capture was away is not marked deleted")
	}
	if k.deletedAt("same") != nil || k.deletedAt("updated") != nil {
		t.Error("an Event still there is marked deleted")
	}
}

// TestKubeCaptureRestored: kube-apiserver's etcd is restored from a backup
// behind history's progress. Its watch from that future resourceVersion is
// silent, as etcd's is; once kube-apiserver's resourceVersion has stayed
// behind for BehindTimeout capture relists, marks the Events the backup
// lacks deleted, counts the relist, and moves its progress back, so that
// the Events written after the restore are captured.
func TestKubeCaptureRestored(t *testing.T) {
	k := newKubeCaptureTest(t)
	k.behindTimeout = 300 * time.Millisecond
	backupRV := k.api.write("kept", 10)
	k.api.mu.Lock()
	backup := k.api.events["kept"].DeepCopy()
	// Writes to other resources after the backup.
	k.api.rv += 100
	k.api.mu.Unlock()
	k.api.write("kept", 10)
	k.api.write("after-backup", 10)
	_, stop := k.run(1 << 20)
	k.waitProgress(k.api.rv)
	stop()
	stored := k.api.rv

	restoredBefore := relists(t, "restored")
	rewoundBefore := counterOf(t, history.RelistRewoundRevisions, "kubernetes")
	k.api.mu.Lock()
	k.api.rv, k.api.oldest, k.api.log = backupRV, backupRV, nil
	k.api.events = map[string]*corev1.Event{"kept": backup}
	k.api.mu.Unlock()
	newRV := k.api.write("new", 10)

	_, stop = k.run(1 << 20)
	defer stop()
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		got, _, err := k.store.Progress(ctx, capture.KubernetesProgressKey)
		return err == nil && got == newRV, nil
	})
	if err != nil {
		got, _, _ := k.store.Progress(context.Background(), capture.KubernetesProgressKey)
		t.Fatalf("progress %d, want it rewound to %d", got, newRV)
	}
	if got := relists(t, "restored") - restoredBefore; got != 1 {
		t.Errorf("%v relists for a restore, want 1", got)
	}
	if got := counterOf(t, history.RelistRewoundRevisions, "kubernetes") - rewoundBefore; got != float64(stored-(newRV)) {
		t.Errorf("rewound revisions metric grew by %v, want %d", got, stored-newRV)
	}
	// The watch follows from the rewound resourceVersion.
	next := k.api.write("new", 10)
	k.waitProgress(next)
	got := k.versions()
	for _, v := range []string{fmt.Sprintf("new@%d", newRV), fmt.Sprintf("new@%d", next)} {
		if !got[v] {
			t.Errorf("%s is not in history", v)
		}
	}
	if k.deletedAt("after-backup") == nil {
		t.Error("the Event the backup lacks is not marked deleted")
	}
	if k.deletedAt("kept") != nil {
		t.Error("the Event in the backup is marked deleted")
	}
}

func counter(t *testing.T, c metrics.CounterMetric) float64 {
	t.Helper()
	v, err := testutil.GetCounterMetricValue(c)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func relists(t *testing.T, reason string) float64 {
	t.Helper()
	v, err := testutil.GetCounterMetricValue(history.Relists.WithLabelValues("kubernetes", reason))
	if err != nil {
		t.Fatal(err)
	}
	return v
}
