// Package eventmetrics counts Events on /metrics, so that Prometheus can
// alert on them and Alertmanager, the router cluster operators already run,
// can send the alerts on: event_apiserver_events_total{source, type, reason,
// regarding_kind, regarding_namespace}, as rhobs/kube-events-exporter's
// kube_events_total counts them from an informer.
//
// # What one count is
//
// One occurrence of an Event, not one write: a new Event adds how many times
// it says it happened (its count, or its series' count, and at least once),
// and a write that raises that number adds the rise. So "Warnings per minute"
// is rate(...[5m]) * 60 whichever recorder wrote them. Counting writes
// instead would count a core/v1 recorder's repeats (one PATCH per occurrence,
// count+1) but miss most of an events.k8s.io/v1 recorder's: client-go's
// tools/events sends the second occurrence and then one update of its series
// every 30 minutes however many happened in between. A write that raises no
// count (a label, a changed message) adds nothing; so does a delete.
//
// Where the counts come from:
//
//   - source="written": the Events API of this server. A create, update or
//     patch through either group is counted once it is stored (the Store's
//     write succeeded, not a dry run), with the Event it replaced at hand
//     (pkg/registry/event/storage). Replicas count what each stored:
//     sum them.
//   - source=<capture source> ("kubernetes"): what history capture reads
//     from a watch of kube-apiserver's Events in history-only mode
//     (capture.KubernetesSource). The watch carries no previous version, so
//     the occurrences an Event had when last seen are remembered by uid, for
//     at most 65,536 Events (seen.go, 2.3 MiB when full); an update of one not remembered
//     (evicted, or older than the process) counts one. A relist is not
//     counted: it reads Events that were there already. Every replica
//     captures everything: take the max across them, not the sum.
//
// # Bounds
//
// Every label value comes from the writer (core/v1 bounds none of them, and
// type is free text there), so a storm of invented reasons must not become a
// storm of series. type is Normal, Warning or "_other". Allow-lists
// (--event-metrics-reasons, --event-metrics-namespaces, --event-metrics-kinds)
// name the values that get series of their own; any other value is "_other"
// ("_" starts no namespace and no Kubernetes kind). Empty values stay empty
// (a cluster-scoped regarding object has no namespace). Values are cut to
// 128 bytes. Then --event-metrics-max-series caps the series held
// (default 10,000): a new combination that finds no room is counted in the
// series {type=<its type>, reason="_other", regarding_kind="_other",
// regarding_namespace="_other"} of its source, for which room is kept, and
// in event_apiserver_events_folded_total. The type's total stays exact.
// Series unchanged for an hour are dropped once the cap is reached (looked
// for at most once a minute), so a storm's invented reasons give their room
// back. Memory is a few hundred bytes a series (TestMemoryPerSeries).
package eventmetrics
