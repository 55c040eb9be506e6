package expiry

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/registry/generic"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/cacher"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/apiserver/pkg/storage/storagebackend/factory"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/klog/v2"

	"github.com/eventapiserver/event-apiserver/pkg/apis/core"
	"github.com/eventapiserver/event-apiserver/pkg/etcdclient"
	"github.com/eventapiserver/event-apiserver/pkg/ttl"
	"github.com/eventapiserver/event-apiserver/pkg/watchresume"
)

// PostStartHookName runs the backstop.
const PostStartHookName = "event-ttl-backstop"

// Config is what a Backstop needs from the server's flags.
type Config struct {
	// Rules give each Event its TTL class.
	Rules *ttl.Rules
	// Interval is how often a pass looks for Events past their deadline.
	Interval time.Duration
	// QPS bounds the backstop's deletes a second.
	QPS float32
}

// Backstop deletes Events that etcd's leases have left in place past their
// TTL. See the package documentation.
type Backstop struct {
	rules    *ttl.Rules
	interval time.Duration
	// period is the revision clock's sample period.
	period  time.Duration
	limiter flowcontrol.RateLimiter

	// Set by attach, when the Event storage is built, before the server
	// starts.
	cache          *cacher.CacheDelegator
	store          storage.Interface
	keyFunc        func(runtime.Object) (string, error)
	getAttrs       storage.AttrFunc
	resourcePrefix string
	// keyPrefix turns a storage key into an etcd key, as the etcd3 store
	// does (etcd3.New, store.prepareKey).
	keyPrefix    string
	config       storagebackend.Config
	reuseSeconds int64

	// Set by run.
	client *clientv3.Client
	clock  *clock

	// cursors are each class's, its main cursor (the class's own lease TTL)
	// first, then the rest by ascending lease TTL; only the pass uses them.
	cursors map[uint64][]*cursor
	// leases memoizes the TTL etcd granted each lease, which never changes.
	leases map[clientv3.LeaseID]int64
	// broken stops every pass once the cache answered a bucket lookup with
	// Events of other buckets (see bucket).
	broken bool
	// failures rate-limits the log of passes that stop on an error, at
	// every pass while etcd is away.
	failures logEvery
}

// cursor walks one class's buckets in revision order, deleting the Events
// whose lease TTL is at most seconds. Every Event of the class with a
// revision at or below rev and such a lease is handled: deleted, found
// deleted or rewritten, or handed to the cursor of its own, longer lease.
type cursor struct {
	class   uint64
	seconds int64
	rev     int64
}

// maxCursorsPerClass bounds the lease TTLs a class follows apart from its
// own: Events of the class written by another writer (a kube-apiserver with
// another --event-ttl sharing the events etcd) or under rules since changed.
const maxCursorsPerClass = 8

// maxLeases bounds the memo of granted TTLs: a class reuses a lease for a
// minute at most, so a day's TTL has 1440 leases alive.
const maxLeases = 16384

// maxClockPeriod is the revision clock's sample period, or the pass interval
// when that is shorter.
const maxClockPeriod = 10 * time.Second

// requestTimeout bounds each request of a pass to etcd: while etcd is away,
// the pass stops and the next one tries again.
const requestTimeout = 10 * time.Second

// lookupBatch is how many keys one etcd transaction reads; etcd refuses
// more than --max-txn-ops, 128 by default.
const lookupBatch = 100

// New returns nil when there is nothing to do: the backstop is off, or no
// Event has a TTL.
func New(c Config) *Backstop {
	if c.Interval <= 0 || len(c.Rules.Classes()) == 0 {
		return nil
	}
	period := min(c.Interval, maxClockPeriod)
	return &Backstop{
		rules:    c.Rules,
		interval: c.Interval,
		period:   period,
		limiter:  flowcontrol.NewTokenBucketRateLimiter(c.QPS, max(1, int(c.QPS))),
		cursors:  map[uint64][]*cursor{},
		leases:   map[clientv3.LeaseID]int64{},
	}
}

// RESTOptionsGetter wraps getter so that the Event storage it builds gets
// the backstop's index in its watch cache and is handed to the backstop.
func (b *Backstop) RESTOptionsGetter(getter generic.RESTOptionsGetter) generic.RESTOptionsGetter {
	return restOptionsGetter{RESTOptionsGetter: getter, backstop: b}
}

type restOptionsGetter struct {
	generic.RESTOptionsGetter
	backstop *Backstop
}

