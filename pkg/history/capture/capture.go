// Package capture copies every Event version from etcd into a history
// store. It runs its own etcd watch on the Events prefix, with the previous
// value of each key, from the revision the store says is captured: it is not
// on the write path (a create never waits for history), and it sees what
// this server, other replicas and a kube-apiserver sharing the events etcd
// write, and every delete, whether through the API or by lease expiry.
//
// Changes go through a queue bounded in bytes to a writer that stores them in
// batches (by count or time), each batch with the revision it completes, in
// one transaction. When the queue is full the watch is cancelled and resumed
// from the next revision once the writer catches up: etcd keeps what capture
// has not read, memory stays bounded, nothing is dropped. When the store
// fails, the writer retries and the queue fills: the Events API goes on.
//
// On start, capture resumes from the stored revision. When there is none, it
// watches from etcd's first revision while etcd still holds them all: the
// server takes writes before capture starts, and a version replaced
// meanwhile is in etcd's history only. When etcd has compacted past where
// capture would start, it reads the whole prefix at one revision and watches
// from there (a relist): versions written and replaced while capture was
// away and compacted since are lost, which the log line and
// event_apiserver_history_capture_relists_total{reason="compacted"} say.
//
// With Config.Kubernetes in place of an etcd client, the same queue and
// writer are fed from kube-apiserver's Events API instead (kube.go): one
// list, then a watch with bookmarks from the stored resourceVersion, and a
// relist on 410 Gone whose losses are estimated and counted.
package capture

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/sync/semaphore"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/eventapiserver/event-apiserver/pkg/apis/core"
	"github.com/eventapiserver/event-apiserver/pkg/history"
)

// Config of a Capture; zero values take the defaults below.
type Config struct {
	Client *clientv3.Client
	// Prefix is the Events key prefix, e.g. /registry/events/.
	Prefix string
	Store  history.Store
	// Decoder decodes stored values into the internal Event.
	Decoder runtime.Decoder
	// Kubernetes, when set in place of Client, makes capture list and
	// watch Events through kube-apiserver (kube.go) rather than etcd.
	Kubernetes kubernetes.Interface

	// BatchSize and BatchInterval bound a write: whichever comes first.
	BatchSize     int
	BatchInterval time.Duration
	// MaxQueueBytes bounds what is read from etcd and not yet stored.
	MaxQueueBytes int64
	// RelistPageSize bounds one etcd range read of a relist.
	RelistPageSize int64
	// BehindTimeout is how long kube-apiserver's resourceVersion may stay
	// below the one capture resumes from (its etcd restored from a backup)
	// before capture drops it and lists all Events again (kube.go).
	BehindTimeout time.Duration
}

const (
	defaultBatchSize      = 500
	defaultBatchInterval  = time.Second
	defaultMaxQueueBytes  = 64 << 20
	defaultRelistPageSize = 500
	defaultBehindTimeout  = 90 * time.Second
	// itemOverhead approximates an item's bookkeeping beside its value.
	itemOverhead = 256
)

// Capture is one running capture.
type Capture struct {
	cfg    Config
	source string
	// queue holds pointers: its buffer is allocated whole when it is made,
	// room for the smallest items to fill the byte budget (262,145 at the
	// defaults), and at an item's 80 bytes that was 20 MB of live heap
	// for the life of the process, most of it never used.
	queue  chan *item
	budget *semaphore.Weighted
	ready  readiness
	// behindSince is when kube-apiserver was first seen behind the
	// resourceVersion capture resumes from; zero while it is not.
	behindSince time.Time
}

// item is one change, or a bare revision (progress notification, end of a
// relist) that the store may record once everything before it is stored.
type item struct {
	// source is the capture source the item's revision belongs to.
	source   string
	revision int64
	version  *history.Version
	deletion *history.Deletion
	gone     *history.Gone
	// rewind moves the source's progress back to revision: kube-apiserver's
	// etcd was restored behind it.
	rewind   bool
	weight   int64
	received time.Time
}

