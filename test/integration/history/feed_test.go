package history

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	historyv1alpha1 "github.com/eventapiserver/event-apiserver/pkg/apis/history/v1alpha1"
	"github.com/eventapiserver/event-apiserver/pkg/generated/clientset/versioned"
	"github.com/eventapiserver/event-apiserver/pkg/generated/informers/externalversions"
	historyinformers "github.com/eventapiserver/event-apiserver/pkg/generated/informers/externalversions/history/v1alpha1"
	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// feedDelivery is one eventrecord a consumer received.
type feedDelivery struct {
	typ     watch.EventType
	key     framework.VersionKey
	rv      string
	deleted bool
}

func (d feedDelivery) String() string {
	return fmt.Sprintf("%s %s@%s rv=%s deleted=%v", d.typ, d.key.UID, d.key.RV, d.rv, d.deleted)
}

func toDelivery(typ watch.EventType, obj any) (feedDelivery, bool) {
	r, ok := obj.(*historyv1alpha1.EventRecord)
	if !ok {
		return feedDelivery{}, false
	}
	return feedDelivery{typ: typ, key: framework.VersionKey{UID: string(r.Event.UID), RV: r.Event.ResourceVersion}, rv: r.ResourceVersion, deleted: r.DeletedAt != nil}, true
}

// feedConsumer is an exporter as client-go builds one: an informer on
// eventrecords from the generated informer factory, whose handlers keep
// every delivery and the resourceVersion of the last, from which it
// resumes after a restart.
type feedConsumer struct {
	mu         sync.Mutex
	deliveries []feedDelivery
	watchLists int
}

func (c *feedConsumer) record(typ watch.EventType, obj any) {
	if d, ok := toDelivery(typ, obj); ok {
		c.mu.Lock()
		c.deliveries = append(c.deliveries, d)
		c.mu.Unlock()
	}
}

func (c *feedConsumer) snapshot() []feedDelivery {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]feedDelivery(nil), c.deliveries...)
}

// run runs an informer on ns until ctx ends.
func (c *feedConsumer) run(ctx context.Context, t *testing.T, config *rest.Config, ns string) historyinformers.EventRecordInformer {
	t.Helper()
	config = rest.CopyConfig(config)
	config.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return framework.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
			if req.URL.Query().Get("sendInitialEvents") == "true" {
				c.mu.Lock()
				c.watchLists++
				c.mu.Unlock()
			}
			return rt.RoundTrip(req)
		})
	})
	factory := externalversions.NewSharedInformerFactoryWithOptions(versioned.NewForConfigOrDie(config), 0, externalversions.WithNamespace(ns))
	records := factory.History().V1alpha1().EventRecords()
	informer := records.Informer()
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.record(watch.Added, obj) },
		UpdateFunc: func(_, obj any) { c.record(watch.Modified, obj) },
		DeleteFunc: func(obj any) { c.record(watch.Deleted, obj) },
	}); err != nil {
		t.Fatal(err)
	}
	// The informer's goroutines end with the test, not after it.
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(func() { cancel(); factory.Shutdown() })
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		t.Fatal("the eventrecords informer never synced")
	}
	return records
}

// TestHistoryFeedResume is the feed's promise to exporters. An informer
// on eventrecords is stopped; Events are created, updated and expire
// meanwhile; the server restarts; the consumer resumes from the
// resourceVersion of its last delivery, on the same replica and (sharing
// PostgreSQL) on another, and receives exactly the versions and ends it
// missed, each once, in resourceVersion order. Then retention removes the
// oldest changes and a cursor before them gets kube-apiserver's 410.
func TestHistoryFeedResume(t *testing.T) {
	t.Parallel()
	for _, store := range framework.HistoryStores {
		t.Run(store.Name, func(t *testing.T) { testHistoryFeedResume(t, store.Name, store.Args(t)) })
	}
}

