package storm

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/eventapiserver/event-apiserver/pkg/apis/core"
)

// fakeClock is a settable clock for the limiter.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time        { return c.t }
func (c *fakeClock) step(d time.Duration)  { c.t = c.t.Add(d) }
func newFakeClock() *fakeClock             { return &fakeClock{t: time.Unix(1_700_000_000, 0)} }
func limitOf(qps float64, burst int) Limit { return Limit{QPS: qps, Burst: burst} }
func noLimit() Limit                       { return Limit{} }
func reporterLimits(create, update Limit) [numOperations]Limit {
	return [numOperations]Limit{opCreate: create, opUpdate: update}
}

func TestLimiter(t *testing.T) {
	type step struct {
		advance time.Duration
		key     string
		op      operation
		// want is the verdict; retryAfter is checked when non-zero.
		want verdict
	}
	allowed := verdict{allowed: true}
	cases := []struct {
		name   string
		config limiterConfig
		steps  []step
	}{
		{
			name:   "burst then refused until a token refills",
			config: limiterConfig{Reporter: reporterLimits(limitOf(2, 2), noLimit()), MaxReporters: 10},
			steps: []step{
				{key: "a", want: allowed},
				{key: "a", want: allowed},
				{key: "a", want: verdict{retryAfter: 500 * time.Millisecond}},
				{advance: 400 * time.Millisecond, key: "a", want: verdict{retryAfter: 100 * time.Millisecond}},
				{advance: 100 * time.Millisecond, key: "a", want: allowed},
			},
		},
		{
			name:   "reporters have their own buckets",
			config: limiterConfig{Reporter: reporterLimits(limitOf(1, 1), noLimit()), MaxReporters: 10},
			steps: []step{
				{key: "a", want: allowed},
				{key: "a", want: verdict{retryAfter: time.Second}},
				{key: "b", want: allowed},
			},
		},
		{
			name:   "updates keep counting when creates are used up",
			config: limiterConfig{Reporter: reporterLimits(limitOf(1, 1), limitOf(1, 2)), MaxReporters: 10},
			steps: []step{
				{key: "a", op: opCreate, want: allowed},
				{key: "a", op: opCreate, want: verdict{retryAfter: time.Second}},
				{key: "a", op: opUpdate, want: allowed},
				{key: "a", op: opUpdate, want: allowed},
				{key: "a", op: opUpdate, want: verdict{retryAfter: time.Second}},
			},
		},
		{
			name: "global budget is shared and refunds the reporter's token",
			config: limiterConfig{
				Reporter:     reporterLimits(limitOf(1, 1), noLimit()),
				Global:       limitOf(1, 2),
				MaxReporters: 10,
			},
			steps: []step{
				{key: "a", want: allowed},
				{key: "b", want: allowed},
				{key: "c", want: verdict{retryAfter: time.Second, global: true}},
				// c's own token was given back: once the global bucket
				// has one, c gets it.
				{advance: time.Second, key: "c", want: allowed},
			},
		},
		{
			name:   "no limits",
			config: limiterConfig{MaxReporters: 1},
			steps: []step{
				{key: "a", want: allowed},
				{key: "a", want: allowed},
				{key: "b", op: opUpdate, want: allowed},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clock := newFakeClock()
			l := newLimiter(tc.config, clock.now)
			for i, s := range tc.steps {
				clock.step(s.advance)
				got := l.allow("user", s.key, s.op, 1)
				if got.allowed != s.want.allowed || got.global != s.want.global ||
					(s.want.retryAfter != 0 && (got.retryAfter-s.want.retryAfter).Abs() > time.Millisecond) {
					t.Errorf("step %d (%s %s): got %+v, want %+v", i, s.key, s.op, got, s.want)
				}
			}
		})
	}
}

func TestLimiterForgetsIdleReporters(t *testing.T) {
	clock := newFakeClock()
	// An empty create bucket refills in 10s, an update bucket in 4s.
	l := newLimiter(limiterConfig{
		Reporter:     reporterLimits(limitOf(1, 10), limitOf(5, 20)),
		MaxReporters: 1000,
	}, clock.now)
	for i := range 100 {
		l.allow("user", fmt.Sprintf("node-%d", i), opCreate, 1)
	}
	if got := l.size(); got != 100 {
		t.Fatalf("remembered %d reporters, want 100", got)
	}
	clock.step(9 * time.Second)
	if v := l.allow("user", "node-0", opCreate, 1); v.reporters != 100 {
		t.Errorf("after 9s: %d reporters, want all 100 (none full yet)", v.reporters)
	}
	clock.step(time.Second)
	// Everyone but node-0 has been idle for 10s: full, so forgotten.
	if v := l.allow("user", "node-0", opCreate, 1); v.reporters != 1 {
		t.Errorf("after 10s: %d reporters, want 1", v.reporters)
	}
}

