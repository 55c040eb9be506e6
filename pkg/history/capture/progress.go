package capture

import (
	"sync"
	"time"
)

// lag keeps the two revisions the lag metric compares, for one source.
type lag struct {
	sync.Mutex
	m              *sourceMetrics
	newest, stored int64
}

// seen records the newest revision capture heard of from the source.
func (l *lag) seen(rev int64) {
	l.Lock()
	defer l.Unlock()
	l.newest = max(l.newest, rev)
	l.publishLocked()
}

func (l *lag) captured(rev int64) {
	l.Lock()
	defer l.Unlock()
	l.stored = max(l.stored, rev)
	l.newest = max(l.newest, rev)
	l.publishLocked()
}

// rewind starts the lag metric over at rev after the source's revisions
// went back (kube.go, an etcd restored from a backup).
func (l *lag) rewind(rev int64) {
	l.Lock()
	defer l.Unlock()
	l.stored = rev
	l.newest = rev
	l.publishLocked()
}

func (l *lag) publishLocked() {
	l.m.newest.Set(float64(l.newest))
	l.m.revision.Set(float64(l.stored))
	l.m.lagRevisions.Set(float64(l.newest - l.stored))
}

// updateLag publishes the age of the oldest change not yet stored.
func (c *Capture) updateLag(pending []*queued) {
	var oldest time.Time
	for _, it := range pending {
		if !it.received.IsZero() {
			oldest = it.received
			break
		}
	}
	if oldest.IsZero() {
		c.metrics.lagSeconds.Set(0)
		return
	}
	c.metrics.lagSeconds.Set(time.Since(oldest).Seconds())
}

// queueGauge is the bytes in one capture's queue.
type queueGauge struct {
	sync.Mutex
	m     *sourceMetrics
	bytes int64
}

func (q *queueGauge) add(n int64) {
	q.Lock()
	defer q.Unlock()
	q.bytes += n
	q.m.queueBytes.Set(float64(q.bytes))
}
