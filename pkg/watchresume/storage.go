// Package watchresume keeps Event watches resumable although they are served
// from the watch cache.
//
// kube-apiserver runs Events without a watch cache, so every Event watch there
// is its own etcd watch and can resume from any revision etcd still retains.
// We serve watches from one shared cacher, whose history covers only its
// recent window (about 75s, and nothing before its own start). Storage sends
// a watch the cacher would refuse as "too old" to etcd's history instead, so
// a client that resumes after a restart, a failover to another replica, or a
// long disconnect keeps going without a relist, exactly as long as it would
// against kube-apiserver.
package watchresume

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/cacher"
	"k8s.io/klog/v2"
)

// Storage is the cacher's delegator with two changes: a watch from a
// resource version older than the cache's history is served from etcd, and
// so is a LIST while the cache is not filled yet (GetList).
// Everything else (reads, writes, consistent lists) is the delegator's.
type Storage struct {
	*cacher.CacheDelegator

	// etcd is the etcd3 store the cacher itself reads from.
	etcd          storage.Interface
	groupResource schema.GroupResource
}

var _ storage.Interface = &Storage{}

// NewStorage wraps delegator, which serves from a cacher over etcd.
func NewStorage(delegator *cacher.CacheDelegator, etcd storage.Interface, groupResource schema.GroupResource) *Storage {
	return &Storage{CacheDelegator: delegator, etcd: etcd, groupResource: groupResource}
}

// GetList serves from the cache once it is filled, and from etcd before
// that. While it fills (after a start, where 100k Events take seconds to
// decode, or after a relist) the cacher answers every LIST with a label or
// field selector 429 "storage is (re)initializing" (cacher.GetList,
// ResilientWatchCacheInitialization: it delegates only unfiltered LISTs).
// kube-apiserver, which keeps no Events cache, serves every Events LIST from
// etcd, so a restarted event-apiserver does the same until its cache is
// ready instead of refusing `kubectl describe` meanwhile. The answer is the
// etcd3 store's, the one the delegator falls back to for consistent reads:
// the same objects, resource versions and continue tokens. /readyz still
// waits for the cache (the storage-readiness hook), so a load balancer keeps
// sending traffic to filled replicas while they exist.
func (s *Storage) GetList(ctx context.Context, key string, opts storage.ListOptions, listObj runtime.Object) error {
	if s.CacheDelegator.ReadinessCheck() != nil {
		listsBeforeReady.Inc()
		return s.etcd.GetList(ctx, key, opts, listObj)
	}
	return s.CacheDelegator.GetList(ctx, key, opts, listObj)
}

// Watch serves from the cache when the cache has the requested history, and
// from etcd when the cache answers 410 Gone for it.
//
// How the decision is made, without any timing: Cacher.Watch (k8s.io/apiserver
// pkg/storage/cacher/cacher.go) checks the requested resource version against
// its history under its lock (watchCache.getAllEventsSinceLocked) and, when it
// is too old, returns an errWatcher: a channel of capacity one that already
// holds the 410 Error event and is closed. A watcher that serves events has a
// buffer of at least ten (minWatchChanSize) and is never closed on return.
// So a returned channel of capacity one that already holds its one event is
// the cacher's answer, read here without blocking and without touching any
// event of a real watch.
//
// etcd then answers exactly as kube-apiserver's uncached Event watches do:
// the events after the requested revision, or its own 410 ("The
// resourceVersion for the provided watch is too old.") once etcd has
// compacted that revision.
func (s *Storage) Watch(ctx context.Context, key string, opts storage.ListOptions) (watch.Interface, error) {
	w, err := s.CacheDelegator.Watch(ctx, key, opts)
	if storage.IsInvalidError(err) {
		// A malformed resourceVersion is the client's error. The generic
		// store passes the storage's InvalidError on as a 500 (kube-apiserver
		// too); answer it as a LIST with the same value is answered.
		return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid resource version: %v", err))
	}
	if err != nil || !resumes(opts) {
		return w, err
	}
	event, ok := cacherAnswer(w)
	if !ok {
		recordResume(s.groupResource, sourceCache)
		return w, nil
	}
	if !isGone(event) {
		return replay(event, w), nil
	}
	w.Stop()

	recordResume(s.groupResource, sourceEtcd)
	klog.V(2).InfoS("Serving watch from etcd history: its resource version is older than the watch cache's",
		"resource", s.groupResource, "key", key, "resourceVersion", opts.ResourceVersion)
	etcdOpts := opts
	// kube-apiserver's uncached watches never ask etcd for progress. We do
	// when the client accepts bookmarks (KEP-1904): its resource version then
	// advances while nothing it watches changes, so its next watch lands in
	// the cache's window instead of staying on etcd until a compaction
	// turns it into a relist.
	etcdOpts.ProgressNotify = opts.Predicate.AllowWatchBookmarks
	ew, err := s.etcd.Watch(ctx, key, etcdOpts)
	if err != nil {
		return nil, err
	}
	return forwardUntil(ew, fromEtcd(opts.Predicate.AllowWatchBookmarks)), nil
}