func testHistoryFeedResume(t *testing.T, storeName string, storeArgs []string) {
	etcd := framework.StartEtcd(t)
	opts := framework.ServerOptions{
		EtcdServers: etcd.ClientURL(),
		EventTTL:    time.Hour,
		ExtraArgs:   append([]string{"--history-batch-interval=100ms", "--event-ttl-rule=reason=Expiring:2s"}, storeArgs...),
	}
	first := framework.StartServer(t, opts)
	replicas := []*framework.Server{first}
	if storeName == "postgres" {
		replicas = append(replicas, framework.StartServer(t, opts))
	}
	truth := framework.WatchEtcdTruth(t, etcd.Client(t))
	ctx := framework.PollCtx(t)
	ns := framework.UniqueName("feed")
	client := first.Client(t)
	pod := corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "web-0", UID: types.UID(framework.UniqueName("uid")), APIVersion: "v1"}
	create := func(name, reason string, lastSeen time.Time) {
		t.Helper()
		at := metav1.NewTime(lastSeen)
		_, err := client.CoreV1().Events(ns).Create(ctx, &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: name},
			InvolvedObject: pod, Reason: reason, Message: name, Type: corev1.EventTypeNormal,
			Count: 1, FirstTimestamp: at, LastTimestamp: at, Source: corev1.EventSource{Component: "kubelet"},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	update := func(name string, count int) {
		t.Helper()
		_, err := client.CoreV1().Events(ns).Patch(ctx, name, types.StrategicMergePatchType,
			[]byte(fmt.Sprintf(`{"count":%d,"lastTimestamp":%q}`, count, time.Now().UTC().Format(time.RFC3339))), metav1.PatchOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	// inHistory waits until server's history holds every version etcd held
	// and every deletion, ends included.
	inHistory := func(server *framework.Server) {
		t.Helper()
		c := framework.AdminRawClient(t, server)
		err := wait.PollUntilContextTimeout(ctx, framework.PollInterval, 60*time.Second, true, func(context.Context) (bool, error) {
			versions, deleted := truth.Snapshot(t)
			records := framework.ListAllEventRecords(t, c, ns, "", 500)
			if len(records) != len(versions) {
				return false, nil
			}
			for _, r := range records {
				if r.Live == deleted[string(r.Event.UID)] {
					return false, nil
				}
			}
			return true, nil
		})
		if err != nil {
			t.Fatalf("history never caught up with etcd: %v", err)
		}
	}

	// An old Event, last seen three days ago: retention removes it first.
	create("old", "Steady", time.Now().Add(-72*time.Hour))
	for i := 1; i <= 3; i++ {
		create(fmt.Sprintf("steady-%d", i), "Steady", time.Now())
	}
	inHistory(first)

	consumer := &feedConsumer{}
	informerCtx, stopInformer := context.WithCancel(ctx)
	consumer.run(informerCtx, t, first.Config(t), ns)
	// Live changes after the initial state, through the informer's watch.
	create("steady-4", "Steady", time.Now())
	update("steady-1", 2)
	inHistory(first)
	waitDelivered := func(n int) {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, framework.PollInterval, 30*time.Second, true, func(context.Context) (bool, error) {
			return len(consumer.snapshot()) >= n, nil
		})
		if err != nil {
			t.Fatalf("the informer delivered %v, want %d records", consumer.snapshot(), n)
		}
	}
	waitDelivered(6)
	stopInformer()
	before := consumer.snapshot()
	if consumer.watchLists == 0 {
		t.Error("the informer never asked for sendInitialEvents: client-go's watch-list path was not exercised")
	}
	delivered := map[framework.VersionKey]bool{}
	for _, d := range before {
		if d.typ != watch.Added || delivered[d.key] || d.deleted {
			t.Errorf("before the stop: %s (want each version ADDED once, live)", d)
		}
		delivered[d.key] = true
	}
	// The last delivery is the newest: a live change after the initial state.
	resumeRV := before[len(before)-1].rv
	var oldRV string
	seenVersions, _ := truth.Snapshot(t)
	for _, d := range before {
		if framework.RVInt(t, d.rv) > framework.RVInt(t, resumeRV) {
			t.Errorf("%s is newer than the last delivery's %s", d, resumeRV)
		}
		if v := seenVersions[d.key]; v != nil && v.Name == "old" {
			oldRV = d.rv
		}
	}
	t.Logf("consumer stopped at resourceVersion %s after %d deliveries", resumeRV, len(before))

	// Meanwhile: new Events, updates, and Events that expire.
	for i := 1; i <= 3; i++ {
		create(fmt.Sprintf("expiring-%d", i), "Expiring", time.Now())
	}
	update("steady-2", 2)
	update("expiring-1", 2)
	create("steady-5", "Steady", time.Now())
	err := wait.PollUntilContextTimeout(ctx, framework.PollInterval, 60*time.Second, true, func(context.Context) (bool, error) {
		_, deleted := truth.Snapshot(t)
		return len(deleted) == 3, nil
	})
	if err != nil {
		t.Fatalf("the Expiring Events did not expire: %v", err)
	}
	inHistory(first)
	if err := first.Restart(); err != nil {
		t.Fatal(err)
	}
	client = first.Client(t)
	update("steady-3", 2)
	create("steady-6", "Steady", time.Now())
	for _, server := range replicas {
		inHistory(server)
	}

	// What the consumer missed: every version etcd held that it did not
	// receive, and the end of each Event that expired.
	versions, deleted := truth.Snapshot(t)
	// An end is one MODIFIED per version of the Event, as each
	// record's live changed: the consumer receives every one.
	wantAdded, wantEnded := map[framework.VersionKey]bool{}, map[framework.VersionKey]bool{}
	for k := range versions {
		if !delivered[k] {
			wantAdded[k] = true
		}
		if deleted[k.UID] {
			wantEnded[k] = true
		}
	}
	var resumed [][]feedDelivery
	// Each resume ends with an Event of its own, which the next one skips.
	sentinels := map[string]bool{}
	for i, server := range replicas {
		name := "the same replica, restarted"
		if i > 0 {
			name = "another replica"
		}
		t.Run(name, func(t *testing.T) {
			got := resumeFeed(ctx, t, server.Config(t), ns, resumeRV, len(wantAdded)+len(wantEnded), sentinels)
			resumed = append(resumed, got)
			last := framework.RVInt(t, resumeRV)
			added := map[framework.VersionKey]int{}
			ended := map[framework.VersionKey]int{}
			for _, d := range got {
				if rv := framework.RVInt(t, d.rv); rv <= last {
					t.Errorf("%s after resourceVersion %d: out of order or repeated", d, last)
				} else {
					last = rv
				}
				switch {
				case d.typ == watch.Added && !d.deleted:
					added[d.key]++
				case d.typ == watch.Modified && d.deleted:
					ended[d.key]++
				default:
					t.Errorf("unexpected delivery %s", d)
				}
			}
			for k, n := range added {
				if !wantAdded[k] || n != 1 {
					t.Errorf("version %v received %d times, want it once if missed (missed: %v)", k, n, wantAdded[k])
				}
			}
			for k := range wantAdded {
				if added[k] == 0 {
					t.Errorf("missed version %v of %s", k, versions[k].Name)
				}
			}
			for k := range wantEnded {
				if ended[k] != 1 {
					t.Errorf("the end of Event %s on its version %s received %d times, want once", k.UID, k.RV, ended[k])
				}
			}
			if len(ended) != len(wantEnded) {
				t.Errorf("ends of %d versions received, %d versions of expired Events", len(ended), len(wantEnded))
			}
		})
	}
	if len(resumed) == 2 && fmt.Sprint(resumed[0]) != fmt.Sprint(resumed[1]) {
		t.Errorf("the replicas sent different feeds from %s:\n%v\n%v", resumeRV, resumed[0], resumed[1])
	}

	// Retention: a replica keeping 48 h (PostgreSQL: by the day of the
	// Event's last occurrence, so the old Event's day goes) or 1 s (SQLite:
	// by the time of capture, so everything goes).
	retention := "--history-retention=48h"
	pruner := opts
	if storeName == "sqlite" {
		retention = "--history-retention=1s"
		if err := first.Stop(); err != nil {
			t.Fatal(err)
		}
		pruner.DataDir = first.DataDir
	}
	pruner.ExtraArgs = append(append([]string{}, opts.ExtraArgs...), retention, "--history-retention-interval=1s")
	pruning := framework.StartServer(t, pruner)
	testFeedTooOld(ctx, t, pruning, ns, oldRV)
}

// TestHistoryFeedInformerAgreesWithList: after an Event's end, an
// informer's store on eventrecords holds what a fresh list returns, every
// version of the ended Event included, at the same resourceVersion and with
// live false: the watch sends one MODIFIED per record the end changed, as
// kube-apiserver's watch sends one event per changed object, each at its
// own resourceVersion.
func TestHistoryFeedInformerAgreesWithList(t *testing.T) {
	t.Parallel()
	server := framework.StartServer(t, framework.ServerOptions{ExtraArgs: []string{
		"--history-batch-interval=50ms", "--event-ttl-rule=reason=Expiring:2s",
	}})
	ctx := framework.PollCtx(t)
	ns := framework.UniqueName("feed-informer")
	client := server.Client(t)
	create := func(name, reason string) {
		t.Helper()
		now := metav1.Now()
		if _, err := client.CoreV1().Events(ns).Create(ctx, &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: name},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "web-0", UID: "web-0-uid"},
			Reason:         reason, Type: corev1.EventTypeNormal, Count: 1, FirstTimestamp: now, LastTimestamp: now,
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	update := func(name string, count int) {
		t.Helper()
		if _, err := client.CoreV1().Events(ns).Patch(ctx, name, types.StrategicMergePatchType,
			[]byte(fmt.Sprintf(`{"count":%d}`, count)), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	consumer := &feedConsumer{}
	informer := consumer.run(ctx, t, server.Config(t), ns)
	// Three versions of an Event that expires, two of one deleted, and one
	// that stays.
	create("expiring", "Expiring")
	update("expiring", 2)
	update("expiring", 3)
	create("deleted", "Steady")
	update("deleted", 2)
	create("staying", "Steady")
	if err := client.CoreV1().Events(ns).Delete(ctx, "deleted", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	records := versioned.NewForConfigOrDie(server.Config(t)).HistoryV1alpha1().EventRecords(ns)
	state := func(items []*historyv1alpha1.EventRecord) map[string]string {
		out := map[string]string{}
		for _, r := range items {
			out[r.Name] = fmt.Sprintf("rv=%s live=%v", r.ResourceVersion, r.Live)
		}
		return out
	}
	var listed, held map[string]string
	err := wait.PollUntilContextTimeout(ctx, framework.PollInterval, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := records.List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		var items []*historyv1alpha1.EventRecord
		ended := 0
		for i := range list.Items {
			items = append(items, &list.Items[i])
			if !list.Items[i].Live {
				ended++
			}
		}
		listed = state(items)
		// Both ends stored: the five versions of the two ended Events.
		if len(items) != 6 || ended != 5 {
			return false, nil
		}
		// What the informer holds, read through its generated lister.
		if items, err = informer.Lister().EventRecords(ns).List(labels.Everything()); err != nil {
			return false, err
		}
		held = state(items)
		return fmt.Sprint(held) == fmt.Sprint(listed), nil
	})
	if err != nil {
		t.Fatalf("the informer's store never agreed with a fresh list (%v):\n list:     %v\n informer: %v\n deliveries: %v", err, listed, held, consumer.snapshot())
	}
	ends := 0
	for _, d := range consumer.snapshot() {
		if d.typ == watch.Modified && d.deleted {
			ends++
		}
	}
	if ends != 5 {
		t.Errorf("%d MODIFIED ends delivered, want one per version of the ended Events (5): %v", ends, consumer.snapshot())
	}
}

// resumeFeed watches from rv with client-go's RetryWatcher, as an exporter
// resumes, until n records arrived; then it writes one more Event (added to
// sentinels) and reads up to it, so that anything repeated or extra would
// show. Records of earlier sentinels are left out.
func resumeFeed(ctx context.Context, t *testing.T, config *rest.Config, ns, rv string, n int, sentinels map[string]bool) []feedDelivery {
	t.Helper()
	records := versioned.NewForConfigOrDie(config).HistoryV1alpha1().EventRecords(ns)
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	w, err := watchtools.NewRetryWatcherWithContext(ctx, rv, &cache.ListWatch{
		WatchFuncWithContext: records.Watch,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var got []feedDelivery
	sentinel := ""
	for ev := range w.ResultChan() {
		if ev.Type == watch.Error {
			t.Fatalf("watch from %s: %v", rv, apierrors.FromObject(ev.Object))
		}
		if ev.Type == watch.Bookmark {
			continue
		}
		d, ok := toDelivery(ev.Type, ev.Object)
		if !ok {
			t.Fatalf("watch event %s of %T", ev.Type, ev.Object)
		}
		if sentinel != "" && d.key.UID == sentinel {
			sentinels[sentinel] = true
			return got
		}
		if sentinels[d.key.UID] {
			continue
		}
		got = append(got, d)
		if len(got) == n && sentinel == "" {
			sentinel = createSentinel(ctx, t, config, ns)
		}
	}
	t.Fatalf("watch from %s ended after %d of %d records: %v", rv, len(got), n, got)
	return nil
}

func createSentinel(ctx context.Context, t *testing.T, config *rest.Config, ns string) string {
	t.Helper()
	now := metav1.Now()
	ev, err := kubernetes.NewForConfigOrDie(config).CoreV1().Events(ns).Create(ctx, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: "sentinel-"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "sentinel"},
		Reason:         "Sentinel", Type: corev1.EventTypeNormal, Count: 1, FirstTimestamp: now, LastTimestamp: now,
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return string(ev.UID)
}

var tooOldMessage = regexp.MustCompile(`^too old resource version: (\d+) \((\d+)\)$`)

// testFeedTooOld waits until retention removed the old Event's version
// (at oldRV), then finds a watch from before it answered with the watch
// cache's 410 ERROR event, a list at it with etcd3's 410, and a watch from
// the floor the message names served.
func testFeedTooOld(ctx context.Context, t *testing.T, server *framework.Server, ns, oldRV string) {
	t.Helper()
	if oldRV == "" {
		t.Fatal("the consumer never received the old Event")
	}
	records := versioned.NewForConfigOrDie(server.Config(t)).HistoryV1alpha1().EventRecords(ns)
	before := strconv.FormatInt(framework.RVInt(t, oldRV)-1, 10)
	var status metav1.Status
	err := wait.PollUntilContextTimeout(ctx, framework.PollInterval, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		w, err := records.Watch(ctx, metav1.ListOptions{ResourceVersion: before})
		if err != nil {
			return false, err
		}
		defer w.Stop()
		select {
		case ev := <-w.ResultChan():
			if ev.Type != watch.Error {
				return false, nil
			}
			status = *ev.Object.(*metav1.Status)
			return true, nil
		case <-time.After(500 * time.Millisecond):
			return false, nil
		}
	})
	if err != nil {
		t.Fatalf("a watch from %s never got an ERROR event once retention ran: %v", before, err)
	}
	m := tooOldMessage.FindStringSubmatch(status.Message)
	want := apierrors.NewResourceExpired(status.Message).ErrStatus
	if m == nil || m[1] != before || status.Status != want.Status || status.Reason != want.Reason || status.Code != want.Code || status.Details != nil {
		t.Fatalf("watch from %s: %+v, want kube-apiserver's %+v with %q", before, status, want, "too old resource version: "+before+" (floor)")
	}
	if floor := framework.RVInt(t, m[2]); floor < framework.RVInt(t, oldRV) {
		t.Errorf("floor %d is before the removed version's resourceVersion %s", floor, oldRV)
	}
	_, err = records.List(ctx, metav1.ListOptions{ResourceVersion: before, ResourceVersionMatch: metav1.ResourceVersionMatchExact})
	if !apierrors.IsResourceExpired(err) {
		t.Errorf("a list exactly at %s: %v, want 410 Expired", before, err)
	}
	// The floor itself is a valid cursor (once retention has finished
	// its pass, the floor it names stays).
	floor := m[2]
	err = wait.PollUntilContextTimeout(ctx, framework.PollInterval, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		timeout := int64(1)
		w, err := records.Watch(ctx, metav1.ListOptions{ResourceVersion: floor, TimeoutSeconds: &timeout})
		if err != nil {
			return false, err
		}
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				status := apierrors.FromObject(ev.Object).(apierrors.APIStatus).Status()
				if m := tooOldMessage.FindStringSubmatch(status.Message); m != nil {
					floor = m[2]
				}
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Errorf("a watch from the floor %s: %v", floor, err)
	}
}
