package workload

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// PreloadOptions configures Preload.
type PreloadOptions struct {
	Endpoints []string
	Layout    Layout
	// From and To: write the store's Events [From, To).
	From, To int
	// Workers is how many transactions (of preloadBatch Events) are in
	// flight; default 32.
	Workers int
}

// PreloadResult says what Preload wrote.
type PreloadResult struct {
	Events int
	// Bytes is the total size of the values written; Bytes/Events is the
	// protobuf size of one stored Event.
	Bytes   int64
	Elapsed time.Duration
}

// Preload writes Events [From, To) of the layout straight to etcd, in the
// servers' layout, with leases of EventTTL. Keys that exist are an
// error: preload a store in increasing ranges.
func Preload(ctx context.Context, o PreloadOptions) (PreloadResult, error) {
	if o.Workers <= 0 {
		o.Workers = 32
	}
	c, err := newEtcdClient(o.Endpoints)
	if err != nil {
		return PreloadResult{}, err
	}
	defer func() { _ = c.Close() }()
	leases := &leaser{client: c, ttl: EventTTL}

	start := time.Now()
	var next atomic.Int64
	next.Store(int64(o.From))
	var bytes atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, o.Workers)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for range o.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				from := int(next.Add(preloadBatch) - preloadBatch)
				if from >= o.To {
					return
				}
				to := min(from+preloadBatch, o.To)
				n, err := writeEvents(ctx, c, leases, o.Layout, from, to)
				if err != nil {
					errc <- fmt.Errorf("preloading events %d-%d: %w", from, to-1, err)
					cancel()
					return
				}
				bytes.Add(int64(n))
			}
		}()
	}
	wg.Wait()
	close(errc)
	if err := <-errc; err != nil {
		return PreloadResult{}, err
	}
	return PreloadResult{Events: o.To - o.From, Bytes: bytes.Load(), Elapsed: time.Since(start)}, nil
}

// preloadBatch is how many Events one transaction creates. One transaction
// per Event, as the servers write them, preloads a million Events in many
// minutes; etcd's default --max-txn-ops is 128, and 64 Events of the layout
// stay far below its 1.5 MiB request limit.
const preloadBatch = 64

// writeEvents creates Events [from, to) of the layout in one transaction,
// only if none of their keys exists: the etcd3 store's create, batched.
func writeEvents(ctx context.Context, c *clientv3.Client, leases *leaser, layout Layout, from, to int) (int, error) {
	var cmps []clientv3.Cmp
	var puts []clientv3.Op
	size := 0
	for i := from; i < to; i++ {
		ev := layout.Event(i)
		value, err := storedValue(ev, ev.FirstTimestamp.Time)
		if err != nil {
			return 0, err
		}
		lease, err := leases.get(ctx)
		if err != nil {
			return 0, err
		}
		key := eventKey(DefaultPrefix, ev.Namespace, ev.Name)
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(key), "=", 0))
		puts = append(puts, clientv3.OpPut(key, string(value), clientv3.WithLease(lease)))
		size += len(value)
	}
	// An etcd busy with a server's initial LIST times a transaction out now
	// and then (etcdserver: request timed out), which fails a million-Event
	// preload near its end. Such a transaction may still have been applied,
	// so a retry whose keys exist checks they all do: then the batch is in.
	var err error
	for attempt := range preloadAttempts {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return 0, ctx.Err()
			case <-time.After(time.Duration(attempt) * time.Second):
			}
		}
		var resp *clientv3.TxnResponse
		resp, err = c.Txn(ctx).If(cmps...).Then(puts...).Commit()
		if err != nil {
			continue
		}
		if resp.Succeeded {
			return size, nil
		}
		if attempt > 0 && allExist(ctx, c, layout, from, to) {
			return size, nil
		}
		return 0, fmt.Errorf("some of the keys already exist")
	}
	return 0, err
}

// preloadAttempts bounds the tries of one batch.
const preloadAttempts = 5

// allExist reports whether every key of Events [from, to) is in etcd.
func allExist(ctx context.Context, c *clientv3.Client, layout Layout, from, to int) bool {
	var gets []clientv3.Op
	for i := from; i < to; i++ {
		ev := layout.Event(i)
		gets = append(gets, clientv3.OpGet(eventKey(DefaultPrefix, ev.Namespace, ev.Name), clientv3.WithCountOnly()))
	}
	resp, err := c.Txn(ctx).Then(gets...).Commit()
	if err != nil {
		return false
	}
	for _, r := range resp.Responses {
		if r.GetResponseRange().Count != 1 {
			return false
		}
	}
	return true
}
