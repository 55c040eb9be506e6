package expiry

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"sort"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
)

// Sample says that by At, etcd's revision had reached Revision: the sampler
// read Revision as etcd's current revision and took At after the answer
// came back, so every write at or below Revision happened before At.
type Sample struct {
	At       time.Time
	Revision int64
}

// samples are ascending in Revision and in At.
type samples []Sample

// writtenBy is when the write at revision rev had happened at the latest:
// the time of the first sample that reaches rev. ok is false for a revision
// written after the newest sample, whose time is not known yet.
func (s samples) writtenBy(rev int64) (at time.Time, ok bool) {
	i := sort.Search(len(s), func(i int) bool { return s[i].Revision >= rev })
	if i == len(s) {
		return time.Time{}, false
	}
	return s[i].At, true
}

// dueThrough is the highest revision whose write is at least age old at
// now: the revision of the newest sample taken at or before now-age, since
// every write at or below it happened before that sample was taken. Zero
// when no sample is that old.
func (s samples) dueThrough(now time.Time, age time.Duration) int64 {
	limit := now.Add(-age)
	i := sort.Search(len(s), func(i int) bool { return s[i].At.After(limit) })
	if i == 0 {
		return 0
	}
	return s[i-1].Revision
}

// spacingFraction bounds how far apart thin leaves two samples: at most
// their age over spacingFraction (or the sample period, for young ones). An
// Event's deadline is read off the sample after its write, which is as late
// as the gap before it, so a deadline TTL old is late by at most
// TTL/spacingFraction (1.6%: 56s for an hour, 22.5 minutes for a day) on
// top of the sample period, and the clock holds about spacingFraction
// samples per factor e of age.
const spacingFraction = 64

// thin drops the samples no deadline needs: those older than horizon but
// the newest of them (an Event older than every sample is dated by the
// oldest one kept, later than its write, which is never early), and any
// sample whose neighbours are close enough for their age that the one
// after it may date its writes instead. Every gap left is either one the
// sampler made or at most the age of its newer end over spacingFraction,
// and since ages only grow, a gap that met the bound keeps meeting it.
func (s samples) thin(now time.Time, horizon time.Duration) samples {
	n := len(s)
	start := 0
	for start+1 < n && now.Sub(s[start+1].At) > horizon {
		start++
	}
	if n-start <= 2 {
		return append(samples(nil), s[start:]...)
	}
	out := make(samples, 0, n-start)
	out = append(out, s[start])
	for i := start + 1; i < n-1; i++ {
		next, last := s[i+1], out[len(out)-1]
		if next.At.Sub(last.At) <= now.Sub(next.At)/spacingFraction {
			continue
		}
		out = append(out, s[i])
	}
	return append(out, s[n-1])
}

// below drops samples of revisions etcd has not reached: after a restore
// from an older snapshot, revisions are handed out again, and a sample taken
// before the restore would date the new writes too early.
func (s samples) below(current int64) (samples, bool) {
	i := sort.Search(len(s), func(i int) bool { return s[i].Revision > current })
	return s[:i], i < len(s)
}

// The clock's value in etcd: [[unix milliseconds, revision], ...], oldest
// first. A few hundred pairs at most (thin), readable with etcdctl.
type clockValue struct {
	Samples [][2]int64 `json:"samples"`
}

func (s samples) encode() ([]byte, error) {
	v := clockValue{Samples: make([][2]int64, len(s))}
	for i, x := range s {
		v.Samples[i] = [2]int64{x.At.UnixMilli(), x.Revision}
	}
	return json.Marshal(v)
}

func decodeSamples(data []byte) (samples, error) {
	var v clockValue
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, err
	}
	s := make(samples, len(v.Samples))
	for i, x := range v.Samples {
		s[i] = Sample{At: time.UnixMilli(x[0]), Revision: x[1]}
		if i > 0 && (x[1] <= v.Samples[i-1][1] || x[0] < v.Samples[i-1][0]) {
			return nil, fmt.Errorf("samples out of order at %d", i)
		}
	}
	return s, nil
}

// clockKey is where the revision clock lives: under the storage prefix, as
// every key of this server, and outside the Events prefix, which the watch
// cache, history capture and a kube-apiserver sharing the events etcd read.
func clockKey(prefix string) string {
	return path.Join("/", prefix, "eventapiserver.io", "revision-clock")
}

