package capture

import (
	"context"
	"fmt"
	"time"

	"golang.org/x/sync/semaphore"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/eventapiserver/event-apiserver/pkg/history"
)

// Config of a Capture; zero values take the defaults below. One Config may
// serve several sources: each Capture has its own queue of MaxQueueBytes.
type Config struct {
	Store history.Store
	// Decoder decodes stored values into the internal Event.
	Decoder runtime.Decoder

	// BatchSize and BatchInterval bound a write: whichever comes first.
	BatchSize     int
	BatchInterval time.Duration
	// MaxQueueBytes bounds what is read from the source and not yet stored.
	MaxQueueBytes int64
	// Cluster is the member cluster the source reads (history.ColumnCluster),
	// set on every version it stores and the scope of its relists; "" is
	// the server's own cluster.
	Cluster string
}

const (
	defaultBatchSize      = 500
	defaultBatchInterval  = time.Second
	defaultMaxQueueBytes  = 64 << 20
	defaultRelistPageSize = 500
	// itemOverhead approximates an item's bookkeeping beside its value.
	itemOverhead = 256
	// liveUIDWeight approximates one uid of a relist's history.Gone.
	liveUIDWeight = 64
)

// Capture is one running capture of one source.
type Capture struct {
	cfg     Config
	source  Source
	metrics *sourceMetrics
	// key is the source's progress key; only the reading goroutine sets it,
	// and items carry it to the writer.
	key string
	// queue holds pointers: its buffer is allocated whole when it is made,
	// room for the smallest items to fill the byte budget (262,145 at the
	// defaults), and at an item's 80 bytes that was 20 MB of live heap
	// for the life of the process, most of it never used.
	queue  chan *queued
	budget *semaphore.Weighted
	queued queueGauge
	lag    lag
	ready  readiness
}

// queued is an Item in the queue, with what the writer needs besides.
type queued struct {
	Item
	// key is the progress key the item's revision belongs to.
	key      string
	weight   int64
	received time.Time
}

// New makes the capture of source into cfg.Store; Run runs it. Its metrics
// are registered, and the source's series exist, from here on.
func New(source Source, cfg Config) *Capture {
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = defaultBatchSize
	}
	if cfg.BatchInterval <= 0 {
		cfg.BatchInterval = defaultBatchInterval
	}
	if cfg.MaxQueueBytes <= 0 {
		cfg.MaxQueueBytes = defaultMaxQueueBytes
	}
	m := newSourceMetrics(source.Name())
	return &Capture{
		cfg:     cfg,
		source:  source,
		metrics: m,
		// Items are bounded by bytes; the channel only needs to hold as many
		// as the smallest items could fill the budget with.
		queue:  make(chan *queued, cfg.MaxQueueBytes/itemOverhead+1),
		budget: semaphore.NewWeighted(cfg.MaxQueueBytes),
		queued: queueGauge{m: m},
		lag:    lag{m: m},
	}
}

// Run captures until ctx ends, then removes the source's metrics: a source
// that is gone (a member cluster removed from a fleet) leaves no series
// behind, whose last lag would alert forever.
func (c *Capture) Run(ctx context.Context) {
	name := c.source.Name()
	klog.InfoS("Starting Event history capture", "source", name)
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		c.write(ctx)
	}()
	// The replacement the deprecation suggests (Backoff.DelayWithReset)
	// resets once per period since its last reset, this manager after a
	// minute without failures: switching would change how fast a flapping
	// source is retried.
	//lint:ignore SA1019 kept for its reset-after-a-quiet-minute semantics (see above)
	backoff := wait.NewExponentialBackoffManager(time.Second, 30*time.Second, time.Minute, 2, 0.2, clock.RealClock{})
	wait.BackoffUntil(func() {
		if err := c.follow(ctx); err != nil && ctx.Err() == nil {
			klog.ErrorS(err, "Event history capture interrupted, resuming", "source", name)
		}
	}, backoff, true, ctx.Done())
	<-writerDone
	c.metrics.delete()
	klog.InfoS("Stopped Event history capture", "source", name)
}