func New(cfg Config) *Capture {
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = defaultBatchSize
	}
	if cfg.BatchInterval <= 0 {
		cfg.BatchInterval = defaultBatchInterval
	}
	if cfg.MaxQueueBytes <= 0 {
		cfg.MaxQueueBytes = defaultMaxQueueBytes
	}
	if cfg.RelistPageSize <= 0 {
		cfg.RelistPageSize = defaultRelistPageSize
	}
	if cfg.BehindTimeout <= 0 {
		cfg.BehindTimeout = defaultBehindTimeout
	}
	return &Capture{
		cfg: cfg,
		// Items are bounded by bytes; the channel only needs to hold as many
		// as the smallest items could fill the budget with.
		queue:  make(chan *item, cfg.MaxQueueBytes/itemOverhead+1),
		budget: semaphore.NewWeighted(cfg.MaxQueueBytes),
	}
}

// Run captures until ctx ends.
func (c *Capture) Run(ctx context.Context) {
	history.RegisterMetrics()
	follow := c.follow
	if c.cfg.Kubernetes != nil {
		follow = c.followKube
		klog.InfoS("Starting Event history capture from the Kubernetes API")
	} else {
		klog.InfoS("Starting Event history capture", "prefix", c.cfg.Prefix)
	}
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		c.write(ctx)
	}()
	// The replacement the deprecation suggests (Backoff.DelayWithReset)
	// resets once per period since its last reset, this manager after a
	// minute without failures: switching would change how fast a flapping
	// etcd is retried.
	//lint:ignore SA1019 kept for its reset-after-a-quiet-minute semantics (see above)
	backoff := wait.NewExponentialBackoffManager(time.Second, 30*time.Second, time.Minute, 2, 0.2, clock.RealClock{})
	wait.BackoffUntil(func() {
		if err := follow(ctx); err != nil && ctx.Err() == nil {
			klog.ErrorS(err, "Event history capture interrupted, resuming")
		}
	}, backoff, true, ctx.Done())
	<-writerDone
	klog.InfoS("Stopped Event history capture")
}

// follow resumes from the store's revision and watches until an error.
func (c *Capture) follow(ctx context.Context) error {
	head, err := c.cfg.Client.Get(ctx, c.cfg.Prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return fmt.Errorf("reading etcd: %w", err)
	}
	// Progress belongs to one etcd cluster's revisions: a restored or new
	// cluster starts over with a relist. Replicas on one cluster share it, so
	// one that restarts resumes from what any of them stored.
	c.source = fmt.Sprintf("etcd-cluster-%x%s", head.Header.ClusterId, c.cfg.Prefix)
	stored, ok, err := c.cfg.Store.Progress(ctx, c.source)
	if err != nil {
		history.StoreErrors.Inc()
		return fmt.Errorf("reading history progress: %w", err)
	}
	next := stored + 1
	if !ok {
		// A read at revision 1 fails once etcd has compacted any revision.
		_, err := c.cfg.Client.Get(ctx, c.cfg.Prefix, clientv3.WithPrefix(), clientv3.WithCountOnly(), clientv3.WithRev(1))
		switch {
		case err == nil:
			next = 1
			klog.InfoS("Starting Event history capture from etcd's first revision", "etcdRevision", head.Header.Revision)
		case errors.Is(err, rpctypesErrCompacted):
			if next, err = c.relist(ctx, "start"); err != nil {
				return err
			}
		default:
			return fmt.Errorf("reading etcd: %w", err)
		}
	} else {
		history.CapturedRevision.Set(float64(stored))
		klog.InfoS("Resuming Event history capture", "revision", stored, "etcdRevision", head.Header.Revision)
	}
	for ctx.Err() == nil {
		if next, err = c.watch(ctx, next); err != nil {
			return err
		}
	}
	return nil
}

