package workload

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
)

// PreloadOptions configures Preload.
type PreloadOptions struct {
	Endpoints []string
	Layout    Layout
	// From and To: write the store's Events [From, To).
	From, To int
	// Workers is how many transactions are in flight; default 32.
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
			for {
				i := int(next.Add(1) - 1)
				if i >= o.To || ctx.Err() != nil {
					return
				}
				n, err := writeEvent(ctx, c, leases, o.Layout.Event(i))
				if err != nil {
					errc <- fmt.Errorf("preloading event %d: %w", i, err)
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

// writeEvent creates ev in etcd as a server would and returns the size of
// the value written.
func writeEvent(ctx context.Context, c *clientv3.Client, leases *leaser, ev *corev1.Event) (int, error) {
	value, err := storedValue(ev, ev.FirstTimestamp.Time)
	if err != nil {
		return 0, err
	}
	lease, err := leases.get(ctx)
	if err != nil {
		return 0, err
	}
	return len(value), putIfAbsent(ctx, c, eventKey(ev.Namespace, ev.Name), value, lease)
}