// clock keeps the revision clock in etcd and the newest copy of it in
// memory. Any number of replicas run one each over the same key: each
// appends a sample, with a compare-and-swap on the key's revision, when
// something was written since the newest sample and that sample is older
// than half a period by its own clock, so together they add about one
// sample a period while Events are written, and none while nothing is.
type clock struct {
	client *clientv3.Client
	key    string
	period time.Duration
	// horizon is how old a sample thin keeps (a time.Duration): the longest
	// lease of the replica's classes at first, longer once a pass finds a
	// longer lease (extend). A clock whose horizon is shorter than a lease
	// would never find a sample old enough to make its Events due.
	horizon atomic.Int64
	// now is time.Now but in tests.
	now func() time.Time

	current atomic.Pointer[samples]
	// aheadLogged rate-limits the warning about a sample from the future.
	aheadLogged time.Time
	failures    logEvery
}

func newClock(client *clientv3.Client, key string, period, horizon time.Duration) *clock {
	c := &clock{client: client, key: key, period: period, now: time.Now}
	c.horizon.Store(int64(horizon))
	return c
}

// extend makes the clock keep samples for a lease of d.
func (c *clock) extend(d time.Duration) {
	for {
		old := c.horizon.Load()
		if int64(d) <= old || c.horizon.CompareAndSwap(old, int64(d)) {
			return
		}
	}
}

// clockTimeout bounds a tick's requests to etcd.
const clockTimeout = 10 * time.Second

// maxClockSkew is how far ahead of this replica's clock the newest sample
// may be before a warning says the replicas' clocks disagree.
const maxClockSkew = time.Second

// logEvery lets through one log line a minute of a failure that repeats at
// every tick while etcd is away.
type logEvery struct{ last time.Time }

func (l *logEvery) due(now time.Time) bool {
	if now.Sub(l.last) < time.Minute {
		return false
	}
	l.last = now
	return true
}

// samples returns the newest copy read or written, nil before the first.
func (c *clock) samples() samples {
	if s := c.current.Load(); s != nil {
		return *s
	}
	return nil
}

func (c *clock) run(ctx context.Context) {
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := c.tick(ctx); err != nil && ctx.Err() == nil && c.failures.due(c.now()) {
			klog.ErrorS(err, "Event TTL backstop: cannot sample etcd's revision", "key", c.key)
		}
	}, c.period)
}

// tick reads the clock and etcd's current revision in one request, and
// appends a sample when one is due.
func (c *clock) tick(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, max(c.period, clockTimeout))
	defer cancel()
	resp, err := c.client.Get(ctx, c.key)
	if err != nil {
		return err
	}
	now := c.now()
	current := resp.Header.Revision
	var modRevision int64
	var s samples
	rewrite := false
	if len(resp.Kvs) == 1 {
		modRevision = resp.Kvs[0].ModRevision
		if s, err = decodeSamples(resp.Kvs[0].Value); err != nil {
			// Starting over dates every Event present now: later than
			// their writes, never earlier.
			klog.ErrorS(err, "Event TTL backstop: the revision clock in etcd is unreadable, starting it again", "key", c.key)
			s, rewrite = nil, true
		}
	}
	if kept, dropped := s.below(current); dropped {
		klog.InfoS("Event TTL backstop: etcd's revision is behind the revision clock (restored from a snapshot?), dropping the samples past it",
			"revision", current, "samples", len(s)-len(kept))
		s, rewrite = kept, true
	}
	c.current.Store(&s)
	var newest Sample
	if len(s) > 0 {
		newest = s[len(s)-1]
		if ahead := newest.At.Sub(now); ahead > maxClockSkew && now.Sub(c.aheadLogged) > time.Minute {
			c.aheadLogged = now
			klog.InfoS("Event TTL backstop: the revision clock's newest sample is ahead of this replica's clock; the replicas' clocks disagree, and a replica whose clock is ahead deletes Events early by as much",
				"ahead", ahead)
		}
	}
	// Nothing but this clock was written since its last sample (the key's
	// own write is the newest revision), or another replica sampled a
	// moment ago.
	if !rewrite && modRevision != 0 && (current == modRevision || now.Sub(newest.At) < c.period/2) {
		return nil
	}
	// Whole milliseconds, as stored, rounded up: a sample may be late,
	// never early.
	ms := now.UnixMilli()
	if now.UnixNano()%int64(time.Millisecond) != 0 {
		ms++
	}
	at := time.UnixMilli(ms)
	if at.Before(newest.At) {
		// Samples stay ordered, as writtenBy needs; a later time is never
		// early.
		at = newest.At
	}
	next := append(append(samples(nil), s...), Sample{At: at, Revision: current}).thin(now, time.Duration(c.horizon.Load()))
	value, err := next.encode()
	if err != nil {
		return err
	}
	txn, err := c.client.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(c.key), "=", modRevision)).
		Then(clientv3.OpPut(c.key, string(value))).
		Commit()
	if err != nil {
		return err
	}
	if txn.Succeeded {
		c.current.Store(&next)
		clockSamples.Set(float64(len(next)))
	}
	// Otherwise another replica wrote first; its samples are read next time.
	return nil
}