// watch follows etcd from revision next until the queue is full, the watch
// ends or fails; it returns the revision to resume from.
func (c *Capture) watch(ctx context.Context, next int64) (int64, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	watch := c.cfg.Client.Watch(clientv3.WithRequireLeader(wctx), c.cfg.Prefix,
		clientv3.WithPrefix(), clientv3.WithPrevKV(), clientv3.WithRev(next), clientv3.WithProgressNotify())
	for resp := range watch {
		if resp.CompactRevision != 0 || errors.Is(resp.Err(), rpctypesErrCompacted) {
			klog.InfoS("etcd compacted past the Event history capture's revision: reading all Events again; "+
				"versions replaced and compacted meanwhile are not in history",
				"resumeRevision", next, "compactRevision", resp.CompactRevision)
			return c.relist(ctx, "compacted")
		}
		if err := resp.Err(); err != nil {
			return next, err
		}
		EtcdRevisionSeen(resp.Header.Revision)
		if resp.IsProgressNotify() {
			if c.offer(ctx, item{revision: resp.Header.Revision, weight: itemOverhead}) {
				next = resp.Header.Revision + 1
			}
			continue
		}
		full := false
		for _, ev := range resp.Events {
			it, ok := c.itemFor(ev)
			if !ok {
				continue
			}
			if !c.offer(ctx, it) {
				// Stop reading etcd while the writer catches up; the
				// rest of this response is already here, so keep it.
				full = true
				cancel()
				if err := c.enqueue(ctx, it); err != nil {
					return next, err
				}
			}
		}
		if n := len(resp.Events); n > 0 {
			next = resp.Events[n-1].Kv.ModRevision + 1
		}
		if full {
			return next, nil
		}
	}
	if ctx.Err() != nil {
		return next, nil
	}
	return next, errors.New("etcd watch closed")
}

func (c *Capture) itemFor(ev *clientv3.Event) (item, bool) {
	now := time.Now()
	switch {
	case ev.Type == clientv3.EventTypePut:
		v, ok := c.version(ev.Kv.Key, ev.Kv.Value, ev.Kv.ModRevision, now)
		if !ok {
			return item{}, false
		}
		return item{revision: ev.Kv.ModRevision, version: &v, weight: int64(len(ev.Kv.Value)) + itemOverhead, received: now}, true
	case ev.PrevKv != nil:
		prev, ok := c.version(ev.Kv.Key, ev.PrevKv.Value, ev.PrevKv.ModRevision, now)
		if !ok {
			return item{}, false
		}
		d := history.Deletion{UID: prev.UID, Revision: ev.Kv.ModRevision, At: now}
		return item{revision: ev.Kv.ModRevision, deletion: &d, weight: itemOverhead, received: now}, true
	default:
		klog.InfoS("Event deleted without its previous value; its deletion is not in history", "key", string(ev.Kv.Key))
		return item{}, false
	}
}

// version describes the Event stored as value: read from its protobuf
// fields when it is a core/v1 Event in the storage's envelope, as every
// value the Kubernetes storage writes is, else decoded in full.
func (c *Capture) version(key, value []byte, revision int64, now time.Time) (history.Version, bool) {
	if v, ok := versionFromProto(value, revision, now); ok {
		return v, true
	}
	event, ok := c.decode(key, value)
	if !ok {
		return history.Version{}, false
	}
	return history.NewVersion(event, revision, value, now), true
}

func (c *Capture) decode(key, value []byte) (*core.Event, bool) {
	obj, _, err := c.cfg.Decoder.Decode(value, nil, &core.Event{})
	event, ok := obj.(*core.Event)
	if err != nil || !ok {
		history.DecodeErrors.Inc()
		klog.ErrorS(err, "Cannot decode an Event for history", "key", string(key))
		return nil, false
	}
	return event, true
}

// relist reads every Event at one revision and returns the revision to watch
// from.
func (c *Capture) relist(ctx context.Context, reason string) (int64, error) {
	history.Relists.WithLabelValues(reason).Inc()
	end := clientv3.GetPrefixRangeEnd(c.cfg.Prefix)
	key := c.cfg.Prefix
	var rev int64
	var live []string
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(c.cfg.RelistPageSize)}
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		resp, err := c.cfg.Client.Get(ctx, key, opts...)
		if err != nil {
			return 0, fmt.Errorf("listing Events for history: %w", err)
		}
		rev = resp.Header.Revision
		for _, kv := range resp.Kvs {
			it, ok := c.itemFor(&clientv3.Event{Type: clientv3.EventTypePut, Kv: kv})
			if !ok {
				continue
			}
			if err := c.enqueue(ctx, it); err != nil {
				return 0, err
			}
			live = append(live, it.version.UID)
		}
		if !resp.More || len(resp.Kvs) == 0 {
			break
		}
		key = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
	last := item{revision: rev, weight: itemOverhead}
	if reason == "compacted" {
		// Events deleted while capture was away left no DELETE to see.
		// Only after a compaction: after a start the store's revisions may
		// belong to another etcd cluster.
		last.gone = &history.Gone{Revision: rev, Live: live, At: time.Now()}
		last.weight += int64(len(live)) * 64
	}
	if err := c.enqueue(ctx, last); err != nil {
		return 0, err
	}
	EtcdRevisionSeen(rev)
	klog.InfoS("Read all Events for history", "reason", reason, "events", len(live), "revision", rev)
	return rev + 1, nil
}