// follow resumes from the store's progress and watches until an error,
// relisting whenever the source asks to.
func (c *Capture) follow(ctx context.Context) error {
	key, err := c.source.ProgressKey(ctx)
	if err != nil {
		return err
	}
	c.key = key
	stored, ok, err := c.cfg.Store.Progress(ctx, key)
	if err != nil {
		c.metrics.storeErrors.Inc()
		return fmt.Errorf("reading history progress: %w", err)
	}
	if ok {
		c.lag.captured(stored)
		c.storedUpTo(stored)
	}
	after, err := c.source.Start(ctx, stored, ok)
	if after, err = c.relistIfAsked(ctx, after, err); err != nil {
		return err
	}
	c.startedFrom(after)
	for ctx.Err() == nil {
		after, err = c.source.Watch(ctx, &Sink{c}, after)
		if after, err = c.relistIfAsked(ctx, after, err); err != nil {
			return err
		}
	}
	return nil
}

// relistIfAsked relists the source when err asks for it.
func (c *Capture) relistIfAsked(ctx context.Context, after int64, err error) (int64, error) {
	reason, ok := relistReason(err)
	if !ok {
		return after, err
	}
	c.metrics.relisted(reason)
	return c.source.Relist(ctx, &Sink{c}, reason, after)
}

// offer queues it if the byte budget allows, without waiting.
func (c *Capture) offer(ctx context.Context, it Item) bool {
	q := c.toQueue(it)
	if !c.budget.TryAcquire(q.weight) {
		return false
	}
	c.push(ctx, q)
	return true
}

func (c *Capture) enqueue(ctx context.Context, it Item) error {
	q := c.toQueue(it)
	if err := c.budget.Acquire(ctx, q.weight); err != nil {
		return err
	}
	c.push(ctx, q)
	return nil
}

// toQueue weighs it, capped at the budget so that one huge Event cannot
// wait forever, and stamps a change with when it was received, which the
// lag in seconds measures from.
func (c *Capture) toQueue(it Item) *queued {
	q := &queued{Item: it, key: c.key, weight: itemOverhead}
	if it.Version != nil {
		it.Version.Cluster = c.cfg.Cluster
		q.weight += int64(len(it.Version.Object))
	}
	if it.Gone != nil {
		it.Gone.Cluster = c.cfg.Cluster
		q.weight += int64(len(it.Gone.Live)) * liveUIDWeight
	}
	q.weight = min(q.weight, c.cfg.MaxQueueBytes)
	if it.Version != nil || it.Deletion != nil {
		q.received = time.Now()
	}
	return q
}

func (c *Capture) push(ctx context.Context, q *queued) {
	c.queued.add(q.weight)
	select {
	case c.queue <- q:
	case <-ctx.Done():
	}
}

// write stores queued items in batches until ctx ends.
func (c *Capture) write(ctx context.Context) {
	ticker := time.NewTicker(c.cfg.BatchInterval)
	defer ticker.Stop()
	var pending []*queued
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
		case q := <-c.queue:
			pending = append(pending, q)
			if len(pending) >= c.cfg.BatchSize {
				flush()
			}
		case <-ticker.C:
			flush()
		}
		c.updateLag(pending)
	}
}

// store writes one batch, retrying until it is stored or ctx ends: a batch is
// never dropped, and nothing after it is stored first.
func (c *Capture) store(ctx context.Context, items []*queued) {
	batch := history.Batch{Source: items[len(items)-1].key}
	var weight int64
	for _, it := range items {
		batch.Revision = max(batch.Revision, it.Revision)
		if it.Version != nil {
			batch.Versions = append(batch.Versions, *it.Version)
		}
		if it.Deletion != nil {
			batch.Deletions = append(batch.Deletions, *it.Deletion)
		}
		if it.Gone != nil {
			// Applied after this batch's versions; a relist ends its batch.
			batch.Gone = it.Gone
		}
		if it.Rewind {
			// Revisions went back here: what came before counts no more.
			batch.Revision = it.Revision
			batch.Rewind = true
		}
		weight += it.weight
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
		c.metrics.storeErrors.Inc()
		c.ready.failed(err)
		c.updateLag(items)
		klog.ErrorS(err, "Cannot write Event history, retrying; capture waits meanwhile",
			"source", c.source.Name(), "versions", len(batch.Versions), "revision", batch.Revision)
		select {
		case <-time.After(backoff.Step()):
		case <-ctx.Done():
			return
		}
	}
	c.storedUpTo(batch.Revision)
	c.budget.Release(weight)
	c.queued.add(-weight)
	c.metrics.versions.Add(float64(len(batch.Versions)))
	c.metrics.deletions.Add(float64(len(batch.Deletions)))
	if batch.Rewind {
		c.lag.rewind(batch.Revision)
	} else {
		c.lag.captured(batch.Revision)
	}
}
