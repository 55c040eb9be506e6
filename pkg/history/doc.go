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
// A Store (package sqlite embedded, one file under --data-dir) answers the
// read-only API of package registry/history: one object's history newest
// first, filtered by the events.k8s.io/v1 field selectors and a time window.
// Retain enforces the age and size limits in bounded batches.
package history
