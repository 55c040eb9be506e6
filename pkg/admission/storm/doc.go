// Package storm is the admission plugin that keeps an Event storm from
// hurting anyone but the Event writers: per-reporter token buckets (creates
// and updates counted apart), one global bucket for all Event writes, and a
// limit on the size of an Event as stored. An etcd outage is
// pkg/etcdhealth's.
//
// # Answers
//
//   - Over a budget: 429 TooManyRequests with Retry-After (seconds until the
//     bucket has a token, at least 1). client-go's REST client sleeps for
//     Retry-After and sends again, up to 10 times, before its caller sees the
//     error; so tools/record (one goroutine per broadcaster, Events handled in
//     turn) slows down to the budget and its queue of 1000 drops what does not
//     fit, and tools/events (a goroutine per Event) waits per Event. Only
//     after the 10 retries do the recorders get a StatusError, which both drop
//     without a retry of their own. kube-apiserver's EventRateLimit plugin
//     answers 429 without Retry-After, which client-go does not retry at all.
//   - Over --max-event-bytes: 413 RequestEntityTooLarge, like a body over the
//     generic 3 MiB request limit. kube-apiserver has no such check for
//     core/v1, whose message is unbounded: 1.5 to 2 MiB fails in etcd
//     ("etcdserver: request is too large"), more in the etcd client ("trying
//     to send message larger than max"), both answered 500.
//
// # Reporters
//
// A reporter is who says it wrote the Event: reportingController and
// reportingInstance when set (every events.k8s.io/v1 Event, and core/v1
// Events from tools/record, which copies source.component and source.host
// there), else source.component and source.host (older core/v1 writers),
// else the authenticated user. The names are the client's, unbounded in
// core/v1, so the key is a fixed-size hash of them and of the authenticated
// user, and every write also spends its user's own budget, checked first
// (kube's EventRateLimit has a User limit type for this): rotating names
// mints no fresh bursts, and the limiter's memory is bounded in bytes.
// Metrics label reporters by controller name only, at most 100 at once; an
// idle one gives its place to a new one.
//
// # Where it runs
//
// The plugin is registered as EventStormLimit (Register; on by default,
// --disable-admission-plugins=EventStormLimit turns it off) and charges in
// the mutating phase, first in the admission chain's recommended order, so
// a refused write costs no webhook call and no etcd round trip, once per
// request (WithChargeMemo: an update retried on a conflict runs admission
// again; a reinvocation of the mutating plugins does not charge again). A reporter that keeps writing once refused is refused before the
// API handler (WithEarlyRefusal, pinned by TestEarlyRefusal): the
// handler's managedFields pass and the admission chain were most of a
// refusal's cost. It refuses an oversize Event in the validating phase, after the
// strategy's validation (so an invalid Event gets kube-apiserver's 422
// first) and the webhooks, and does not charge it. Reads are never limited. Without --aggregated there is no priority and fairness (its
// configuration lives in kube-apiserver) and the generic server's
// max-in-flight filter applies instead, with separate pools:
// --max-requests-inflight (400) for reads, --max-mutating-requests-inflight
// (200) for writes, watches exempt. A write storm fills only the mutating
// pool, and refused writes leave it within microseconds, so reads keep
// getting through. With --aggregated, priority and fairness runs here and in
// the kube-apiserver in front.
package storm
