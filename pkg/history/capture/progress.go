package capture

import (
	"sync"
	"time"

	rpctypes "go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/eventapiserver/event-apiserver/pkg/history"
)

var rpctypesErrCompacted = rpctypes.ErrCompacted

// revisions keeps the two revisions the lag metric compares.
var revisions struct {
	sync.Mutex
	etcd, captured int64
}

// EtcdRevisionSeen records the newest etcd revision capture heard of.
func EtcdRevisionSeen(rev int64) {
	revisions.Lock()
	defer revisions.Unlock()
	revisions.etcd = max(revisions.etcd, rev)
	publishLagLocked()
}

func capturedRevision(rev int64) {
	revisions.Lock()
	defer revisions.Unlock()
	revisions.captured = max(revisions.captured, rev)
	revisions.etcd = max(revisions.etcd, rev)
	publishLagLocked()
}

// rewindRevisions starts the lag metric over at rev after kube-apiserver's
// revisions went back (kube.go, an etcd restored from a backup).
func rewindRevisions(rev int64) {
	revisions.Lock()
	defer revisions.Unlock()
	revisions.captured = rev
	revisions.etcd = rev
	publishLagLocked()
}

func publishLagLocked() {
	history.EtcdRevision.Set(float64(revisions.etcd))
	history.CapturedRevision.Set(float64(revisions.captured))
	history.LagRevisions.Set(float64(revisions.etcd - revisions.captured))
}

// updateLag publishes the age of the oldest change not yet stored.
func updateLag(pending []item) {
	var oldest time.Time
	for _, it := range pending {
		if !it.received.IsZero() {
			oldest = it.received
			break
		}
	}
	if oldest.IsZero() {
		history.LagSeconds.Set(0)
		return
	}
	history.LagSeconds.Set(time.Since(oldest).Seconds())
}

type queueGauge struct {
	sync.Mutex
	bytes int64
}

var queuedBytes queueGauge

func (q *queueGauge) add(n int64) {
	q.Lock()
	defer q.Unlock()
	q.bytes += n
	history.QueueBytes.Set(float64(q.bytes))
}