func (g restOptionsGetter) GetRESTOptions(resource schema.GroupResource, example runtime.Object) (generic.RESTOptions, error) {
	opts, err := g.RESTOptionsGetter.GetRESTOptions(resource, example)
	if err != nil || resource != core.Resource("events") || opts.Decorator == nil {
		return opts, err
	}
	decorate := opts.Decorator
	opts.Decorator = func(config *storagebackend.ConfigForResource, resourcePrefix string,
		keyFunc func(obj runtime.Object) (string, error), newFunc, newListFunc func() runtime.Object,
		getAttrsFunc storage.AttrFunc, triggerFuncs storage.IndexerFuncs, indexers *cache.Indexers,
	) (storage.Interface, factory.DestroyFunc, error) {
		with := cache.Indexers{IndexName: IndexFunc(g.backstop.rules)}
		if indexers != nil {
			for name, f := range *indexers {
				with[name] = f
			}
		}
		s, destroy, err := decorate(config, resourcePrefix, keyFunc, newFunc, newListFunc, getAttrsFunc, triggerFuncs, &with)
		if err == nil {
			g.backstop.attach(s, config, resourcePrefix, keyFunc, getAttrsFunc)
		}
		return s, destroy, err
	}
	return opts, nil
}

func (b *Backstop) attach(s storage.Interface, config *storagebackend.ConfigForResource, resourcePrefix string,
	keyFunc func(runtime.Object) (string, error), getAttrs storage.AttrFunc) {
	cached, ok := s.(*watchresume.Storage)
	if !ok {
		klog.InfoS("Event TTL backstop off: it finds due Events through the watch cache's index, and the watch cache is off; etcd's leases alone expire Events")
		return
	}
	b.cache, b.store, b.keyFunc, b.getAttrs, b.resourcePrefix = cached.CacheDelegator, s, keyFunc, getAttrs, resourcePrefix
	b.config = config.Config
	b.keyPrefix = path.Join("/", config.Prefix)
	if !strings.HasSuffix(b.keyPrefix, "/") {
		b.keyPrefix += "/"
	}
	b.reuseSeconds = config.LeaseManagerConfig.ReuseDurationSeconds
	registerMetrics()
}

// PostStartHook starts the backstop once the server runs; it stops with
// the server.
func (b *Backstop) PostStartHook(ctx genericapiserver.PostStartHookContext) error {
	if b.cache == nil {
		return nil
	}
	client, err := etcdclient.New(b.config.Transport)
	if err != nil {
		return fmt.Errorf("etcd client for the TTL backstop: %w", err)
	}
	b.client = client
	b.clock = newClock(client, clockKey(b.config.Prefix), b.period, b.horizon())
	var wg sync.WaitGroup
	wg.Go(func() { b.clock.run(ctx) })
	wg.Go(func() { b.run(ctx) })
	go func() {
		wg.Wait()
		_ = client.Close()
	}()
	klog.InfoS("Started the Event TTL backstop", "interval", b.interval, "clockPeriod", b.period, "clockKey", b.clock.key,
		"classes", b.rules.Classes())
	return nil
}

// horizon is how far back the clock keeps samples at first: past the
// longest lease of any class, every Event is due whatever sample dates it.
func (b *Backstop) horizon() time.Duration {
	longest := int64(0)
	for _, class := range b.rules.Classes() {
		longest = max(longest, ttl.LeaseSeconds(int64(class), b.reuseSeconds))
	}
	return b.horizonFor(longest)
}

func (b *Backstop) horizonFor(leaseSeconds int64) time.Duration {
	return time.Duration(leaseSeconds)*time.Second + 2*b.period
}

func (b *Backstop) run(ctx context.Context) {
	// The first pass as soon as the cache serves, then one per interval.
	_ = wait.PollUntilContextCancel(ctx, time.Second, true, func(context.Context) (bool, error) {
		return b.cache.ReadinessCheck() == nil && b.clock.samples() != nil, nil
	})
	wait.UntilWithContext(ctx, b.pass, b.interval)
}

