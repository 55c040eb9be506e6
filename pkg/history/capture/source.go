package capture

import (
	"context"
	"errors"
	"fmt"

	"github.com/eventapiserver/event-apiserver/pkg/apis/core"
	"github.com/eventapiserver/event-apiserver/pkg/history"
)

// Source is where one Capture reads Event changes from. Its methods are
// called by the Capture's one reading goroutine, one at a time, so a source
// may keep state between them without a lock. Revisions are the source's
// own (etcd revisions, kube-apiserver resourceVersions); a position is the
// revision up to which the source has fed everything, and a watch or relist
// continues after it.
type Source interface {
	// Name labels the source's metrics and log lines. It comes from the
	// server's configuration, never from what the source serves, and is
	// unique among one server's sources.
	Name() string
	// ProgressKey is the key under which the store keeps the revision the
	// source is captured up to (history.Batch.Source). Captures of one
	// sequence of revisions share it, so that one resumes from what another
	// stored; it may ask the source (etcd's cluster id).
	ProgressKey(ctx context.Context) (string, error)
	// Start returns the position to watch after. With ok, the store holds
	// stored, which the source resumes from; without, the source says
	// where its changes begin, or asks for a relist (RelistError).
	Start(ctx context.Context, stored int64, ok bool) (int64, error)
	// Watch feeds the changes after the position into sink until ctx ends,
	// the sink is full, or the watch ends or fails, and returns the
	// position it fed up to. A RelistError asks for a relist from there.
	Watch(ctx context.Context, sink *Sink, after int64) (int64, error)
	// Relist feeds every Event the source holds at one revision, then that
	// revision (with history.Gone where Events may have left unseen since
	// after), counts what it could not see through sink.Lost, and returns
	// the position to watch after.
	Relist(ctx context.Context, sink *Sink, reason string, after int64) (int64, error)
}

// RelistError asks the Capture to relist its source for Reason, the reason
// label of event_apiserver_history_capture_relists_total.
type RelistError struct {
	Reason string
}

func (e RelistError) Error() string { return "relist (" + e.Reason + ")" }

// Item is one change a source feeds, or a bare revision (a progress
// notification, a bookmark, the end of a relist) that the store records as
// the source's progress once everything fed before it is stored.
type Item struct {
	// Revision is the change's, or the bare revision.
	Revision int64
	Version  *history.Version
	Deletion *history.Deletion
	// Gone ends a relist: the Events at Revision, so that the ones history
	// holds and the source no longer has are marked deleted.
	Gone *history.Gone
	// Rewind moves the source's progress back to Revision: its revisions
	// went back (kube-apiserver's etcd restored from a backup).
	Rewind bool
}

// Sink is what a Source feeds: its Capture's queue, bounded in bytes, the
// history the queue fills, and the source's lag and loss accounting.
type Sink struct {
	c *Capture
}

// Offer queues it if the queue's byte budget allows, without waiting. When
// it does not, the source stops reading its watch: it keeps what capture has
// not read, and the next Watch resumes after what was fed.
func (s *Sink) Offer(ctx context.Context, it Item) bool {
	return s.c.offer(ctx, it)
}

// Enqueue queues it, waiting for room until ctx ends.
func (s *Sink) Enqueue(ctx context.Context, it Item) error {
	return s.c.enqueue(ctx, it)
}

// Seen records the newest revision the source has heard of, which the lag
// in revisions compares with what is stored.
func (s *Sink) Seen(revision int64) {
	s.c.lag.seen(revision)
}

// Lost counts, after a relist, the Events found changed since the position
// it started after, and an estimate of the versions replaced unseen.
func (s *Sink) Lost(changedEvents, versions int64) {
	s.c.metrics.changed.Add(float64(changedEvents))
	s.c.metrics.lost.Add(float64(versions))
}

// Rewound counts the revisions the source's progress is about to go back
// by (Item.Rewind).
func (s *Sink) Rewound(revisions int64) {
	s.c.metrics.rewound.Add(float64(revisions))
}

// DecodeFailed counts a value of the source that is not an Event capture
// can store; the source logs it and leaves it out.
func (s *Sink) DecodeFailed() {
	s.c.metrics.decodeErrors.Inc()
}

// Decode decodes an Event as the Kubernetes storage writes it, and as
// history stores it, into the internal type.
func (s *Sink) Decode(value []byte) (*core.Event, error) {
	obj, _, err := s.c.cfg.Decoder.Decode(value, nil, &core.Event{})
	if err != nil {
		return nil, err
	}
	event, ok := obj.(*core.Event)
	if !ok {
		return nil, fmt.Errorf("decoded %T, not an Event", obj)
	}
	return event, nil
}

// Newest is the newest version history holds of the Event namespace/name
// in the source's cluster, which a relist compares with what it lists to estimate what it lost.
func (s *Sink) Newest(ctx context.Context, namespace, name string) (history.Record, bool, error) {
	records, err := s.c.cfg.Store.List(ctx, history.Query{
		Conditions: []history.Condition{
			{Columns: []history.Column{history.ColumnNamespace}, Value: namespace},
			{Columns: []history.Column{history.ColumnName}, Value: name},
			{Columns: []history.Column{history.ColumnCluster}, Value: s.c.cfg.Cluster},
		},
		Limit: 1,
	})
	if err != nil || len(records) == 0 {
		return history.Record{}, false, err
	}
	return records[0], true, nil
}

// relistReason is the reason of a RelistError in err, if any.
func relistReason(err error) (string, bool) {
	var r RelistError
	if errors.As(err, &r) {
		return r.Reason, true
	}
	return "", false
}