// fromEtcd decides what of a watch served from etcd's history reaches the
// client.
func fromEtcd(bookmarks bool) func(watch.Event) (keep, end bool) {
	return func(event watch.Event) (bool, bool) {
		if event.Type == watch.Bookmark {
			// etcd broadcasts the progress the cacher requests for
			// consistent reads to every watch on the same client stream,
			// and the etcd3 store turns them into bookmarks: kept only for
			// a client that asked.
			return bookmarks, false
		}
		// The etcd3 store ends a watch whose etcd member lost its leader
		// (it watches WithRequireLeader) with a 500 carrying etcd's error,
		// which client-go answers with a relist. The cache's own watchers
		// are closed instead when its watch fails, and the client resumes
		// from the last resourceVersion it got: so is this one, and the
		// resumed watch lands on a member that has a leader, or in the
		// cache.
		unavailable := etcdUnavailable(event)
		return !unavailable, unavailable
	}
}

// etcdUnavailableErrors are etcd's errors of gRPC code Unavailable (etcd
// could not serve, not a refusal of the request), as the etcd3 store
// words them in a watch's Error event: only their text is left there.
var etcdUnavailableErrors = []string{
	rpctypes.ErrNoLeader.Error(), rpctypes.ErrLeaderChanged.Error(), rpctypes.ErrTimeout.Error(),
	"code = Unavailable",
}

// etcdUnavailable reports whether event is the etcd3 store's 500 for an
// etcd that could not serve the watch.
func etcdUnavailable(event watch.Event) bool {
	if event.Type != watch.Error {
		return false
	}
	status, ok := event.Object.(*metav1.Status)
	if !ok || status.Code != http.StatusInternalServerError {
		return false
	}
	for _, text := range etcdUnavailableErrors {
		if strings.Contains(status.Message, text) {
			return true
		}
	}
	return false
}

// resumes reports whether a watch starts from a given resource version
// without initial events: the only watches the cacher can refuse as too old.
func resumes(opts storage.ListOptions) bool {
	if opts.ResourceVersion == "" || opts.ResourceVersion == "0" {
		return false
	}
	return opts.SendInitialEvents == nil || !*opts.SendInitialEvents
}

// cacherAnswer takes the one event of an errWatcher (see Storage.Watch).
// For any other watcher it reads nothing and reports false.
func cacherAnswer(w watch.Interface) (watch.Event, bool) {
	ch := w.ResultChan()
	if cap(ch) != 1 || len(ch) != 1 {
		return watch.Event{}, false
	}
	// We are the channel's only reader and it holds one event: no blocking.
	return <-ch, true
}

func isGone(event watch.Event) bool {
	if event.Type != watch.Error {
		return false
	}
	status, ok := event.Object.(*metav1.Status)
	if !ok {
		return false
	}
	return status.Code == http.StatusGone || apierrors.IsResourceExpired(apierrors.FromObject(status))
}

// replay hands back the event taken from the cacher's watcher, followed by
// whatever that watcher still delivers (nothing: an errWatcher is closed).
func replay(event watch.Event, w watch.Interface) watch.Interface {
	return forward(w, []watch.Event{event}, keepAll)
}
