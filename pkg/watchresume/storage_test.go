package watchresume_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/component-base/metrics/testutil"

	"github.com/eventapiserver/event-apiserver/pkg/apis/core"
	"github.com/eventapiserver/event-apiserver/pkg/apiserver"
	"github.com/eventapiserver/event-apiserver/pkg/etcd"
	"github.com/eventapiserver/event-apiserver/pkg/etcdhealth"
	eventstorage "github.com/eventapiserver/event-apiserver/pkg/registry/event/storage"
	"github.com/eventapiserver/event-apiserver/pkg/ttl"
	"github.com/eventapiserver/event-apiserver/pkg/watchresume"
)

const testNamespace = "ns"

// testEtcd runs the embedded etcd the server uses, with fast progress
// notifications.
func testEtcd(t *testing.T) string {
	t.Helper()
	e, err := etcd.StartEmbedded(etcd.EmbeddedConfig{
		DataDir:                filepath.Join(t.TempDir(), "etcd"),
		ClientAddress:          "127.0.0.1:0",
		ProgressNotifyInterval: 200 * time.Millisecond,
		ReadyTimeout:           time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e.ClientURL()
}

// testStore builds the Event store the server builds: options getter from
// EtcdOptions, wrapped by NewRESTOptionsGetter, and waits for its cache.
func testStore(t *testing.T, etcdURL string, watchCache bool) *eventstorage.REST {
	t.Helper()
	store := newTestStore(t, etcdURL, watchCache, etcdhealth.NewGate().Storage)
	waitCacheReady(t, store)
	return store
}

func waitCacheReady(t *testing.T, store *eventstorage.REST) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(context.Context) (bool, error) {
		return store.ReadinessCheck() == nil, nil
	}); err != nil {
		t.Fatalf("watch cache not ready: %v", err)
	}
}

// newTestStore builds that store over wrap (the etcd3 store's wrapper) and
// does not wait for its cache.
func newTestStore(t *testing.T, etcdURL string, watchCache bool, wrap watchresume.WrapEtcd) *eventstorage.REST {
	t.Helper()
	options := genericoptions.NewEtcdOptions(storagebackend.NewDefaultConfig("/registry", nil))
	options.StorageConfig.Transport.ServerList = []string{etcdURL}
	options.DefaultStorageMediaType = "application/vnd.kubernetes.protobuf"
	options.EnableWatchCache = watchCache
	factory := apiserver.NewStorageFactory(options.StorageConfig, options.DefaultStorageMediaType)
	getter := watchresume.NewRESTOptionsGetter(options.CreateRESTOptionsGetter(factory, nil), nil, wrap)
	store, err := eventstorage.NewREST(apiserver.Scheme, getter, &ttl.Rules{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(store.Destroy)
	return store
}

func requestContext() context.Context {
	ctx := genericapirequest.WithNamespace(context.Background(), testNamespace)
	return genericapirequest.WithRequestInfo(ctx, &genericapirequest.RequestInfo{
		APIVersion: "v1", Namespace: testNamespace, Resource: "events", Verb: "create",
	})
}

// createEvent writes a core/v1-style Event and returns its resource version.
func createEvent(t *testing.T, store *eventstorage.REST, name string) string {
	t.Helper()
	obj := &core.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: name, Namespace: testNamespace},
		InvolvedObject: core.ObjectReference{Kind: "Pod", Namespace: testNamespace, Name: "p"},
		Reason:         "Test",
	}
	out, err := store.Create(requestContext(), obj, nil, &metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	return metaOf(t, out).GetResourceVersion()
}

// metaOf reads an object's metadata; the cacher may wrap the object.
func metaOf(t *testing.T, obj any) metav1.Object {
	t.Helper()
	accessor, err := meta.Accessor(obj)
	if err != nil {
		t.Fatal(err)
	}
	return accessor
}

func watchFrom(t *testing.T, store *eventstorage.REST, rv string, bookmarks bool) watch.Interface {
	t.Helper()
	w, err := store.Watch(requestContext(), &metainternalversion.ListOptions{
		ResourceVersion:     rv,
		AllowWatchBookmarks: bookmarks,
	})
	if err != nil {
		t.Fatalf("watch from %s: %v", rv, err)
	}
	t.Cleanup(w.Stop)
	return w
}

// next returns the next event that is not a bookmark, failing after timeout.
func next(t *testing.T, w watch.Interface, timeout time.Duration) watch.Event {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case e, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("watch closed")
			}
			if e.Type != watch.Bookmark {
				return e
			}
		case <-deadline:
			t.Fatalf("no event within %v", timeout)
		}
	}
}

