// Package checker holds a recorded robustness run (every client operation,
// every watch event, etcd's own revision history of the Events prefix) to
// the guarantees clients build caches on, and reports each broken one with
// the property it broke and the few records that show it.
//
// It checks at the Kubernetes API level what etcd's robustness tests check
// of etcd's watch (go.etcd.io/etcd tests/robustness/validate: ordered,
// unique, atomic, reliable, resumable, bookmarkable), through the watch
// cache, the resume from etcd history and across replicas. It models Events
// as keys whose selector fields (namespace, type, reason) never change after
// create, which the traffic keeps true; a selector is an equality set.
package checker

import (
	"fmt"
	"time"
)

// ChangeType is what a revision did to its key.
type ChangeType string

const (
	Put    ChangeType = "PUT"
	Delete ChangeType = "DELETE"
)

// Revision is one change etcd made under the Events prefix, as a raw etcd
// watch started before the traffic saw it (with the previous value for a
// delete, so that Fields are the deleted object's).
type Revision struct {
	Rev     int64
	Key     string // namespace/name
	Type    ChangeType
	Created bool // a PUT that created the key
	Fields  map[string]string
}

// Compaction is a compaction of etcd's history up to Rev, asked for at At.
type Compaction struct {
	Rev int64
	At  time.Time
}

// OpKind is a client operation.
type OpKind string

const (
	Create OpKind = "create"
	Patch  OpKind = "patch"
	Update OpKind = "update"
	Del    OpKind = "delete"
	List   OpKind = "list"
	Get    OpKind = "get"
)

func (k OpKind) isWrite() bool { return k == Create || k == Patch || k == Update || k == Del }

// Op is one client request (a LIST's pages together) and its outcome.
type Op struct {
	ID      int
	Kind    OpKind
	Replica int
	Key     string // namespace/name; empty for a LIST
	Start   time.Time
	End     time.Time
	// Code is the HTTP status; 0 when the request failed without one.
	Code       int
	Reason     string
	Message    string // the Status's message, or the transport error
	RetryAfter string
	// RV is the written object's resourceVersion (0 for a delete, whose
	// answer is a Status), or the LIST's resourceVersion.
	RV int64
	// LIST only: its scope, whether it was consistent (resourceVersion
	// unset), and every item of every page, key to resourceVersion.
	Namespace  string
	Selector   map[string]string
	Consistent bool
	Pages      int
	Items      map[string]int64
}

// EventType is a watch event's type.
type EventType string

const (
	Added    EventType = "ADDED"
	Modified EventType = "MODIFIED"
	Deleted  EventType = "DELETED"
	Bookmark EventType = "BOOKMARK"
	Error    EventType = "ERROR"
)

// Event is one watch event as the watcher received it.
type Event struct {
	Type EventType
	Key  string
	RV   int64
	// Code and Reason are an ERROR event's Status.
	Code   int
	Reason string
	At     time.Time
}

// Session is one watch request, from its start resourceVersion until the
// stream ended.
type Session struct {
	Replica int
	StartRV int64
	// Relisted: StartRV came from a LIST made after the previous session's
	// 410, not from what the watcher had received.
	Relisted bool
	// Rewound: StartRV is an earlier resourceVersion the watcher received
	// (an event's or a bookmark's), not its last one; what followed it is
	// delivered again, exactly.
	Rewound bool
	Start   time.Time
	End     time.Time
	// Code is the HTTP status of the watch request: 200, or a refusal.
	Code       int
	Reason     string
	Message    string
	RetryAfter string
	Events     []Event
}

// Watcher is one logical watcher (one informer, say), resuming session
// after session.
type Watcher struct {
	Name      string
	Namespace string // "" for all namespaces
	Selector  map[string]string
	Sessions  []Session
}

// Fault is one injected fault, for the report and for excusing requests
// cut by it.
type Fault struct {
	Kind   string
	Target string
	// Replica is the replica a replica fault hit; -1 otherwise.
	Replica int
	Start   time.Time
	End     time.Time
}

// ReplicaKill is the Fault kind whose requests may fail without a Status:
// the process serving them died.
const ReplicaKill = "replica-kill"

// HistoryStore is what one replica's Event history
// (history.eventapiserver.io eventrecords) held at the end: one record per
// Event version.
type HistoryStore struct {
	Replica int
	// Records are the versions held, as key (namespace/name) and the
	// Event's resourceVersion.
	Records []HistoryRecord
	// Relisted: capture found etcd compacted past its revision and read
	// every Event again, which loses the versions replaced meanwhile (as
	// docs/operations.md section 10 says).
	Relisted bool
}

// HistoryRecord is one Event version in a history store.
type HistoryRecord struct {
	Key string
	RV  int64
}

// History is one recorded run.
type History struct {
	Seed int64
	// RequestTimeout is the servers' --request-timeout.
	RequestTimeout time.Duration
	// BaseRev is the etcd revision before any traffic; Revisions holds every
	// change under the Events prefix after it, in order.
	BaseRev     int64
	Revisions   []Revision
	Compactions []Compaction
	Ops         []Op
	Watchers    []Watcher
	Faults      []Fault
	// Histories, when captured, are checked to hold every version etcd
	// held, exactly once.
	Histories []HistoryStore
}

func (r Revision) String() string {
	t := string(r.Type)
	if r.Created {
		t = "PUT(create)"
	}
	return fmt.Sprintf("etcd rev %d %s %s %v", r.Rev, t, r.Key, r.Fields)
}

func (o Op) String() string {
	s := fmt.Sprintf("op %d %s replica=%d", o.ID, o.Kind, o.Replica)
	if o.Key != "" {
		s += " key=" + o.Key
	}
	if o.Kind == List {
		s += fmt.Sprintf(" ns=%q selector=%v consistent=%v pages=%d items=%d", o.Namespace, o.Selector, o.Consistent, o.Pages, len(o.Items))
	}
	s += fmt.Sprintf(" %s..%s (%v) -> %d", o.Start.Format("15:04:05.000"), o.End.Format("15:04:05.000"), o.End.Sub(o.Start).Round(time.Millisecond), o.Code)
	if o.RV != 0 {
		s += fmt.Sprintf(" rv=%d", o.RV)
	}
	if o.Reason != "" || o.Message != "" {
		s += fmt.Sprintf(" %s %q", o.Reason, o.Message)
	}
	if o.RetryAfter != "" {
		s += " Retry-After=" + o.RetryAfter
	}
	return s
}

func (e Event) String() string {
	switch e.Type {
	case Error:
		return fmt.Sprintf("ERROR %d %s", e.Code, e.Reason)
	case Bookmark:
		return fmt.Sprintf("BOOKMARK rv=%d", e.RV)
	}
	return fmt.Sprintf("%s %s rv=%d", e.Type, e.Key, e.RV)
}

func (w *Watcher) sessionHeader(i int) string {
	s := w.Sessions[i]
	how := "resumed"
	switch {
	case i == 0:
		how = "started"
	case s.Relisted:
		how = "relisted then watched"
	case s.Rewound:
		how = "rewound"
	}
	return fmt.Sprintf("watcher %s (ns=%q selector=%v) session %d on replica %d %s from rv=%d at %s, http %d",
		w.Name, w.Namespace, w.Selector, i, s.Replica, how, s.StartRV, s.Start.Format("15:04:05.000"), s.Code)
}

// matches says whether an object with fields is in the scope.
func matches(namespace string, selector map[string]string, fields map[string]string) bool {
	if namespace != "" && fields["metadata.namespace"] != namespace {
		return false
	}
	for k, v := range selector {
		if fields[k] != v {
			return false
		}
	}
	return true
}