// pass moves every cursor up to its class's due revision.
func (b *Backstop) pass(ctx context.Context) {
	if b.broken || b.cache.ReadinessCheck() != nil {
		return
	}
	s := b.clock.samples()
	if len(s) == 0 {
		return
	}
	for _, class := range b.rules.Classes() {
		if len(b.cursors[class]) == 0 {
			b.cursors[class] = []*cursor{{class: class, seconds: ttl.LeaseSeconds(int64(class), b.reuseSeconds)}}
		}
		// Cursors made during the pass start on the next one.
		for _, cur := range slices.Clone(b.cursors[class]) {
			if err := b.advance(ctx, cur, s); err != nil {
				if ctx.Err() == nil && b.failures.due(time.Now()) {
					klog.ErrorS(err, "Event TTL backstop: pass stopped, to go on at the next", "ttl", time.Duration(cur.seconds)*time.Second,
						"revision", cur.rev)
				}
				return
			}
		}
	}
}

// advance moves cur through the buckets up to the revision that is due for
// its lease TTL, one bucket at a time, so that what a pass holds is one
// bucket's Events however large a backlog is.
func (b *Backstop) advance(ctx context.Context, cur *cursor, s samples) error {
	due := s.dueThrough(time.Now(), time.Duration(cur.seconds)*time.Second)
	for cur.rev < due {
		if err := ctx.Err(); err != nil {
			return err
		}
		bucket := bucketOf(cur.rev + 1)
		end := min(due, bucketEnd(bucket))
		events, err := b.bucket(ctx, cur.class, bucket)
		if err != nil {
			return err
		}
		var candidates []candidate
		for i := range events {
			e := &events[i]
			class, rev, ok := classAndRevision(b.rules, e)
			if !ok || class != cur.class || bucketOf(rev) != bucket {
				b.broken = true
				return fmt.Errorf("the watch cache answered index value %s with %s/%s at revision %s: backstop off until restart",
					indexValue(cur.class, bucket), e.Namespace, e.Name, e.ResourceVersion)
			}
			if rev > cur.rev && rev <= end {
				candidates = append(candidates, candidate{event: e, rev: rev})
			}
		}
		slices.SortFunc(candidates, func(a, b candidate) int { return int(a.rev - b.rev) })
		reached, err := b.expire(ctx, cur, candidates, s, end)
		cur.rev = reached
		if err != nil {
			return err
		}
	}
	return nil
}

// bucket reads one index value from the watch cache. The cacher's delegator
// serves a list at resourceVersion 0 from the cache, and answers a filtered
// one 429 while the cache is not ready rather than go to etcd
// (CacheDelegator.GetList, shouldDelegateListOnNotReadyCache).
func (b *Backstop) bucket(ctx context.Context, class uint64, bucket int64) ([]core.Event, error) {
	list := &core.EventList{}
	err := b.cache.GetList(ctx, b.resourcePrefix, storage.ListOptions{
		ResourceVersion:      "0",
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
		Recursive:            true,
		Predicate: storage.SelectionPredicate{
			Label:       labels.Everything(),
			Field:       bucketSelector{value: indexValue(class, bucket)},
			IndexFields: []string{indexLabel},
			GetAttrs:    b.getAttrs,
		},
	}, list)
	return list.Items, err
}

type candidate struct {
	event *core.Event
	rev   int64
}

// expire handles candidates, ascending by revision, all due for cur's lease
// TTL by the clock s. It returns the revision through which cur is done:
// end, or just below the first candidate it could not handle.
func (b *Backstop) expire(ctx context.Context, cur *cursor, candidates []candidate, s samples, end int64) (int64, error) {
	for len(candidates) > 0 {
		batch := candidates[:min(lookupBatch, len(candidates))]
		candidates = candidates[len(batch):]
		kvs, err := b.lookup(ctx, batch)
		if err != nil {
			return batch[0].rev - 1, err
		}
		for i, c := range batch {
			kv := kvs[i]
			if kv == nil || kv.ModRevision != c.rev || kv.Lease == 0 {
				// Gone, written again (its new revision is in a later
				// bucket) or kept forever by whoever wrote it.
				continue
			}
			granted, err := b.granted(ctx, clientv3.LeaseID(kv.Lease))
			if err != nil {
				return c.rev - 1, err
			}
			if granted <= 0 {
				// The lease expired since the read: etcd deletes the key.
				continue
			}
			if granted > cur.seconds {
				b.follow(cur.class, granted, c.rev)
				continue
			}
			written, _ := s.writtenBy(c.rev)
			deadline := written.Add(time.Duration(granted) * time.Second)
			if err := b.limiter.Wait(ctx); err != nil {
				return c.rev - 1, err
			}
			if err := b.delete(ctx, c); err != nil {
				return c.rev - 1, err
			}
			klog.V(4).InfoS("Event TTL backstop deleted an Event past its deadline", "namespace", c.event.Namespace, "name", c.event.Name,
				"resourceVersion", c.rev, "deadline", deadline)
			deletionsTotal.Inc()
			latenessSeconds.Observe(time.Since(deadline).Seconds())
		}
	}
	return end, nil
}

