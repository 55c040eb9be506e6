package storm

import (
	"container/list"
	"math"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// Limit is a token bucket's shape: QPS tokens a second, up to Burst saved.
// A QPS of zero or less means no limit.
type Limit struct {
	QPS   float64
	Burst int
}

func (l Limit) enabled() bool { return l.QPS > 0 }

// refillTime is how long an empty bucket takes to fill up. A bucket idle
// that long is full, the same as a new one, so it can be forgotten.
func (l Limit) refillTime() time.Duration {
	if !l.enabled() {
		return 0
	}
	return time.Duration(float64(l.Burst) / l.QPS * float64(time.Second))
}

type bucket struct {
	tokens float64
	stamp  time.Time
}

func newBucket(l Limit, now time.Time) bucket {
	return bucket{tokens: float64(l.Burst), stamp: now}
}

// take spends one token, or says how long until one is there.
func (b *bucket) take(l Limit, now time.Time) (bool, time.Duration) {
	return b.takeN(l, 1, now)
}

// takeN spends n tokens, or says how long until they are there. n is
// capped at the burst, so that a write larger than the byte burst waits
// for a full bucket rather than for ever.
func (b *bucket) takeN(l Limit, n float64, now time.Time) (bool, time.Duration) {
	if !l.enabled() {
		return true, 0
	}
	n = math.Min(n, float64(l.Burst))
	if elapsed := now.Sub(b.stamp); elapsed > 0 {
		b.tokens = math.Min(float64(l.Burst), b.tokens+elapsed.Seconds()*l.QPS)
		b.stamp = now
	}
	if b.tokens >= n {
		b.tokens -= n
		return true, 0
	}
	return false, time.Duration((n - b.tokens) / l.QPS * float64(time.Second))
}

// refund gives back a token spent on a write that another bucket refused.
func (b *bucket) refund(l Limit) { b.refundN(l, 1) }

func (b *bucket) refundN(l Limit, n float64) {
	if l.enabled() {
		b.tokens = math.Min(float64(l.Burst), b.tokens+math.Min(n, float64(l.Burst)))
	}
}

// operation is what a write does to an Event; each has its own budget, so
// that a reporter out of create tokens still gets its series counted.
type operation int

const (
	opCreate operation = iota
	opUpdate
	numOperations
)

func (o operation) String() string {
	if o == opCreate {
		return "create"
	}
	return "update"
}

// limiterConfig is what the limiter enforces.
type limiterConfig struct {
	// Reporter limits are per reporter and operation.
	Reporter [numOperations]Limit
	// Global bounds all Event writes together.
	Global Limit
	// ReporterBytes and GlobalBytes bound the bytes written (Burst and QPS
	// count bytes), per reporter and all together: the request budgets
	// alone let large Events fill etcd's quota.
	ReporterBytes, GlobalBytes Limit
	// User bounds all writes of one authenticated user, whatever reporter
	// names it uses, in front of the reporters' own budgets.
	User Limit
	// MaxReporters bounds the reporters remembered at once; beyond it the
	// least recently seen is forgotten (and starts again with a full
	// bucket if it comes back).
	MaxReporters int
}

// reporterState is one reporter's buckets and its place in the LRU list.
type reporterState struct {
	// refused is when a write of this user was last refused (user states
	// only): the early refusal looks at a write's reporter only then.
	refused time.Time
	key     string
	buckets [numOperations]bucket
	bytes   bucket
	// user is the user's bucket, in a user's own state only.
	user bucket
	seen time.Time
}

// verdict is the limiter's answer for one write.
type verdict struct {
	allowed bool
	// retryAfter is how long until the refusing bucket has a token.
	retryAfter time.Duration
	// global is true when a global bucket refused.
	global bool
	// bytes is true when a byte bucket refused.
	bytes bool
	// user is true when the user's bucket refused.
	user bool
	// reporters is how many reporters the limiter remembers afterwards.
	reporters int
}

// limiter holds the buckets. Memory is bounded twice: reporters idle long
// enough for every bucket to be full again are dropped (they would behave
// the same as new ones), and at most MaxReporters are kept (LRU). Expired
// reporters are dropped as other writes come in, so no goroutine is needed.
type limiter struct {
	config limiterConfig
	// idle is how long a reporter must be unseen before it is forgotten.
	idle time.Duration
	now  func() time.Time

	// lastRefused is when any write was last refused, in Unix nanoseconds:
	// while none was for hotFor, hot answers without a hash or the lock.
	lastRefused atomic.Int64

	mu          sync.Mutex
	global      bucket
	globalBytes bucket
	reporters   map[string]*list.Element
	// lru holds *reporterState, most recently seen first.
	lru *list.List
}

func newLimiter(config limiterConfig, now func() time.Time) *limiter {
	var idle time.Duration
	for _, l := range config.Reporter {
		idle = max(idle, l.refillTime())
	}
	idle = max(idle, config.ReporterBytes.refillTime(), config.User.refillTime())
	return &limiter{
		config:      config,
		idle:        idle,
		now:         now,
		global:      newBucket(config.Global, now()),
		globalBytes: newBucket(config.GlobalBytes, now()),
		reporters:   map[string]*list.Element{},
		lru:         list.New(),
	}
}

// allow spends a token of the reporter's bucket for op and one of the global
// bucket, and size bytes of the reporter's and the global byte buckets, or
// nothing.
func (l *limiter) allow(userKey, key string, op operation, size int) verdict {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	v := l.take(userKey, key, op, float64(size), now)
	if !v.allowed {
		l.touch(userKey, now).refused = now
		l.lastRefused.Store(now.UnixNano())
	}
	l.expire(now)
	v.reporters = l.lru.Len()
	return v
}

// hotFor is how long after a refusal a user's writes are looked at before
// they are decoded in full (see peek).
const hotFor = 10 * time.Second

// hot says whether a write of the user was refused within hotFor. It
// spends nothing and remembers nothing. It runs for every create, so the
// user's key is hashed only after a refusal of anyone's.
func (l *limiter) hot(userName string) bool {
	now := l.now()
	if now.Sub(time.Unix(0, l.lastRefused.Load())) >= hotFor {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.reporters[userKeyOf(userName)]
	return ok && now.Sub(e.Value.(*reporterState).refused) < hotFor
}

// peek is allow's answer for a write of op now as far as the write's size
// does not enter it: the user's budget, then the reporter's count of op.
// It spends nothing and remembers nothing: a write it does not refuse goes
// on to allow, which decides. The budgets after those (the byte budgets,
// the global one) need the size, or are better left to allow.
func (l *limiter) peek(userKey, key string, op operation) verdict {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if userLimit := l.config.User; userLimit.enabled() {
		if e, ok := l.reporters[userKey]; ok {
			b := e.Value.(*reporterState).user // a copy: take spends from it
			if ok, wait := b.take(userLimit, now); !ok {
				return verdict{retryAfter: wait, user: true, reporters: l.lru.Len()}
			}
		}
	}
	if limit := l.config.Reporter[op]; limit.enabled() {
		if e, ok := l.reporters[key]; ok {
			b := e.Value.(*reporterState).buckets[op]
			if ok, wait := b.take(limit, now); !ok {
				return verdict{retryAfter: wait, reporters: l.lru.Len()}
			}
		}
	}
	return verdict{allowed: true}
}

func (l *limiter) take(userKey, key string, op operation, size float64, now time.Time) verdict {
	// Each bucket that agreed is refunded if a later one refuses.
	var refunds []func()
	refuse := func(v verdict) verdict {
		for _, r := range refunds {
			r()
		}
		return v
	}
	// The user's bucket first: a user out of budget is refused before its
	// reporter names are even remembered.
	if userLimit := l.config.User; userLimit.enabled() {
		userState := l.touch(userKey, now)
		if ok, wait := userState.user.take(userLimit, now); !ok {
			return verdict{retryAfter: wait, user: true}
		}
		refunds = append(refunds, func() { userState.user.refund(userLimit) })
	}
	limit, bytesLimit := l.config.Reporter[op], l.config.ReporterBytes
	var state *reporterState
	if limit.enabled() || bytesLimit.enabled() {
		state = l.touch(key, now)
	}
	if limit.enabled() {
		if ok, wait := state.buckets[op].take(limit, now); !ok {
			return refuse(verdict{retryAfter: wait})
		}
		refunds = append(refunds, func() { state.buckets[op].refund(limit) })
	}
	if bytesLimit.enabled() {
		if ok, wait := state.bytes.takeN(bytesLimit, size, now); !ok {
			return refuse(verdict{retryAfter: wait, bytes: true})
		}
		refunds = append(refunds, func() { state.bytes.refundN(bytesLimit, size) })
	}
	if ok, wait := l.global.take(l.config.Global, now); !ok {
		return refuse(verdict{retryAfter: wait, global: true})
	}
	refunds = append(refunds, func() { l.global.refund(l.config.Global) })
	if ok, wait := l.globalBytes.takeN(l.config.GlobalBytes, size, now); !ok {
		return refuse(verdict{retryAfter: wait, global: true, bytes: true})
	}
	return verdict{allowed: true}
}

// touch finds or creates the reporter's state and marks it seen.
func (l *limiter) touch(key string, now time.Time) *reporterState {
	if e, ok := l.reporters[key]; ok {
		l.lru.MoveToFront(e)
		state := e.Value.(*reporterState)
		state.seen = now
		return state
	}
	state := &reporterState{key: key, seen: now}
	for op, limit := range l.config.Reporter {
		state.buckets[op] = newBucket(limit, now)
	}
	state.bytes = newBucket(l.config.ReporterBytes, now)
	state.user = newBucket(l.config.User, now)
	l.reporters[key] = l.lru.PushFront(state)
	return state
}

// expire drops reporters from the back of the LRU list while there are too
// many or they have been idle long enough to be full again.
func (l *limiter) expire(now time.Time) {
	for e := l.lru.Back(); e != nil; e = l.lru.Back() {
		state := e.Value.(*reporterState)
		if l.lru.Len() <= l.config.MaxReporters && now.Sub(state.seen) < l.idle {
			return
		}
		l.lru.Remove(e)
		delete(l.reporters, state.key)
	}
}

// size is the number of reporters remembered.
func (l *limiter) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lru.Len()
}

// entryBytes is the memory one remembered reporter (or user) takes: its
// state, its list element, its key (fixed size: keys are hashes) and its
// map entry (key header and pointer, with Go's map overhead rounded up).
const entryBytes = int(unsafe.Sizeof(reporterState{})) + int(unsafe.Sizeof(list.Element{})) + keySize + 64

// sweep forgets idle reporters now, without a write, and returns how many
// are left and their memory: the metrics fall when traffic stops. The
// memory is at most MaxReporters x entryBytes.
func (l *limiter) sweep() (reporters, bytes int) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.expire(now)
	return l.lru.Len(), l.lru.Len() * entryBytes
}
