package history

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/klog/v2"

	historyapi "github.com/eventapiserver/event-apiserver/pkg/apis/history"
	"github.com/eventapiserver/event-apiserver/pkg/fieldselectors"
	store "github.com/eventapiserver/event-apiserver/pkg/history"
)

// FeedConfig tunes the eventrecords watch; zero values take the defaults.
type FeedConfig struct {
	// PollInterval is how often the server reads the store's feed head
	// while anyone watches: how soon a change stored by any replica is seen.
	PollInterval time.Duration
	// BookmarkInterval is how often a watch that asked for bookmarks gets
	// one, as kube-apiserver's watch cache sends one about every minute.
	BookmarkInterval time.Duration
	// MaxWatches bounds the watches one server serves at once.
	MaxWatches int
	// PageSize bounds the records a watch reads from the store at once,
	// and so its memory.
	PageSize int
	// Cluster names the server's own cluster, whose versions the store
	// keeps without a cluster (history.ColumnCluster): records show it,
	// and the cluster field label selects them by it.
	Cluster string
	// Clusters, when set (a fleet's hub), decides which clusters' records
	// each requester reads (ClustersResource); nil: every reader of
	// eventrecords reads every cluster's.
	Clusters authorizer.Authorizer
}

const (
	defaultPollInterval     = 250 * time.Millisecond
	defaultBookmarkInterval = time.Minute
	defaultMaxWatches       = 500
	defaultPageSize         = 100
	// tooLargeWait is how long a request from a position the store has not
	// reached waits for it, as the watch cache waits for a resourceVersion
	// (resourceVersionTooHighRetrySeconds and its 3 s wait) before
	// answering "Too large resource version".
	tooLargeWait = 3 * time.Second
)

func (c FeedConfig) withDefaults() FeedConfig {
	if c.PollInterval <= 0 {
		c.PollInterval = defaultPollInterval
	}
	if c.BookmarkInterval <= 0 {
		c.BookmarkInterval = defaultBookmarkInterval
	}
	if c.MaxWatches <= 0 {
		c.MaxWatches = defaultMaxWatches
	}
	if c.PageSize <= 0 {
		c.PageSize = defaultPageSize
	}
	return c
}

// feedHub tells watchers that the store's feed may have moved. One poll of
// the head serves every watch of the server, and only while there are any.
type feedHub struct {
	store store.Store
	cfg   FeedConfig

	mu       sync.Mutex
	watchers int
	position int64
	// moved is closed when position changes, then replaced.
	moved chan struct{}
	stop  context.CancelFunc
}

func newFeedHub(s store.Store, cfg FeedConfig) *feedHub {
	return &feedHub{store: s, cfg: cfg, moved: make(chan struct{})}
}

// join registers a watcher, starting the poll for the first; it fails when
// MaxWatches are served.
func (h *feedHub) join() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.watchers >= h.cfg.MaxWatches {
		return apierrors.NewTooManyRequests(fmt.Sprintf("this server serves at most %d eventrecords watches at once; retry later or on another replica", h.cfg.MaxWatches), 10)
	}
	h.watchers++
	if h.watchers == 1 {
		ctx, cancel := context.WithCancel(context.Background())
		h.stop = cancel
		go h.poll(ctx)
	}
	return nil
}

func (h *feedHub) leave() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.watchers--
	if h.watchers == 0 {
		h.stop()
	}
}

// wait returns a channel closed once the feed moves past seen.
func (h *feedHub) wait(seen int64) <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.position > seen {
		done := make(chan struct{})
		close(done)
		return done
	}
	return h.moved
}

