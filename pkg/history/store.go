package history

import (
	"context"
	"errors"
	"time"
)

// Deletion records that the Event with UID left etcd at Revision, deleted
// through the API or expired with its lease.
type Deletion struct {
	UID      string
	Revision int64
	At       time.Time
}

// Batch is what capture writes in one transaction. Revision is the etcd
// revision up to which Source is captured once the batch is stored; it never
// moves a source's progress backwards, unless Rewind says so.
type Batch struct {
	Source    string
	Revision  int64
	Versions  []Version
	Deletions []Deletion
	// Gone, after a relist, records the deletions capture could not see.
	Gone *Gone
	// Rewind sets Source's progress to Revision even when it is lower: the
	// revisions it counted went back (kube-apiserver's etcd restored from a
	// backup), and progress past them would stop every later resume.
	Rewind bool
}

// Gone says which Events were in etcd at Revision. Every Event with a
// version at or before Revision that is not Live and has no deletion was
// deleted, unseen, before Revision; it is recorded as deleted At Revision.
// Versions after Revision are untouched: another replica may be ahead.
//
// Revisions and Live are one cluster's: Gone touches only the versions of
// Cluster (ColumnCluster; "" is the server's own).
type Gone struct {
	Cluster  string
	Revision int64
	Live     []string
	At       time.Time
}

// Condition holds when any of Columns equals Value, or with Not, when none
// does. Several columns express the ...OrRelated selectors. With Values
// (a set-based selector's in or notin), any of Values stands for Value.
// With Contains, it holds when the one column (a Searchable one) holds
// Value as a substring, ignoring case (search.go).
type Condition struct {
	Columns  []Column
	Value    string
	Values   []string
	Not      bool
	Contains bool
}

// Cursor is the position after the last row of a page, in the read order
// (LastSeen, then Revision, both descending).
type Cursor struct {
	LastSeen time.Time
	Revision int64
}

// Query selects versions newest first.
type Query struct {
	Conditions []Condition
	// Since and Until bound LastSeen (inclusive, exclusive); zero is open.
	Since, Until time.Time
	// After continues a previous page.
	After *Cursor
	// Through reads the store as of this feed position: versions and ends
	// stored after it are left out. Zero reads all that is committed.
	Through int64
	Limit   int
	// MaxRows, when set, bounds the versions the query may select: List
	// first counts them, reading at most MaxRows+1, and returns
	// ErrTooManyRows beyond.
	MaxRows int
}

// Record is a stored version with what is known of its Event's end.
type Record struct {
	Version
	// DeletedAt is set once the Event left etcd.
	DeletedAt       *time.Time
	DeletedRevision int64
	// Position is the feed position of the record's last change: its
	// version's, or its end's on this version once that is stored.
	// Versions stored before the store kept a feed are at FeedOrigin.
	Position int64
}

// FeedOrigin is the position of a store with no change in its feed yet, and
// of every version stored before stores kept a feed.
const FeedOrigin = 1

// FeedState is where a store's feed stands.
type FeedState struct {
	// Position is the newest change: every change at or below it is
	// committed and readable, from any replica.
	Position int64
	// Floor is the oldest position a reader may resume after: retention
	// removed changes at or below it, so a reader behind it would miss them.
	Floor int64
}

// Change is one entry of the feed: a version newly stored, or the end of
// an Event on one of its versions stored before the end (Ended), whose
// Record then has DeletedAt set; an end is one such change per version,
// each at its own position (the package doc).
type Change struct {
	Record
	Ended bool
}

// ChangeQuery reads the feed from After (exclusive) through Through
// (inclusive, a FeedState.Position read before), in position order.
type ChangeQuery struct {
	After, Through int64
	Conditions     []Condition
	// Since and Until bound the records' LastSeen as in Query.
	Since, Until time.Time
	Limit        int
}

// Stats describe the store's size.
type Stats struct {
	Rows  int64
	Bytes int64
}

// ErrTooManyRows is returned by List for a query that selects more than its
// MaxRows versions.
var ErrTooManyRows = errors.New("the query selects more versions than it may read")

// ErrNotFound is returned by Get for a version the store does not hold.
var ErrNotFound = errors.New("event version not in history")

// Store keeps Event versions. Implementations are safe for concurrent use.
type Store interface {
	// Write stores a batch atomically; versions and deletions already
	// stored are left as they are.
	Write(ctx context.Context, batch Batch) error
	// Progress returns the revision up to which source is captured, and
	// false when nothing was captured yet.
	Progress(ctx context.Context, source string) (int64, bool, error)
	List(ctx context.Context, query Query) ([]Record, error)
	Get(ctx context.Context, namespace, name string, revision int64) (Record, error)
	// Retain deletes the oldest versions, observed before cutoff or beyond
	// maxBytes (0: no size limit), at most batchSize rows per transaction,
	// and returns how many rows it deleted.
	Retain(ctx context.Context, cutoff time.Time, maxBytes int64, batchSize int) (int64, error)
	Stats(ctx context.Context) (Stats, error)
	// Feed returns where the feed stands.
	Feed(ctx context.Context) (FeedState, error)
	// Changes reads the feed; see ChangeQuery and the package doc.
	Changes(ctx context.Context, query ChangeQuery) ([]Change, error)
	// Schema says where the store's schema stands for this server.
	Schema() Schema
	Close() error
}
