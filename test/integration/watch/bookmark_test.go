package watch

import (
	"context"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// TestWatchBookmarksResumeAfterRestart is KEP-1904 (efficient watch
// resumption) end to end. While other keys in the events etcd change and no
// Event does, a client watching with allowWatchBookmarks gets bookmarks whose
// resource version follows etcd's revision. After the server restarts, the
// client resumes from its last bookmark without a 410: that resource version
// is the new watch cache's starting point, so the cache serves it, and every
// later Event arrives once, in order. (Were anything written between the
// bookmark and the new cache's first list, the cache would start after it
// and the resume would be served from etcd: correct, but not what this test
// pins.)
func TestWatchBookmarksResumeAfterRestart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	target := startOurTarget(t)
	server, client, config, kv := target.server, target.client, target.config, target.etcd
	const ns = "bookmarks"

	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return server.LogContains("etcd sends watch progress notifications"), nil
	}); err != nil {
		t.Errorf("no start-up confirmation that etcd sends progress notifications: %v", err)
	}

	last := createEvents(ctx, t, client, ns, "before")[0]

	// Other keys change all along; Events do not.
	writerCtx, stopWriter := context.WithCancel(ctx)
	var writer sync.WaitGroup
	writer.Add(1)
	go func() {
		defer writer.Done()
		for writerCtx.Err() == nil {
			_, _ = kv.Put(writerCtx, "/registry/other/ticker", time.Now().String())
			select {
			case <-writerCtx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()

	// The client watches in short rounds, as a reflector does with longer
	// ones: the cacher sends a bookmark shortly before each round's timeout.
	rv := last.RV
	var bookmarks []string
	round := func() {
		t.Helper()
		w := watchEvents(ctx, t, client, ns, metav1.ListOptions{
			ResourceVersion: rv, AllowWatchBookmarks: true, TimeoutSeconds: ptr.To[int64](4),
		})
		got, _ := framework.Observe(ctx, w, nil)
		if c := framework.Changes(got); len(c) > 0 {
			t.Fatalf("no Event changed, the watch from %s shows %v", rv, c)
		}
		if errs := framework.OfType(got, watch.Error); len(errs) > 0 {
			t.Fatalf("watch from %s: %v", rv, errs)
		}
		for _, b := range framework.OfType(got, watch.Bookmark) {
			bookmarks = append(bookmarks, b.RV)
			rv = b.RV
		}
	}
	for i := 0; len(bookmarks) < 3; i++ {
		if i == 8 {
			t.Fatalf("%d bookmarks in %d rounds of 4s, want 3", len(bookmarks), i)
		}
		round()
	}
	t.Logf("last Event at %s; bookmarks while other keys changed: %v", last.RV, bookmarks)
	// Two bookmarks in a row may carry the same resource version when no
	// progress notification came between them (etcd sends them on a timer,
	// late on a loaded machine); they must never go back, and over the
	// rounds they must move past the last Event and on.
	prev := framework.RVInt(t, last.RV)
	for _, b := range bookmarks {
		if framework.RVInt(t, b) < prev {
			t.Fatalf("bookmarks %v go back", bookmarks)
		}
		prev = framework.RVInt(t, b)
	}
	if first := framework.RVInt(t, bookmarks[0]); prev <= first || prev <= framework.RVInt(t, last.RV) {
		t.Fatalf("bookmarks %v do not advance past the last Event (%s) and on", bookmarks, last.RV)
	}

	// Writes stop; the next bookmark reaches etcd's revision.
	stopWriter()
	writer.Wait()
	final := clockSettled(ctx, t, kv)
	for i := 0; framework.RVInt(t, rv) < final; i++ {
		if i == 5 {
			t.Fatalf("bookmarks stay at %s, etcd is at %d", rv, final)
		}
		round()
	}
	t.Logf("etcd at %d, last bookmark %s", final, rv)

	if err := server.Restart(); err != nil {
		t.Fatal(err)
	}
	fromCache, fromEtcd := resumesFrom(t, config, "cache"), resumesFrom(t, config, "etcd")
	w := watchEvents(ctx, t, client, ns, metav1.ListOptions{
		ResourceVersion: rv, AllowWatchBookmarks: true, TimeoutSeconds: ptr.To[int64](60),
	})
	after := createEvents(ctx, t, client, ns, "after-1", "after-2", "after-3")
	watchCtx, cancelWatch := context.WithTimeout(ctx, 30*time.Second)
	defer cancelWatch()
	got, closed := framework.Observe(watchCtx, w, framework.HasChanges(len(after)))
	t.Logf("resumed from bookmark %s after restart: %v (closed: %v)", rv, got, closed)
	if g := framework.Gone(got); len(g) > 0 {
		t.Fatalf("resume from bookmark %s after restart: %v", rv, g)
	}
	assertChanges(t, "after restart", got, after)
	// The bookmark was recent enough for the new cache: no etcd watch needed.
	if c, e := resumesFrom(t, config, "cache")-fromCache, resumesFrom(t, config, "etcd")-fromEtcd; c != 1 || e != 0 {
		t.Errorf("resume served %v times from the cache and %v from etcd, want once from the cache", c, e)
	}
}