func (h *feedHub) poll(ctx context.Context) {
	ticker := time.NewTicker(h.cfg.PollInterval)
	defer ticker.Stop()
	for {
		state, err := h.store.Feed(ctx)
		if err == nil {
			h.mu.Lock()
			if state.Position != h.position {
				h.position = state.Position
				close(h.moved)
				h.moved = make(chan struct{})
			}
			h.mu.Unlock()
		} else if ctx.Err() == nil {
			klog.V(2).InfoS("Reading the Event history feed's head", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// watchStart is where a watch begins and what it sends first.
type watchStart struct {
	// position: changes after it are sent.
	position int64
	// initial: the records as of position are sent first, as ADDED.
	initial bool
	// initialBookmark: a bookmark marked initial-events-end follows them.
	initialBookmark bool
}

// Watch follows the store's feed. The resourceVersion is a feed position;
// the request's options are answered as kube-apiserver answers them
// (k8s.io/apiserver's cacher.Watch and etcd3's watcher):
//   - "" or "0", no sendInitialEvents: the records as of the newest
//     position, as ADDED, then the changes after it;
//   - sendInitialEvents=true (resourceVersionMatch=NotOlderThan, as
//     validated by the handler): the same, then a bookmark at that position
//     annotated k8s.io/initial-events-end when bookmarks are allowed, which
//     is what client-go's watch-list reflector waits for;
//   - sendInitialEvents=false: the changes after the newest position (""
//     or "0") or after the given one;
//   - a position: the changes after it; 410 Expired with the watch cache's
//     "too old resource version: X (Y)" when retention removed a change
//     after it, Y being the oldest position one may resume after; "Too
//     large resource version" after 3 s when the store has not reached it.
func (r *REST) Watch(ctx context.Context, options *metainternalversion.ListOptions) (watch.Interface, error) {
	if options == nil {
		options = &metainternalversion.ListOptions{}
	}
	p, err := r.parse(options.FieldSelector, time.Now())
	if err != nil {
		return nil, err
	}
	if err := r.authorizeClusters(ctx, p.query); err != nil {
		return nil, err
	}
	if namespace := genericapirequest.NamespaceValue(ctx); namespace != "" {
		p.query.Conditions = append(p.query.Conditions, store.Condition{Columns: []store.Column{store.ColumnNamespace}, Value: namespace})
	}
	label := options.LabelSelector
	if label == nil {
		label = labels.Everything()
	}
	start, err := r.watchStart(ctx, options)
	if err != nil {
		if refused, ok := err.(startError); ok {
			// As the watch cache (cacher.Watch): past parsing, a
			// position the store cannot serve is an ERROR event in a
			// 200 stream, not a failed request.
			return newErrWatcher(refused), nil
		}
		return nil, err
	}
	if p.search && start.initial {
		// The initial state is a list of the window: a text search's
		// is held to a list's limits (Limits), and its changes, read
		// from the feed's positions after it, need no window.
		if err := r.limits.CheckWindow(p.query.Since, p.query.Until, time.Now()); err != nil {
			return nil, err
		}
		p.query.MaxRows = r.limits.MaxRows
	}
	if err := r.hub.join(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	w := &feedWatcher{
		rest:      r,
		query:     p.query,
		predicate: fieldselectors.Matcher(label, p.field),
		bookmarks: options.AllowWatchBookmarks,
		start:     start,
		result:    make(chan watch.Event),
		cancel:    cancel,
	}
	go func() {
		defer r.hub.leave()
		defer close(w.result)
		w.run(ctx)
	}()
	return w, nil
}

func (r *REST) watchStart(ctx context.Context, options *metainternalversion.ListOptions) (watchStart, error) {
	rv := options.ResourceVersion
	legacy := rv == "" || rv == "0"
	start := watchStart{initial: legacy}
	if options.SendInitialEvents != nil {
		start.initial = *options.SendInitialEvents
		start.initialBookmark = start.initial && options.AllowWatchBookmarks
	}
	state, err := r.store.Feed(ctx)
	if err != nil {
		return start, storeError(err)
	}
	if legacy {
		start.position = state.Position
		return start, nil
	}
	requested, err := parsePosition(rv)
	if err != nil {
		return start, err
	}
	if requested > state.Position {
		if state, err = r.waitFor(ctx, requested); err != nil {
			if tooLarge, ok := err.(*apierrors.StatusError); ok && storage.IsTooLargeResourceVersion(err) {
				return start, startError{tooLarge}
			}
			return start, err
		}
	}
	if start.initial {
		// NotOlderThan: the newest state is at least as new.
		start.position = state.Position
		return start, nil
	}
	if requested < state.Floor {
		return start, startError{tooOld(requested, state.Floor)}
	}
	start.position = requested
	return start, nil
}

// parsePosition reads a resourceVersion, refused as the storage layer
// refuses one (storage.APIObjectVersioner.ParseResourceVersion).
func parsePosition(rv string) (int64, error) {
	v, err := storage.APIObjectVersioner{}.ParseResourceVersion(rv)
	if err != nil {
		return 0, apierrors.NewBadRequest(err.Error())
	}
	return int64(v), nil
}

// tooOld is the watch cache's answer to a resourceVersion older than it
// holds (watchCache.getAllEventsSinceLocked).
func tooOld(requested, floor int64) *apierrors.StatusError {
	return apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", requested, floor))
}

// startError is a position the store cannot serve a watch from.
type startError struct{ *apierrors.StatusError }

// errWatcher sends one ERROR event and ends, as the watch cache's does.
type errWatcher struct{ result chan watch.Event }

func newErrWatcher(err startError) *errWatcher {
	w := &errWatcher{result: make(chan watch.Event, 1)}
	w.result <- watch.Event{Type: watch.Error, Object: &err.ErrStatus}
	close(w.result)
	return w
}

func (w *errWatcher) ResultChan() <-chan watch.Event { return w.result }
func (w *errWatcher) Stop()                          {}

// waitFor waits for the feed to reach position, as the watch cache waits
// for a resourceVersion it has not seen yet.
func (r *REST) waitFor(ctx context.Context, position int64) (store.FeedState, error) {
	deadline := time.Now().Add(tooLargeWait)
	for {
		state, err := r.store.Feed(ctx)
		if err != nil {
			return state, storeError(err)
		}
		if state.Position >= position {
			return state, nil
		}
		if time.Now().After(deadline) {
			return state, storage.NewTooLargeResourceVersionError(uint64(position), uint64(state.Position), 1)
		}
		select {
		case <-ctx.Done():
			return state, storeError(ctx.Err())
		case <-time.After(r.feed.PollInterval):
		}
	}
}

// feedWatcher is one watch. It pulls pages from the store at its own pace:
// a slow client holds one page, never a growing queue, so unlike the watch
// cache's watchers it need not be closed for being slow.
type feedWatcher struct {
	rest      *REST
	query     store.Query
	predicate storage.SelectionPredicate
	bookmarks bool
	start     watchStart
	result    chan watch.Event
	cancel    context.CancelFunc
	stopOnce  sync.Once
}

func (w *feedWatcher) ResultChan() <-chan watch.Event { return w.result }
func (w *feedWatcher) Stop()                          { w.stopOnce.Do(w.cancel) }

func (w *feedWatcher) send(ctx context.Context, ev watch.Event) bool {
	select {
	case w.result <- ev:
		return true
	case <-ctx.Done():
		return false
	}
}

func (w *feedWatcher) fail(ctx context.Context, err error) {
	status := apierrors.NewInternalError(err).Status()
	if s, ok := err.(apierrors.APIStatus); ok {
		status = s.Status()
	}
	w.send(ctx, watch.Event{Type: watch.Error, Object: &status})
}

func (w *feedWatcher) bookmark(ctx context.Context, position int64, initialEnd bool) bool {
	rec := &historyapi.EventRecord{ObjectMeta: metav1.ObjectMeta{ResourceVersion: strconv.FormatInt(position, 10)}}
	if initialEnd {
		rec.Annotations = map[string]string{metav1.InitialEventsAnnotationKey: "true"}
	}
	return w.send(ctx, watch.Event{Type: watch.Bookmark, Object: rec})
}

func (w *feedWatcher) run(ctx context.Context) {
	r := w.rest
	cursor := w.start.position
	if w.start.initial {
		if !w.sendInitial(ctx, cursor) {
			return
		}
		if w.start.initialBookmark && !w.bookmark(ctx, cursor, true) {
			return
		}
	}
	bookmarkTimer := time.NewTimer(w.bookmarkDelay(ctx))
	defer bookmarkTimer.Stop()
	for {
		moved := r.hub.wait(cursor)
		next, ok := w.sendChanges(ctx, cursor)
		if !ok {
			return
		}
		if next != cursor {
			cursor = next
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-moved:
		case <-bookmarkTimer.C:
			if w.bookmarks && !w.bookmark(ctx, cursor, false) {
				return
			}
			bookmarkTimer.Reset(w.bookmarkDelay(ctx))
		}
	}
}

// bookmarkDelay is the bookmark interval, or less so that a bookmark goes
// out two seconds before the request's deadline, as the watch cache sends
// one before a watch times out.
func (w *feedWatcher) bookmarkDelay(ctx context.Context) time.Duration {
	d := w.rest.feed.BookmarkInterval
	if deadline, ok := ctx.Deadline(); ok {
		if untilEnd := time.Until(deadline) - 2*time.Second; untilEnd > 0 && untilEnd < d {
			d = untilEnd
		}
	}
	return d
}

// sendInitial sends the records as of position, a page at a time.
func (w *feedWatcher) sendInitial(ctx context.Context, position int64) bool {
	q := w.query
	q.Through = position
	q.Limit = w.rest.feed.PageSize
	for {
		// Each page under --history-query-timeout, as a list's; MaxRows
		// is counted once, on the first.
		rows, err := query(ctx, w.rest.limits, func(ctx context.Context) ([]store.Record, error) { return w.rest.store.List(ctx, q) })
		if err != nil {
			w.fail(ctx, err)
			return false
		}
		q.MaxRows = 0
		for _, row := range rows {
			if !w.sendRecord(ctx, watch.Added, row) {
				return false
			}
			q.After = &store.Cursor{LastSeen: row.LastSeen, Revision: row.Revision}
		}
		if len(rows) < q.Limit {
			return true
		}
	}
}

// sendChanges sends the changes after cursor through the head, and returns
// the position read through.
func (w *feedWatcher) sendChanges(ctx context.Context, cursor int64) (int64, bool) {
	s := w.rest.store
	state, err := s.Feed(ctx)
	if err != nil {
		w.fail(ctx, storeError(err))
		return cursor, false
	}
	if state.Floor > cursor {
		w.fail(ctx, tooOld(cursor, state.Floor))
		return cursor, false
	}
	for cursor < state.Position {
		changes, err := query(ctx, w.rest.limits, func(ctx context.Context) ([]store.Change, error) {
			return s.Changes(ctx, store.ChangeQuery{
				After: cursor, Through: state.Position,
				Conditions: w.query.Conditions, Since: w.query.Since, Until: w.query.Until,
				Limit: w.rest.feed.PageSize,
			})
		})
		if err != nil {
			w.fail(ctx, err)
			return cursor, false
		}
		// Retention may have removed part of what was read: then the
		// watcher may have missed a change, and must start over.
		after, err := s.Feed(ctx)
		if err != nil {
			w.fail(ctx, storeError(err))
			return cursor, false
		}
		if after.Floor > cursor {
			w.fail(ctx, tooOld(cursor, after.Floor))
			return cursor, false
		}
		for _, c := range changes {
			c.Record.Position = c.Position
			kind := watch.Added
			if c.Ended {
				kind = watch.Modified
			}
			if !w.sendRecord(ctx, kind, c.Record) {
				return cursor, false
			}
			cursor = c.Position
		}
		if len(changes) < w.rest.feed.PageSize {
			cursor = state.Position
		}
	}
	return cursor, true
}

func (w *feedWatcher) sendRecord(ctx context.Context, kind watch.EventType, row store.Record) bool {
	rec, err := w.rest.record(row)
	if err != nil {
		w.fail(ctx, err)
		return false
	}
	if ok, err := w.predicate.Matches(&rec.Event); err != nil || !ok || !matchOwn(w.query, &rec.Event) {
		return true
	}
	return w.send(ctx, watch.Event{Type: kind, Object: rec})
}
