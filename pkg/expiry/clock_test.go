package expiry

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"k8s.io/apiserver/pkg/storage/etcd3/testserver"
)

var t0 = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

func TestWrittenByAndDueThrough(t *testing.T) {
	s := samples{{t0, 10}, {t0.Add(10 * time.Second), 15}, {t0.Add(20 * time.Second), 30}}
	for _, tc := range []struct {
		rev    int64
		want   time.Time
		wantOK bool
	}{
		{1, t0, true},
		{10, t0, true},
		{11, t0.Add(10 * time.Second), true},
		{30, t0.Add(20 * time.Second), true},
		{31, time.Time{}, false},
	} {
		at, ok := s.writtenBy(tc.rev)
		if !at.Equal(tc.want) || ok != tc.wantOK {
			t.Errorf("writtenBy(%d) = %v, %v; want %v, %v", tc.rev, at, ok, tc.want, tc.wantOK)
		}
	}
	for _, tc := range []struct {
		now  time.Time
		age  time.Duration
		want int64
	}{
		{t0.Add(59 * time.Second), time.Minute, 0},
		{t0.Add(time.Minute), time.Minute, 10},
		{t0.Add(75 * time.Second), time.Minute, 15},
		{t0.Add(time.Hour), time.Minute, 30},
	} {
		if got := s.dueThrough(tc.now, tc.age); got != tc.want {
			t.Errorf("dueThrough(t0+%v, %v) = %d, want %d", tc.now.Sub(t0), tc.age, got, tc.want)
		}
	}
}

// TestClockNeverEarly runs a clock thinned as the sampler thins it over two
// days of writes at random moments, and checks every write against it: the
// deadline it gives (the time the first sample reaching the write's
// revision was taken, plus a TTL) is never before the write's own time plus
// that TTL, and not later than the TTL, the sample period and the thinned
// gap (TTL/spacingFraction) allow. The clock stays a few hundred samples.
func TestClockNeverEarly(t *testing.T) {
	const period = 30 * time.Second
	const span = 2 * 24 * time.Hour
	horizon := 25 * time.Hour
	rng := rand.New(rand.NewPCG(1, 2))
	type write struct {
		at  time.Time
		rev int64
	}
	var writes []write
	var s samples
	rev := int64(0)
	maxLen := 0
	// Sample every period, as the sampler does while Events are written;
	// between two samples, some writes at random moments.
	for now := t0; now.Before(t0.Add(span)); now = now.Add(period) {
		for range rng.IntN(3) {
			rev++
			writes = append(writes, write{at: now.Add(-time.Duration(rng.Int64N(int64(period)))), rev: rev})
		}
		// The sample's time is taken after etcd answered; the writes of the
		// last period are older. None while nothing was written.
		if len(s) == 0 || s[len(s)-1].Revision < rev {
			s = append(s, Sample{At: now, Revision: rev}).thin(now, horizon)
		}
		maxLen = max(maxLen, len(s))

		// Every write a day old or younger, judged now for TTLs it might
		// have: a minute, an hour, a day.
		if now.Sub(t0)%(6*time.Hour) != 0 {
			continue
		}
		for _, w := range writes {
			age := now.Sub(w.at)
			if age > 24*time.Hour {
				continue
			}
			written, ok := s.writtenBy(w.rev)
			if !ok {
				t.Fatalf("write at revision %d has no sample", w.rev)
			}
			if written.Before(w.at) {
				t.Fatalf("write at %v (revision %d) dated %v, before it happened", w.at, w.rev, written)
			}
			// How late the date may be: the write's own period, or the
			// thinned gap for its age.
			if late := written.Sub(w.at); late > max(period, now.Sub(written)/spacingFraction+period) {
				t.Fatalf("write at %v (revision %d, %v old) dated %v late", w.at, w.rev, age, late)
			}
			for _, ttl := range []time.Duration{time.Minute, time.Hour, 24 * time.Hour} {
				due := s.dueThrough(now, ttl)
				if w.rev <= due && age < ttl {
					t.Fatalf("write at %v (revision %d) due at %v, %v after it, before its TTL %v", w.at, w.rev, now, age, ttl)
				}
			}
		}
	}
	t.Logf("%d writes over %v, %d samples kept at the end, at most %d", len(writes), span, len(s), maxLen)
	if maxLen > 600 {
		t.Errorf("the clock grew to %d samples", maxLen)
	}
	encoded, err := s.encode()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d bytes in etcd", len(encoded))
	back, err := decodeSamples(encoded)
	if err != nil || len(back) != len(s) || !back[len(back)-1].At.Equal(s[len(s)-1].At) {
		t.Errorf("decode(encode) = %d samples, %v; want %d", len(back), err, len(s))
	}
}

func TestDecodeRefusesDisorder(t *testing.T) {
	for _, value := range []string{`{"samples":[[2000,5],[1000,6]]}`, `{"samples":[[1000,6],[2000,6]]}`, `not json`} {
		if _, err := decodeSamples([]byte(value)); err == nil {
			t.Errorf("decoded %s", value)
		}
	}
}