func resumeCount(source string) float64 {
	v, _ := testutil.GetCounterMetricValue(watchresume.ResumesTotal.WithLabelValues("", "events", source))
	return v
}

func TestWatchResume(t *testing.T) {
	etcdURL := testEtcd(t)
	first := testStore(t, etcdURL, true)
	rv1 := createEvent(t, first, "e1")
	createEvent(t, first, "e2")

	// A second store starts its cache after e1 and e2: as a restarted server
	// or another replica would.
	second := testStore(t, etcdURL, true)

	t.Run("within the cache window, from the cache", func(t *testing.T) {
		cache, fromEtcd := resumeCount(watchresume.SourceCache), resumeCount(watchresume.SourceEtcd)
		rv := createEvent(t, second, "e3")
		w := watchFrom(t, second, rv, false)
		createEvent(t, second, "e4")
		if got := next(t, w, 10*time.Second); metaOf(t, got.Object).GetName() != "e4" {
			t.Fatalf("got %s %v, want e4", got.Type, got.Object)
		}
		if resumeCount(watchresume.SourceCache) != cache+1 || resumeCount(watchresume.SourceEtcd) != fromEtcd {
			t.Errorf("resumes: cache %v→%v, etcd %v→%v; want one more from the cache",
				cache, resumeCount(watchresume.SourceCache), fromEtcd, resumeCount(watchresume.SourceEtcd))
		}
	})

	t.Run("older than the cache, from etcd history in order", func(t *testing.T) {
		fromEtcd := resumeCount(watchresume.SourceEtcd)
		w := watchFrom(t, second, rv1, false)
		var names []string
		for range 3 {
			e := next(t, w, 10*time.Second)
			if e.Type != watch.Added {
				t.Fatalf("got %s %v, want ADDED", e.Type, e.Object)
			}
			names = append(names, metaOf(t, e.Object).GetName())
		}
		if fmt.Sprint(names) != "[e2 e3 e4]" {
			t.Fatalf("events after %s: %v, want [e2 e3 e4]", rv1, names)
		}
		// The etcd watch goes on with new events.
		createEvent(t, second, "e5")
		if e := next(t, w, 10*time.Second); metaOf(t, e.Object).GetName() != "e5" {
			t.Fatalf("got %s %v, want e5", e.Type, e.Object)
		}
		if resumeCount(watchresume.SourceEtcd) != fromEtcd+1 {
			t.Errorf("etcd resumes %v→%v, want one more", fromEtcd, resumeCount(watchresume.SourceEtcd))
		}
	})

	t.Run("etcd watch sends bookmarks when asked", func(t *testing.T) {
		current := listConsistent(t, second).ResourceVersion
		w := watchFrom(t, second, rv1, true)
		deadline := time.After(10 * time.Second)
		for {
			select {
			case e, ok := <-w.ResultChan():
				if !ok {
					t.Fatal("watch closed")
				}
				if e.Type == watch.Bookmark && atLeast(metaOf(t, e.Object).GetResourceVersion(), current) {
					return
				}
			case <-deadline:
				t.Fatalf("no bookmark at or after %s within 10s", current)
			}
		}
	})

	t.Run("etcd watch sends no bookmarks unless asked", func(t *testing.T) {
		w := watchFrom(t, second, rv1, false)
		for range 4 {
			next(t, w, 10*time.Second) // e2..e5
		}
		// A consistent list after a write elsewhere in etcd makes the cacher
		// request progress until its cache catches up, and etcd broadcasts
		// that progress to every watch on the client's stream.
		client := etcdClient(t, etcdURL)
		stop := time.After(2 * time.Second)
		for {
			if _, err := client.Put(context.Background(), "/other/key", "v"); err != nil {
				t.Fatal(err)
			}
			listConsistent(t, second)
			select {
			case e, ok := <-w.ResultChan():
				if !ok {
					t.Fatal("watch closed")
				}
				t.Fatalf("unexpected %s event: %v", e.Type, e.Object)
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	})

	t.Run("compacted: etcd's 410, as kube-apiserver", func(t *testing.T) {
		client := etcdClient(t, etcdURL)
		rv, _ := strconv.ParseInt(createEvent(t, second, "e6"), 10, 64)
		if _, err := client.Compact(context.Background(), rv); err != nil {
			t.Fatal(err)
		}
		w := watchFrom(t, second, rv1, false)
		e := next(t, w, 10*time.Second)
		status, ok := e.Object.(*metav1.Status)
		if e.Type != watch.Error || !ok {
			t.Fatalf("got %s %v, want an Error", e.Type, e.Object)
		}
		if status.Code != http.StatusGone || status.Message != "The resourceVersion for the provided watch is too old." {
			t.Fatalf("got %d %q, want 410 and kube-apiserver's message", status.Code, status.Message)
		}
		if !apierrors.IsResourceExpired(apierrors.FromObject(status)) && !apierrors.IsGone(apierrors.FromObject(status)) {
			t.Errorf("reason %q, want Expired or Gone", status.Reason)
		}
	})
}

func etcdClient(t *testing.T, url string) *clientv3.Client {
	t.Helper()
	client, err := clientv3.New(clientv3.Config{Endpoints: []string{url}, DialTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	return client
}

func listConsistent(t *testing.T, store *eventstorage.REST) *core.EventList {
	t.Helper()
	out, err := store.List(requestContext(), &metainternalversion.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return out.(*core.EventList)
}

func atLeast(rv, min string) bool {
	a, _ := strconv.ParseUint(rv, 10, 64)
	b, _ := strconv.ParseUint(min, 10, 64)
	return a >= b
}

func TestRESTOptionsGetter(t *testing.T) {
	etcdURL := testEtcd(t)
	tests := []struct {
		name       string
		watchCache bool
		wantOurs   bool
	}{
		{name: "watch cache on: resumable cache", watchCache: true, wantOurs: true},
		{name: "watch cache off: plain etcd", watchCache: false, wantOurs: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			store := testStore(t, etcdURL, tc.watchCache)
			_, ours := store.Storage.Storage.(*watchresume.Storage)
			if ours != tc.wantOurs {
				t.Errorf("storage is %T, want ours: %v", store.Storage.Storage, tc.wantOurs)
			}
		})
	}
}

// blockingCacheSource holds back the cacher's own reads (its watch, and a
// LIST without selectors) until release is closed, so that its cache stays
// unfilled.
type blockingCacheSource struct {
	storage.Interface
	release chan struct{}
}

func (b *blockingCacheSource) wait(ctx context.Context) error {
	select {
	case <-b.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (b *blockingCacheSource) Watch(ctx context.Context, key string, opts storage.ListOptions) (watch.Interface, error) {
	if err := b.wait(ctx); err != nil {
		return nil, err
	}
	return b.Interface.Watch(ctx, key, opts)
}

func (b *blockingCacheSource) GetList(ctx context.Context, key string, opts storage.ListOptions, listObj runtime.Object) error {
	if opts.Predicate.Empty() {
		if err := b.wait(ctx); err != nil {
			return err
		}
	}
	return b.Interface.GetList(ctx, key, opts, listObj)
}

// TestListBeforeCacheReady: while the watch cache fills, a LIST with a field
// selector is answered from etcd (the cacher alone would answer 429), and
// from the cache once it is filled, with the same Events.
func TestListBeforeCacheReady(t *testing.T) {
	etcdURL := testEtcd(t)
	createEvent(t, testStore(t, etcdURL, true), "before-restart")

	release := make(chan struct{})
	gate := etcdhealth.NewGate()
	store := newTestStore(t, etcdURL, true, func(s storage.Interface) storage.Interface {
		return &blockingCacheSource{Interface: gate.Storage(s), release: release}
	})
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()

	list := func() []core.Event {
		t.Helper()
		out, err := store.List(requestContext(), &metainternalversion.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("involvedObject.name", "p"),
		})
		if err != nil {
			t.Fatalf("list: %v", err)
		}
		return out.(*core.EventList).Items
	}
	cases := []struct {
		name  string
		fill  bool
		ready bool
	}{
		{name: "cache filling: from etcd", fill: false, ready: false},
		{name: "cache filled: from the cache", fill: true, ready: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.fill {
				close(release)
				waitCacheReady(t, store)
			}
			if ready := store.ReadinessCheck() == nil; ready != tc.ready {
				t.Fatalf("cache ready %v, want %v", ready, tc.ready)
			}
			items := list()
			if len(items) != 1 || items[0].Name != "before-restart" {
				t.Errorf("listed %v, want the one Event before-restart", items)
			}
		})
	}
}