// offer queues it if the byte budget allows, without waiting.
func (c *Capture) offer(ctx context.Context, it item) bool {
	if !c.budget.TryAcquire(c.weight(it)) {
		return false
	}
	c.push(ctx, it)
	return true
}

func (c *Capture) enqueue(ctx context.Context, it item) error {
	if err := c.budget.Acquire(ctx, c.weight(it)); err != nil {
		return err
	}
	c.push(ctx, it)
	return nil
}

func (c *Capture) push(ctx context.Context, it item) {
	// Only the reading goroutine sets c.source; the writer reads it here.
	it.source = c.source
	queuedBytes.add(c.weight(it))
	select {
	case c.queue <- &it:
	case <-ctx.Done():
	}
}

// weight caps an item at the budget, so one huge Event cannot wait forever.
func (c *Capture) weight(it item) int64 {
	return min(it.weight, c.cfg.MaxQueueBytes)
}

// write stores queued items in batches until ctx ends.
func (c *Capture) write(ctx context.Context) {
	ticker := time.NewTicker(c.cfg.BatchInterval)
	defer ticker.Stop()
	var pending []item
	flush := func() {
		if len(pending) == 0 {
			return
		}
		c.store(ctx, pending)
		pending = pending[:0]
	}
	for {
		select {
		case <-ctx.Done():
			return
		case it := <-c.queue:
			pending = append(pending, *it)
			if len(pending) >= c.cfg.BatchSize {
				flush()
			}
		case <-ticker.C:
			flush()
		}
		updateLag(pending)
	}
}

// store writes one batch, retrying until it is stored or ctx ends: a batch is
// never dropped, and nothing after it is stored first.
func (c *Capture) store(ctx context.Context, items []item) {
	batch := history.Batch{Source: items[len(items)-1].source}
	var weight int64
	for _, it := range items {
		batch.Revision = max(batch.Revision, it.revision)
		if it.version != nil {
			batch.Versions = append(batch.Versions, *it.version)
		}
		if it.deletion != nil {
			batch.Deletions = append(batch.Deletions, *it.deletion)
		}
		if it.gone != nil {
			// Applied after this batch's versions; a relist ends its batch.
			batch.Gone = it.gone
		}
		if it.rewind {
			// Revisions went back here: what came before counts no more.
			batch.Revision = it.revision
			batch.Rewind = true
		}
		weight += c.weight(it)
	}
	backoff := wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Jitter: 0.2, Steps: 1 << 30, Cap: 10 * time.Second}
	for ctx.Err() == nil {
		err := c.cfg.Store.Write(ctx, batch)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return
		}
		history.StoreErrors.Inc()
		c.ready.failed(err)
		updateLag(items)
		klog.ErrorS(err, "Cannot write Event history, retrying; capture waits meanwhile", "versions", len(batch.Versions), "revision", batch.Revision)
		select {
		case <-time.After(backoff.Step()):
		case <-ctx.Done():
			return
		}
	}
	c.storedUpTo(batch.Revision)
	c.budget.Release(weight)
	queuedBytes.add(-weight)
	history.VersionsWritten.Add(float64(len(batch.Versions)))
	history.DeletionsWritten.Add(float64(len(batch.Deletions)))
	if batch.Rewind {
		rewindRevisions(batch.Revision)
	} else {
		capturedRevision(batch.Revision)
	}
}