// TestClockTick runs two replicas' clocks on one real etcd: a sample when
// something was written, none when only the clock was, one writer winning
// a race, and samples past etcd's revision (a restore from an older
// snapshot) dropped.
func TestClockTick(t *testing.T) {
	client := testserver.RunEtcd(t, nil).Client
	ctx := context.Background()
	now := time.Now()
	mkClock := func() *clock {
		c := newClock(client, clockKey("/registry"), 10*time.Second, time.Hour)
		c.now = func() time.Time { return now }
		return c
	}
	sleep := func(d time.Duration) { now = now.Add(d) }
	a, b := mkClock(), mkClock()
	put := func() int64 {
		resp, err := client.Put(ctx, "/registry/events/ns/e", "x")
		if err != nil {
			t.Fatal(err)
		}
		return resp.Header.Revision
	}
	stored := func() samples {
		resp, err := client.Get(ctx, a.key)
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("clock key: %v %v", err, resp)
		}
		s, err := decodeSamples(resp.Kvs[0].Value)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	tick := func(c *clock) {
		if err := c.tick(ctx); err != nil {
			t.Fatal(err)
		}
	}

	rev := put()
	tick(a)
	if s := stored(); len(s) != 1 || s[0].Revision != rev {
		t.Fatalf("first sample %v, want revision %d", s, rev)
	}
	sleep(a.period)
	tick(a)
	tick(b)
	if s := stored(); len(s) != 1 {
		t.Errorf("nothing written since, yet %d samples", len(s))
	}
	rev = put()
	sleep(time.Second)
	tick(b)
	if s := b.samples(); len(s) != 2 || s[1].Revision != rev {
		t.Errorf("b's samples %v, want a second at revision %d", s, rev)
	}
	rev = put()
	sleep(a.period/2 - time.Millisecond)
	tick(a)
	if s := stored(); len(s) != 2 {
		t.Errorf("a sampled %v right after b", s)
	}
	// Past half a period (samples are rounded up to whole milliseconds).
	sleep(2 * time.Millisecond)
	tick(a)
	if s := stored(); len(s) != 3 || s[2].Revision != rev {
		t.Errorf("samples %v, want a third at revision %d", s, rev)
	}
	if a.samples()[2] != stored()[2] {
		t.Errorf("a holds %v, etcd %v", a.samples(), stored())
	}

	// A sample from revisions etcd has not reached.
	future := append(stored(), Sample{At: now, Revision: rev + 1000})
	value, err := future.encode()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Put(ctx, a.key, string(value)); err != nil {
		t.Fatal(err)
	}
	tick(b)
	s := stored()
	if last := s[len(s)-1]; last.Revision > rev+2 {
		t.Errorf("the sample past etcd's revision was kept: %v", s)
	}

	// An unreadable clock starts again.
	if _, err := client.Put(ctx, a.key, "garbage"); err != nil {
		t.Fatal(err)
	}
	tick(a)
	if s := stored(); len(s) != 1 {
		t.Errorf("after garbage, %v", s)
	}
}

// TestClockKeyOutsideEvents pins the clock outside the Events prefix, which
// the cache, history capture and kube-apiserver read as Events.
func TestClockKeyOutsideEvents(t *testing.T) {
	key := clockKey("/registry")
	if key != "/registry/eventapiserver.io/revision-clock" {
		t.Errorf("clock key %q", key)
	}
	for _, prefix := range []string{"/registry/events/", "/registry/events"} {
		if len(key) >= len(prefix) && key[:len(prefix)] == prefix {
			t.Errorf("clock key %q under %q", key, prefix)
		}
	}
}

// TestFollowBounded routes Events of one class with many lease TTLs (other
// writers, changed rules): a class keeps at most maxCursorsPerClass cursors,
// and each Event lands on a cursor whose TTL is at least its lease's, from
// just below its revision, so none is deleted early.
func TestFollowBounded(t *testing.T) {
	b := &Backstop{cursors: map[uint64][]*cursor{60: {{class: 60, seconds: 63, rev: 1000}}}}
	type routed struct{ seconds, rev int64 }
	var all []routed
	for i := range 40 {
		r := routed{seconds: int64(64 + (i*37)%200), rev: int64(100 + i)}
		b.follow(60, r.seconds, r.rev)
		all = append(all, r)
	}
	cursors := b.cursors[60]
	if len(cursors) > maxCursorsPerClass {
		t.Fatalf("%d cursors for one class", len(cursors))
	}
	if cursors[0].seconds != 63 {
		t.Errorf("the class's own cursor moved: %+v", cursors[0])
	}
	for _, r := range all {
		ok := false
		for _, c := range cursors[1:] {
			if c.seconds >= r.seconds && c.rev < r.rev {
				ok = true
			}
		}
		if !ok {
			t.Errorf("an Event of a %ds lease at revision %d has no cursor as long from below it", r.seconds, r.rev)
		}
	}
}

// TestHorizonFollowsLongerLeases: a lease longer than every class (another
// writer's) makes the clock keep samples that old, without which its
// Events would never come due; a shorter one changes nothing.
func TestHorizonFollowsLongerLeases(t *testing.T) {
	b := &Backstop{period: 10 * time.Second, cursors: map[uint64][]*cursor{60: {{class: 60, seconds: 63}}}}
	b.clock = newClock(nil, "k", b.period, b.horizonFor(63))
	b.follow(60, 3600, 100)
	if got, want := time.Duration(b.clock.horizon.Load()), 3600*time.Second+2*b.period; got != want {
		t.Errorf("horizon %v, want %v", got, want)
	}
	b.follow(60, 600, 100)
	if got, want := time.Duration(b.clock.horizon.Load()), 3600*time.Second+2*b.period; got != want {
		t.Errorf("horizon %v after a shorter lease, want %v", got, want)
	}
}
