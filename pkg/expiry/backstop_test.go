package expiry_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/wait"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/etcd3"
	etcd3testing "k8s.io/apiserver/pkg/storage/etcd3/testing"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/component-base/metrics/testutil"

	"github.com/eventapiserver/event-apiserver/pkg/apis/core"
	coreinstall "github.com/eventapiserver/event-apiserver/pkg/apis/core/install"
	eventsinstall "github.com/eventapiserver/event-apiserver/pkg/apis/events/install"
	"github.com/eventapiserver/event-apiserver/pkg/expiry"
	eventstorage "github.com/eventapiserver/event-apiserver/pkg/registry/event/storage"
	"github.com/eventapiserver/event-apiserver/pkg/ttl"
	"github.com/eventapiserver/event-apiserver/pkg/watchresume"
)

// fixture is the Event store over a real etcd, built as pkg/apiserver builds
// it (watch cache with the backstop's index, watch resume, TTL router), with
// a backstop whose clock the test sets.
type fixture struct {
	t        testing.TB
	store    *eventstorage.REST
	backstop *expiry.Backstop
	etcd     *clientv3.Client
	prefix   string
	// written is the revision of the last Event written through the store.
	written int64
}

const ns = "ns"

func newFixture(t testing.TB, rules *ttl.Rules, cached bool) *fixture {
	t.Helper()
	server, storageConfig := etcd3testing.NewUnsecuredEtcd3TestClientServer(t)
	scheme := runtime.NewScheme()
	coreinstall.Install(scheme)
	eventsinstall.Install(scheme)
	storageConfig.EventsHistoryWindow = storagebackend.DefaultEventsHistoryWindow
	// As the server's: leases reused for 5% of the TTL, a minute at most.
	storageConfig.LeaseManagerConfig = etcd3.NewDefaultLeaseManagerConfig()
	storageConfig.Codec = serializer.NewCodecFactory(scheme).LegacyCodec(corev1.SchemeGroupVersion)
	options := generic.RESTOptions{
		StorageConfig:           storageConfig.ForResource(core.Resource("events")),
		Decorator:               generic.UndecoratedStorage,
		DeleteCollectionWorkers: 1,
		ResourcePrefix:          "events",
	}
	if cached {
		options.Decorator = genericregistry.StorageWithCacher()
	}
	b := expiry.New(expiry.Config{Rules: rules, Interval: time.Second, QPS: 1000})
	getter := b.RESTOptionsGetter(watchresume.NewRESTOptionsGetter(options, rules.NewRawStorage, func(s storage.Interface) storage.Interface { return s }))
	r, err := eventstorage.NewREST(scheme, getter, rules, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Store.DestroyFunc)
	f := &fixture{t: t, store: r, backstop: b, etcd: server.V3Client.Client, prefix: storageConfig.Prefix}
	if cached {
		if err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			return r.ReadinessCheck() == nil, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// ctx is a request through core/v1, which validates as old recorders write.
func (f *fixture) ctx() context.Context {
	ctx := genericapirequest.WithNamespace(context.Background(), ns)
	return genericapirequest.WithRequestInfo(ctx, &genericapirequest.RequestInfo{
		IsResourceRequest: true, APIGroup: "", APIVersion: "v1", Namespace: ns, Resource: "events",
	})
}

func (f *fixture) create(name, typ string) *core.Event {
	f.t.Helper()
	e := &core.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: name, Namespace: ns},
		InvolvedObject: core.ObjectReference{Kind: "Pod", Namespace: ns, Name: "p"},
		Reason:         "Test",
		Message:        "m",
		Type:           typ,
		Source:         core.EventSource{Component: "test"},
	}
	out, err := f.store.Create(f.ctx(), e, rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	if err != nil {
		f.t.Fatalf("creating %s: %v", name, err)
	}
	f.written = mustRev(f.t, out.(*core.Event))
	return out.(*core.Event)
}

func (f *fixture) update(name string) *core.Event {
	f.t.Helper()
	obj, err := f.store.Get(f.ctx(), name, &metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	e := obj.(*core.Event).DeepCopy()
	e.Count++
	out, _, err := f.store.Update(f.ctx(), name, rest.DefaultUpdatedObjectInfo(e), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	f.written = mustRev(f.t, out.(*core.Event))
	return out.(*core.Event)
}

func (f *fixture) key(name string) string { return f.prefix + "/events/" + ns + "/" + name }

// revision is etcd's current revision.
func (f *fixture) revision() int64 {
	f.t.Helper()
	resp, err := f.etcd.Get(context.Background(), "/nothing")
	if err != nil {
		f.t.Fatal(err)
	}
	return resp.Header.Revision
}

// cached waits until the watch cache has seen revision rev of an Event
// write (its resourceVersion moves with Events and etcd's progress
// notifications only).
func (f *fixture) cached(rev int64) {
	f.t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		list := &core.EventList{}
		err := f.store.Store.Storage.GetList(ctx, "/events", storage.ListOptions{ResourceVersion: "0", Recursive: true, Predicate: storage.Everything}, list)
		if err != nil {
			return false, err
		}
		got, _ := strconv.ParseInt(list.ResourceVersion, 10, 64)
		return got >= rev, nil
	})
	if err != nil {
		f.t.Fatalf("the cache did not reach revision %d: %v", rev, err)
	}
}

func (f *fixture) exists(name string) bool {
	f.t.Helper()
	resp, err := f.etcd.Get(context.Background(), f.key(name))
	if err != nil {
		f.t.Fatal(err)
	}
	return len(resp.Kvs) == 1
}

// pass runs one pass with a clock whose one sample dates every write up to
// revision rev age ago, and the writes after it as not dated yet.
func (f *fixture) pass(rev int64, age time.Duration) {
	f.t.Helper()
	f.cached(f.written)
	f.backstop.UseClock(f.etcd, []expiry.Sample{{At: time.Now().Add(-age), Revision: rev}})
	f.backstop.Pass(context.Background())
	if f.backstop.Broken() {
		f.t.Fatal("the backstop found Events of other buckets in an index bucket")
	}
}

// TestBackstopNeverEarly: with --event-ttl 60s (leases of 63s) and a rule
// of 600s for Warnings, a pass whose clock says the first writes are 150s
// old deletes the Normal Events among them, and nothing else: not the
// Warnings (the rule's TTL), not an Event written again since (its new
// revision is not dated yet), not an Event whose lease another writer made
// longer (a kube-apiserver with another --event-ttl), not the Events written
// later. Once the clock says 700s, everything of the first writes goes but
// the rewritten one.
func TestBackstopNeverEarly(t *testing.T) {
	rules, err := ttl.Parse([]string{"type=Warning:600s"}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, rules, true)
	if !f.backstop.Attached() {
		t.Fatal("the backstop did not get the cached storage")
	}
	ctx := context.Background()
	for _, name := range []string{"normal-1", "normal-2", "normal-3", "rewritten"} {
		f.create(name, corev1.EventTypeNormal)
	}
	f.create("warning", corev1.EventTypeWarning)
	// Written again under a lease of 200s by another writer.
	foreign := f.create("foreign", corev1.EventTypeNormal)
	lease, err := f.etcd.Grant(ctx, 200)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := f.etcd.Get(ctx, f.key(foreign.Name))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.etcd.Put(ctx, f.key(foreign.Name), string(kv.Kvs[0].Value), clientv3.WithLease(lease.ID)); err != nil {
		t.Fatal(err)
	}
	first := f.revision()
	f.update("rewritten")
	f.create("later", corev1.EventTypeNormal)

	deletedBefore := deletions(t)
	latenessBefore, _ := testutil.GetHistogramMetricValue(expiry.LatenessSeconds.ObserverMetric)
	f.pass(first, 150*time.Second)
	want := map[string]bool{"normal-1": false, "normal-2": false, "normal-3": false,
		"rewritten": true, "warning": true, "foreign": true, "later": true}
	f.check(want)
	if got := deletions(t) - deletedBefore; got != 3 {
		t.Errorf("deletions counted %v, want 3", got)
	}
	// The foreign Event went to a cursor of its own lease's TTL, from just
	// below its revision; the class's own cursor reached the clock's.
	cursors := f.backstop.Cursors(60)
	if cursors[63] != first {
		t.Errorf("the class's cursor at %d, want %d", cursors[63], first)
	}
	if rev, ok := cursors[200]; !ok || rev >= first {
		t.Errorf("the 200s lease's cursor at %d (%v), want below %d", rev, ok, first)
	}
	// The class's horizon (the Warnings' 630s) already covers 200s; a
	// lease longer than every class makes the clock keep samples for it.
	if h := f.backstop.Horizon(); h < 630*time.Second {
		t.Errorf("clock horizon %v, want at least the longest class's lease, 630s", h)
	}

	f.pass(first, 250*time.Second)
	want["foreign"] = false
	f.check(want)

	f.pass(first, 700*time.Second)
	want["warning"] = false
	f.check(want)

	// Each late by the clock's age less its lease's TTL: 3×87s, 50s, 70s.
	sum, err := testutil.GetHistogramMetricValue(expiry.LatenessSeconds.ObserverMetric)
	if err != nil {
		t.Fatal(err)
	}
	if sum-latenessBefore < 3*87+50+70 {
		t.Errorf("lateness sum %v, want at least %v", sum-latenessBefore, 3*87+50+70)
	}
}

func deletions(t *testing.T) float64 {
	t.Helper()
	v, err := testutil.GetCounterMetricValue(expiry.DeletionsTotal)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func races(t *testing.T, outcome string) float64 {
	t.Helper()
	v, _ := testutil.GetCounterMetricValue(expiry.RacesTotal.WithLabelValues(outcome))
	return v
}

func (f *fixture) check(want map[string]bool) {
	f.t.Helper()
	for name, present := range want {
		if got := f.exists(name); got != present {
			f.t.Errorf("%s present %v, want %v", name, got, present)
		}
	}
}

// TestBackstopBuckets spreads one class's Events over three index buckets
// (etcd's revision pushed past two bucket boundaries between them; buckets
// of 16 revisions rather than 4096, to take few writes) and
// checks that a pass walks them in order up to the due revision and stops
// there: Events of a later bucket than the due revision stay, and the next
// pass that moves the clock takes them.
func TestBackstopBuckets(t *testing.T) {
	rules, err := ttl.Parse(nil, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	expiry.SetBucketBits(t, 4)
	f := newFixture(t, rules, true)
	ctx := context.Background()
	bump := func() {
		// To the next bucket boundary, and a little past it.
		rev := f.revision()
		next := (rev>>expiry.BucketBits() + 1) << expiry.BucketBits()
		for r := rev; r < next+3; r++ {
			if _, err := f.etcd.Put(ctx, "/unrelated", "x"); err != nil {
				t.Fatal(err)
			}
		}
	}
	var names [3][]string
	var ends [3]int64
	for b := range 3 {
		for i := range 5 {
			name := fmt.Sprintf("b%d-%d", b, i)
			f.create(name, corev1.EventTypeNormal)
			names[b] = append(names[b], name)
		}
		ends[b] = f.revision()
		bump()
	}
	f.pass(ends[1], 2*time.Minute)
	for b, present := range []bool{false, false, true} {
		for _, name := range names[b] {
			if f.exists(name) != present {
				t.Errorf("%s (bucket %d) present %v, want %v", name, b, !present, present)
			}
		}
	}
	if got := f.backstop.Cursors(60)[63]; got != ends[1] {
		t.Errorf("cursor at %d, want the due revision %d", got, ends[1])
	}
	f.pass(ends[2], 2*time.Minute)
	for _, name := range names[2] {
		if f.exists(name) {
			t.Errorf("%s present after its bucket came due", name)
		}
	}
}

// TestBackstopPreconditions: a deletion at a resourceVersion the Event has
// moved past leaves it (its TTL restarted with that write); one of an Event
// already gone is no error. Both are counted as races.
func TestBackstopPreconditions(t *testing.T) {
	rules, err := ttl.Parse(nil, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, rules, true)
	f.backstop.UseClock(f.etcd, nil)
	ctx := context.Background()
	old := f.create("e", corev1.EventTypeNormal)
	updated := f.update("e")
	f.cached(f.written)
	rewritten := races(t, "rewritten")
	if err := f.backstop.Delete(ctx, old, mustRev(t, old)); err != nil {
		t.Fatalf("deleting at an old resourceVersion: %v", err)
	}
	if !f.exists("e") {
		t.Fatal("the Event was deleted at a resourceVersion it had moved past")
	}
	if got := races(t, "rewritten") - rewritten; got != 1 {
		t.Errorf("rewritten races %v, want 1", got)
	}
	if err := f.backstop.Delete(ctx, updated, mustRev(t, updated)); err != nil {
		t.Fatal(err)
	}
	if f.exists("e") {
		t.Fatal("not deleted at its current resourceVersion")
	}
	gone := races(t, "gone")
	if err := f.backstop.Delete(ctx, updated, mustRev(t, updated)); err != nil {
		t.Fatalf("deleting a deleted Event: %v", err)
	}
	if got := races(t, "gone") - gone; got != 1 {
		t.Errorf("gone races %v, want 1", got)
	}
	if _, err := f.store.Get(f.ctx(), "e", &metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("get after delete: %v", err)
	}
}

// TestBackstopNeedsTheCache: with the watch cache off there is no index, and
// the backstop stays off rather than scan etcd.
func TestBackstopNeedsTheCache(t *testing.T) {
	rules, err := ttl.Parse(nil, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if f := newFixture(t, rules, false); f.backstop.Attached() {
		t.Error("the backstop attached to uncached storage")
	}
}

func TestNewOff(t *testing.T) {
	forever, _ := ttl.Parse(nil, 0)
	hour, _ := ttl.Parse(nil, time.Hour)
	for _, tc := range []struct {
		name string
		c    expiry.Config
		want bool
	}{
		{"on", expiry.Config{Rules: hour, Interval: time.Second, QPS: 1}, true},
		{"interval 0", expiry.Config{Rules: hour, QPS: 1}, false},
		{"no TTL", expiry.Config{Rules: forever, Interval: time.Second, QPS: 1}, false},
	} {
		if got := expiry.New(tc.c) != nil; got != tc.want {
			t.Errorf("%s: on %v, want %v", tc.name, got, tc.want)
		}
	}
}

func mustRev(t testing.TB, e *core.Event) int64 {
	t.Helper()
	rev, err := strconv.ParseInt(e.ResourceVersion, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return rev
}

// BenchmarkFirstPass prices a pass right after a start, when each class's
// cursor walks etcd's history from revision 0: one lookup in the watch
// cache's index per 4096 revisions, here over 1000 empty buckets (4 million
// revisions, every one due by the clock).
//
//	go test -run '^$' -bench FirstPass ./pkg/expiry/
func BenchmarkFirstPass(b *testing.B) {
	rules, err := ttl.Parse(nil, time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	f := newFixture(b, rules, true)
	const buckets = 1000
	due := int64(buckets) << expiry.BucketBits()
	f.backstop.UseClock(f.etcd, []expiry.Sample{{At: time.Now().Add(-2 * time.Hour), Revision: due}})
	b.ResetTimer()
	for range b.N {
		f.backstop.ResetCursors()
		f.backstop.Pass(context.Background())
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/buckets, "ns/bucket")
}