// lookup reads the candidates' keys from etcd in one transaction, without
// their values: the revision and lease each key has now, or nil for a key
// that is gone.
func (b *Backstop) lookup(ctx context.Context, batch []candidate) ([]*keyState, error) {
	ops := make([]clientv3.Op, len(batch))
	for i, c := range batch {
		key, err := b.keyFunc(c.event)
		if err != nil {
			return nil, err
		}
		ops[i] = clientv3.OpGet(b.etcdKey(key), clientv3.WithKeysOnly())
	}
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	resp, err := b.client.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return nil, err
	}
	out := make([]*keyState, len(batch))
	for i, r := range resp.Responses {
		if kvs := r.GetResponseRange().GetKvs(); len(kvs) == 1 {
			out[i] = &keyState{ModRevision: kvs[0].ModRevision, Lease: kvs[0].Lease}
		}
	}
	return out, nil
}

type keyState struct {
	ModRevision int64
	Lease       int64
}

func (b *Backstop) etcdKey(key string) string {
	return b.keyPrefix + strings.TrimPrefix(key, "/")
}

// granted is the TTL etcd granted the lease, in seconds, or 0 for a lease
// that no longer exists.
func (b *Backstop) granted(ctx context.Context, id clientv3.LeaseID) (int64, error) {
	if s, ok := b.leases[id]; ok {
		return s, nil
	}
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	resp, err := b.client.TimeToLive(ctx, id)
	if err != nil {
		return 0, err
	}
	if resp.TTL < 0 {
		return 0, nil
	}
	if len(b.leases) >= maxLeases {
		clear(b.leases)
	}
	b.leases[id] = resp.GrantedTTL
	return resp.GrantedTTL, nil
}

// follow makes sure a cursor of the class deletes at a lease TTL of
// seconds, from revision rev on: a new one, or, past maxCursorsPerClass,
// the shortest that is at least as long, else the longest lengthened to
// it; a later deadline than the Event's is never early.
func (b *Backstop) follow(class uint64, seconds, rev int64) {
	cursors := b.cursors[class]
	var target *cursor
	for _, c := range cursors[1:] {
		if c.seconds == seconds {
			target = c
			break
		}
	}
	if target == nil && len(cursors) >= maxCursorsPerClass {
		for _, c := range cursors[1:] {
			if c.seconds >= seconds && (target == nil || c.seconds < target.seconds) {
				target = c
			}
		}
		if target == nil {
			target = cursors[len(cursors)-1]
			target.seconds = seconds
		}
	}
	if b.clock != nil {
		b.clock.extend(b.horizonFor(seconds))
	}
	if target == nil {
		target = &cursor{class: class, seconds: seconds, rev: rev - 1}
		cursors = append(cursors, target)
		slices.SortStableFunc(cursors[1:], func(a, b *cursor) int { return int(a.seconds - b.seconds) })
		b.cursors[class] = cursors
	}
	target.rev = min(target.rev, rev-1)
}

// delete removes the Event at the revision it was found at: the
// precondition makes a write since (which restarted its TTL) win, and
// another replica's deletion of it a no-op, as a race with etcd's own
// expiry is.
func (b *Backstop) delete(ctx context.Context, c candidate) error {
	key, err := b.keyFunc(c.event)
	if err != nil {
		return err
	}
	rv := c.event.ResourceVersion
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	err = b.store.Delete(ctx, key, &core.Event{}, &storage.Preconditions{ResourceVersion: &rv},
		func(context.Context, runtime.Object) error { return nil }, nil, storage.DeleteOptions{})
	switch {
	case err == nil:
		return nil
	case storage.IsNotFound(err):
		racesTotal.WithLabelValues("gone").Inc()
		return nil
	case storage.IsInvalidObj(err):
		// Preconditions.Check's answer: the resourceVersion moved on.
		racesTotal.WithLabelValues("rewritten").Inc()
		return nil
	}
	return errors.Join(fmt.Errorf("deleting %s", key), err)
}
