// Package history keeps every Event version beyond the Events' TTL.
//
// Capture (package capture) follows the Events prefix in etcd with its own
// watch, not the write path: it sees every version written by this server,
// by other replicas and by a kube-apiserver sharing the events etcd, and
// every delete (API deletes and lease expiries both arrive as DELETE with the
// previous value). It hands batches to a Store, which writes them
// idempotently, keyed by (Event uid, resourceVersion), together with the
// etcd revision captured so far, so a restarted or second replica resumes
// where the store stands and writes nothing twice.
//
// Where etcd is out of reach (a managed cluster; the history-only server),
// capture lists and watches Events through kube-apiserver instead
// (capture/kube.go): the same Store, the same keys, the resourceVersion as
// the revision and its own progress source.
//
// A Store (package sqlite embedded, one file under --data-dir; package
// postgres shared by replicas) answers the read-only API of package
// registry/history: one object's history newest first, filtered by the
// events.k8s.io/v1 field selectors and a time window. Retain enforces the
// age and size limits in bounded batches. Both stores are package sqlstore
// over a dialect: the statements, the feed and the migrations are written
// once there, and Columns (columns.go) says what a filterable column is.
//
// # Schema versions
//
// Each store's schema has a version and forward-only migrations, run under
// a lock when a server opens it (the migration also holds the feed's write
// lock, so no write runs across it). A server finding a newer version than
// it knows writes nothing (Schema.WriteError): not a version, not its
// progress, not a retention pass; every write checks the version under the
// feed's lock, so a replica learns of a newer one at its next batch. It
// still reads, unless a migration since declared that older servers read
// the store wrongly (Schema.ReadError). SchemaCheck fails /readyz meanwhile.
//
// # The feed
//
// A Store also keeps a feed: every version and every Event's end gets a
// position when it is first stored, and eventrecords are watched from a
// position (their resourceVersion). The position is the order of commits
// to the store, not the etcd revision: writers (replicas capturing side by
// side, the etcd and the Kubernetes API capture sources) commit in any
// order, and a slower one may store revision 5 after a faster one stored
// 10, so a revision cursor at 10 would never see 5. A plain database
// sequence fails too: PostgreSQL hands out sequence values at insert and
// commits them in any order, so a reader that saw 11 may later find 10.
//
// The rule that makes positions safe: a writer takes positions only while
// it holds the feed's one write lock (PostgreSQL: the row lock on
// feed_head, taken FOR UPDATE at the start of the batch's transaction;
// SQLite: its single writer lock, taken at BEGIN IMMEDIATE), gives each
// row of the batch the next position, and sets the head (feed.position) to
// the last one in the same transaction, releasing the lock at commit.
//
// Claim: once a reader has read the head H, every change at a position at
// or below H is committed and visible to it, now and later; so a reader
// that delivered everything up to H and resumes after H misses nothing.
// Proof: let a change have position p <= H, written by transaction T. The
// head was H only because some transaction T' set it to H and committed
// (the reader saw it). If T' = T, T committed. Otherwise positions only
// grow from one holder of the lock to the next (each starts from the head
// its predecessor committed), so p <= H means T held the lock before T';
// T' could take the lock only after T released it, at T's commit
// (PostgreSQL releases row locks after the commit is visible to new
// snapshots; SQLite after the WAL commit). So T committed before T'
// read the head, hence before the reader read H, and every later read,
// whatever its snapshot, sees T's rows. Rows are never changed after their
// commit, only removed by retention, which the floor accounts for.
// Readers therefore read the head first, then the changes in (cursor, H].
//
// A version or end stored again (another replica, a resume, the other
// capture source) is a no-op that keeps its first position: the position
// it was offered is a gap, so each change is delivered once. Positions
// belong to one store: a cursor means nothing to another store, so every
// replica sharing a PostgreSQL database shares the feed, and SQLite
// replicas (a file each) do not.
//
// An Event's end changes every record of the Event (each version's live
// and deletedAt), so it is one change per version stored before it, as
// kube-apiserver's watch sends one event per changed object: a watcher
// sees MODIFIED for each, and an informer's store then holds what a fresh
// list returns. Not DELETED: the records stay in history (a list still
// returns them), and an informer must hold what a list holds. Each of those
// changes has a position of its own, so that a watch stopped among them
// resumes after the last it delivered, missing and repeating none: the end
// takes a block of positions when it is stored, one per version of its
// Event stored so far (first_seq to seq), given to the versions in
// revision order, the latest at seq; a record's resourceVersion in a list is
// the same position. A version stored after its Event's end (a slower
// writer) carries the end in its own change. Ends stored before blocks
// (schema version 3) keep their one position, on the latest version.
//
// Retention removes changes. Floor is the newest position it removed (the
// floor is raised in the transaction that removes them, or before), a
// removed version's end counted at its end's last position: a cursor below
// the floor would miss a change, and is refused with 410,
// as kube-apiserver refuses a watch from a compacted revision. Versions
// stored before the store kept a feed are at position FeedOrigin: in lists
// and a watch's initial state, never a change.
package history
