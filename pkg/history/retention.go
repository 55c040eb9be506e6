package history

import (
	"context"
	"errors"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
)

// Retention bounds the store by age and size.
type Retention struct {
	// MaxAge removes versions observed longer ago; zero keeps them by age.
	MaxAge time.Duration
	// MaxBytes removes the oldest versions while the store is larger; zero: no limit.
	MaxBytes int64
	// Interval between passes.
	Interval time.Duration
	// BatchSize bounds the rows one transaction deletes, so that capture's
	// writes never wait long for the lock.
	BatchSize int
}

// Run enforces the retention until ctx ends, and refreshes the size metrics.
func (r Retention) Run(ctx context.Context, store Store) {
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		cutoff := time.Time{}
		if r.MaxAge > 0 {
			cutoff = time.Now().Add(-r.MaxAge)
		}
		deleted, err := store.Retain(ctx, cutoff, r.MaxBytes, r.BatchSize)
		RetentionDeleted.Add(float64(deleted))
		// A store ahead of this server's schema said so once, when it
		// began refusing (history.Schema).
		if err != nil && ctx.Err() == nil && !errors.Is(err, ErrSchemaNewer) {
			klog.ErrorS(err, "History retention failed", "deleted", deleted)
		} else if deleted > 0 {
			klog.V(2).InfoS("History retention", "deleted", deleted)
		}
		if stats, err := store.Stats(ctx); err == nil {
			Rows.Set(float64(stats.Rows))
			Bytes.Set(float64(stats.Bytes))
		}
	}, r.Interval)
}
