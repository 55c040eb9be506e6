// Package capture copies every Event version from where Events live into a
// history store. It is not on the write path (a create never waits for
// history): it follows a Source with a watch of its own, from the revision
// the store says is captured.
//
// A Capture is one loop over one Source, written once for every source
// (capture.go): changes go through a queue bounded in bytes to a writer that
// stores them in batches (by count or time), each batch with the revision it
// completes, in one transaction. When the queue is full the source stops
// reading and resumes once the writer catches up: the source keeps what
// capture has not read, memory stays bounded, nothing is dropped. When the
// store fails, the writer retries with backoff and the queue fills: the
// Events API goes on. The loop reads the source's progress from the store,
// asks the source where to start, watches, and relists when the source asks
// it to; it keeps the lag metrics and the readiness. Every metric it keeps
// is labelled with the source's name (history.SourceLabel).
//
// Two sources:
//
//   - EtcdSource (etcd.go) watches the Events prefix of the events etcd, with
//     the previous value of each key: it sees what this server, other
//     replicas and a kube-apiserver sharing the events etcd write, and every
//     delete, whether through the API or by lease expiry. A new history
//     starts from etcd's first revision while etcd still holds them all: the
//     server takes writes before capture starts, and a version replaced
//     meanwhile is in etcd's history only. When etcd has compacted past where
//     capture would start, it reads the whole prefix at one revision and
//     watches from there (a relist): versions written and replaced while
//     capture was away and compacted since are lost, which the log line and
//     event_apiserver_history_capture_relists_total{reason="compacted"} say.
//   - KubernetesSource (kube.go) lists and watches Events through
//     kube-apiserver's API, for the history-only server: one list, then a
//     watch with bookmarks from the stored resourceVersion, and a relist on
//     410 Gone, or when kube-apiserver's etcd was restored behind it, whose
//     losses are estimated and counted.
//
// # Adding a source
//
// A source is a type that implements Source (source.go); nothing in the loop
// changes. It names itself (Name: the metrics' source label, from
// configuration), says under which key the store keeps its progress
// (ProgressKey: sources whose revisions are one sequence share one, so a
// replica resumes from what another stored), where to start (Start: from the
// stored revision, from its first revision, or by asking for a relist),
// follows its changes into the Sink (Watch: Offer until the queue is full,
// then Enqueue what it already holds and return), and relists (Relist: every
// Event at one revision, then that revision with the Events found, counting
// what was lost through Sink.Lost). Revisions are the source's own and must
// grow with each change: the store orders and resumes by them. The server
// starts one Capture per source (apiserver.HistoryConfig.Sources), each with
// its own queue, all writing into one store; a source that holds
// connections implements io.Closer and is closed once its Capture stopped.
// A member cluster of a fleet is a KubernetesSource with the cluster's
// client, its name and a progress key of its own.
package capture
