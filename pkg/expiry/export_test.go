package expiry

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/eventapiserver/event-apiserver/pkg/apis/core"
)

// Test hooks: a pass on a clock the test sets, without the clock's sampler.

func (b *Backstop) UseClock(client *clientv3.Client, s []Sample) {
	b.client = client
	b.clock = newClock(client, clockKey(b.config.Prefix), b.period, b.horizon())
	ss := samples(s)
	b.clock.current.Store(&ss)
}

func (b *Backstop) Pass(ctx context.Context) { b.pass(ctx) }

func (b *Backstop) Broken() bool { return b.broken }

func (b *Backstop) Attached() bool { return b.cache != nil }

// Cursors reports each class's cursors as lease TTL → revision.
func (b *Backstop) Cursors(class uint64) map[int64]int64 {
	out := map[int64]int64{}
	for _, c := range b.cursors[class] {
		out[c.seconds] = c.rev
	}
	return out
}

// Delete deletes e at its resourceVersion as a pass would.
func (b *Backstop) Delete(ctx context.Context, e *core.Event, rev int64) error {
	return b.delete(ctx, candidate{event: e, rev: rev})
}

// SetBucketBits narrows the index's buckets for one test.
func SetBucketBits(t interface{ Cleanup(func()) }, bits int) {
	old := bucketBits
	bucketBits = bits
	t.Cleanup(func() { bucketBits = old })
}

func BucketBits() int { return bucketBits }

var (
	DeletionsTotal  = deletionsTotal
	RacesTotal      = racesTotal
	LatenessSeconds = latenessSeconds
)

// Horizon is how old a sample the clock keeps now.
func (b *Backstop) Horizon() time.Duration { return time.Duration(b.clock.horizon.Load()) }

// ResetCursors sends every cursor back to revision 0, as after a start.
func (b *Backstop) ResetCursors() { clear(b.cursors) }
