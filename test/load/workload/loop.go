package workload

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// loopResult is what a closed loop did.
type loopResult struct {
	ok, failed int64
	latencies  *Latencies
	elapsed    time.Duration
	// firstErr is the first failure, for the log.
	firstErr error
}

// closedLoop runs op on each of workers goroutines back to back (each
// waits for its answer before the next request, as a recorder's sink
// does) until d has passed, and times every call.
func closedLoop(ctx context.Context, workers int, d time.Duration, op func(ctx context.Context, worker, seq int) error) loopResult {
	r := loopResult{latencies: &Latencies{}}
	var ok, failed atomic.Int64
	var errOnce sync.Once
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := 0; ctx.Err() == nil; seq++ {
				t0 := time.Now()
				// The call gets the parent's lifetime, not the deadline:
				// a request in flight at the end completes.
				err := op(parent, w, seq)
				if err != nil {
					failed.Add(1)
					errOnce.Do(func() { r.firstErr = err })
					continue
				}
				ok.Add(1)
				r.latencies.Add(time.Since(t0))
			}
		}()
	}
	wg.Wait()
	r.elapsed = time.Since(start)
	r.ok, r.failed = ok.Load(), failed.Load()
	return r
}

// rate is operations per second.
func (r loopResult) rate() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return float64(r.ok) / r.elapsed.Seconds()
}