func TestLimiterBoundsReporters(t *testing.T) {
	clock := newFakeClock()
	l := newLimiter(limiterConfig{Reporter: reporterLimits(limitOf(1, 1), noLimit()), MaxReporters: 3}, clock.now)
	for _, key := range []string{"a", "b", "c", "d"} {
		if v := l.allow("user", key, opCreate, 1); !v.allowed || v.reporters > 3 {
			t.Fatalf("%s: %+v", key, v)
		}
	}
	// a was the least recently seen: forgotten, it starts with a full bucket.
	if v := l.allow("user", "a", opCreate, 1); !v.allowed {
		t.Errorf("a after eviction: %+v, want allowed", v)
	}
	// d is remembered and has no token left.
	if v := l.allow("user", "d", opCreate, 1); v.allowed {
		t.Errorf("d: %+v, want refused", v)
	}
}

func TestRetryAfterSeconds(t *testing.T) {
	for _, tc := range []struct {
		in   time.Duration
		want int
	}{
		{0, 1},
		{time.Millisecond, 1},
		{time.Second, 1},
		{1001 * time.Millisecond, 2},
		{90 * time.Second, 90},
	} {
		if got := retryAfterSeconds(tc.in); got != tc.want {
			t.Errorf("retryAfterSeconds(%v) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

// BenchmarkLimiter is one write's cost with many reporters remembered.
func BenchmarkLimiter(b *testing.B) {
	l := newLimiter(limiterConfig{
		Reporter:     reporterLimits(limitOf(DefaultCreateQPS, DefaultCreateBurst), limitOf(DefaultUpdateQPS, DefaultUpdateBurst)),
		Global:       limitOf(DefaultGlobalQPS, DefaultGlobalBurst),
		MaxReporters: DefaultMaxReporters,
	}, time.Now)
	keys := make([]string, 5000)
	for i := range keys {
		keys[i] = fmt.Sprintf("controller\x00kubelet\x00node-%d", i)
	}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		l.allow("user", keys[i%len(keys)], opCreate, 600)
	}
}

// TestLimiterByteBudget: large Events spend the byte budgets, per reporter
// and global, even while the request budgets have room; a refused write
// spends nothing.
func TestLimiterByteBudget(t *testing.T) {
	type step struct {
		advance time.Duration
		key     string
		size    int
		want    verdict
	}
	ok := verdict{allowed: true}
	cases := []struct {
		name   string
		config limiterConfig
		steps  []step
	}{
		{
			name: "reporter bytes",
			config: limiterConfig{Reporter: reporterLimits(limitOf(100, 100), noLimit()),
				ReporterBytes: limitOf(1000, 3000), MaxReporters: 10},
			steps: []step{
				{key: "a", size: 2000, want: ok},
				{key: "a", size: 2000, want: verdict{bytes: true, retryAfter: time.Second}},
				// Another reporter has its own bytes.
				{key: "b", size: 2000, want: ok},
				{advance: time.Second, key: "a", size: 2000, want: ok},
			},
		},
		{
			name: "global bytes",
			config: limiterConfig{Reporter: reporterLimits(limitOf(100, 100), noLimit()),
				GlobalBytes: limitOf(1000, 3000), MaxReporters: 10},
			steps: []step{
				{key: "a", size: 2000, want: ok},
				{key: "b", size: 2000, want: verdict{global: true, bytes: true, retryAfter: time.Second}},
				{advance: time.Second, key: "b", size: 2000, want: ok},
			},
		},
		{
			name:   "an Event over the burst waits for a full bucket",
			config: limiterConfig{ReporterBytes: limitOf(1000, 3000), MaxReporters: 10},
			steps: []step{
				{key: "a", size: 5000, want: ok},
				{key: "a", size: 1, want: verdict{bytes: true, retryAfter: time.Millisecond}},
				{advance: 3 * time.Second, key: "a", size: 5000, want: ok},
			},
		},
		{
			name: "refused by bytes, the request token is refunded",
			config: limiterConfig{Reporter: reporterLimits(limitOf(0.001, 1), noLimit()),
				GlobalBytes: limitOf(1000, 1000), MaxReporters: 10},
			steps: []step{
				{key: "a", size: 1000, want: ok},
				{key: "b", size: 1000, want: verdict{global: true, bytes: true, retryAfter: time.Second}},
				{advance: time.Second, key: "b", size: 1000, want: ok},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clock := newFakeClock()
			l := newLimiter(tc.config, clock.now)
			for i, s := range tc.steps {
				clock.step(s.advance)
				got := l.allow("user", s.key, opCreate, s.size)
				if got.allowed != s.want.allowed || got.global != s.want.global || got.bytes != s.want.bytes ||
					(s.want.retryAfter != 0 && (got.retryAfter-s.want.retryAfter).Abs() > time.Millisecond) {
					t.Errorf("step %d (%s, %d bytes): got %+v, want %+v", i, s.key, s.size, got, s.want)
				}
			}
		})
	}
}

// TestLimiterUserBudget: one user rotating reporter names gets no fresh
// bursts; another user is not affected.
func TestLimiterUserBudget(t *testing.T) {
	clock := newFakeClock()
	l := newLimiter(limiterConfig{
		Reporter:     reporterLimits(limitOf(1, 10), noLimit()),
		User:         limitOf(1, 20),
		MaxReporters: 100_000,
	}, clock.now)
	accepted := 0
	for i := range 1000 {
		if l.allow("mallory", fmt.Sprintf("instance-%d", i), opCreate, 1).allowed {
			accepted++
		}
	}
	if accepted != 20 {
		t.Errorf("%d writes under 1000 reporter names accepted, want the user's burst, 20", accepted)
	}
	if v := l.allow("alice", "alice-controller", opCreate, 1); !v.allowed {
		t.Errorf("another user refused: %+v", v)
	}
	if v := l.allow("mallory", "instance-x", opCreate, 1); v.allowed || !v.user {
		t.Errorf("mallory: %+v, want refused by the user budget", v)
	}
}

// TestLimiterMemoryIsBounded: three times MaxReporters distinct names of
// 128 KiB from one user. With the user budget on, the names are not even
// remembered past the user's burst; with it off, the limiter keeps at most
// MaxReporters fixed-size entries. Idle, it forgets them all. (The sizes are
// kept small: under the race detector each name costs milliseconds.)
func TestLimiterMemoryIsBounded(t *testing.T) {
	const maxReporters, names = 300, 900
	long := strings.Repeat("x", 64<<10)
	mallory := &user.DefaultInfo{Name: "mallory"}
	for _, tc := range []struct {
		name        string
		user        Limit
		wantEntries int
	}{
		{name: "user budget on", user: limitOf(1, 20), wantEntries: 21},
		{name: "user budget off", user: noLimit(), wantEntries: maxReporters},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := newFakeClock()
			p := New(Config{Create: limitOf(1, 10), Update: limitOf(1, 10), User: tc.user,
				MaxReporters: maxReporters, Now: clock.now})
			accepted := 0
			for i := range names {
				event := &core.Event{Source: core.EventSource{Component: long + fmt.Sprint(i), Host: long}}
				r := reporterOf(event, mallory)
				if p.limiter.allow(r.userKey, r.key, opCreate, 100).allowed {
					accepted++
				}
			}
			n, bytes := p.limiter.sweep()
			t.Logf("%d reporter names of 128 KiB: %d entries, %d bytes (%d a entry, bound %d); %d writes accepted",
				names, n, bytes, entryBytes, maxReporters*entryBytes, accepted)
			if n != tc.wantEntries || bytes > maxReporters*entryBytes {
				t.Errorf("%d entries, %d bytes, want %d and at most %d", n, bytes, tc.wantEntries, maxReporters*entryBytes)
			}
			if tc.user.enabled() && accepted > tc.user.Burst {
				t.Errorf("%d accepted, want at most the user's burst, %d", accepted, tc.user.Burst)
			}
			clock.step(time.Minute)
			if n, bytes := p.limiter.sweep(); n != 0 || bytes != 0 {
				t.Errorf("after a minute idle: %d entries, %d bytes, want none", n, bytes)
			}
		})
	}
}

// TestLimiterHot: a user is hot for hotFor after one of its writes was
// refused, and no user is before any refusal or after hotFor, which hot
// answers without the lock.
func TestLimiterHot(t *testing.T) {
	clock := newFakeClock()
	l := newLimiter(limiterConfig{User: limitOf(1, 1), MaxReporters: 10}, clock.now)
	sick, healthy := userKeyOf("sick"), userKeyOf("healthy")
	steps := []struct {
		name        string
		step        time.Duration
		write       string
		sick, other bool
	}{
		{name: "no refusal yet"},
		{name: "first write allowed", write: sick},
		{name: "second write refused", write: sick, sick: true},
		{name: "another user's write allowed", write: healthy, sick: true},
		{name: "just before hotFor", step: hotFor - time.Millisecond, sick: true},
		{name: "after hotFor", step: time.Millisecond},
	}
	for _, s := range steps {
		clock.step(s.step)
		if s.write != "" {
			l.allow(s.write, s.write, opCreate, 1)
		}
		if got := l.hot("sick"); got != s.sick {
			t.Errorf("%s: sick user hot %v, want %v", s.name, got, s.sick)
		}
		if got := l.hot("healthy"); got != s.other {
			t.Errorf("%s: healthy user hot %v, want %v", s.name, got, s.other)
		}
	}
}
