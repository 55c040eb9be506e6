// Package expiry is the TTL backstop: it deletes Events that etcd's leases
// keep past their TTL.
//
// # Why
//
// An Event's TTL reaches etcd as a lease (pkg/ttl), and etcd keeps a
// lease's remaining time in its leader's memory only. A new leader, and a
// one-member etcd after a restart, renews every lease to its full TTL (etcd
// #9395, #13294; kubernetes #65497). Lease checkpoints (pkg/etcd) narrow
// that to etcd's checkpoint interval, fixed at 5 minutes in v3.6, and only
// for leases with more than 5 minutes left; they have had bugs of their own
// (etcd #17132). Where leader changes or restarts come more often than a
// TTL, that TTL never ends and the events etcd fills. The backstop does not
// depend on the lessor: it reads an Event's deadline from etcd's revisions
// and its lease's granted TTL, and deletes it once the deadline has passed.
//
// # When an Event was written: the revision clock
//
// Events carry no server-set write time (creationTimestamp is set on create
// only; lastTimestamp, eventTime and the like are the client's, and a
// client's clock must never make the server delete early), and the write may
// come from another replica, before a restart, or from a kube-apiserver
// sharing the events etcd. What every write has is its etcd revision, the
// Event's resourceVersion. So the backstop keeps a clock in etcd itself, one
// key outside the Events prefix (clock.go): samples "by time T, etcd's
// revision had reached R", each taken as etcd's current revision is read and
// timed after the answer. A write at revision R happened no later than the
// time of the first sample whose revision reaches R (writtenBy), so that
// time plus the Event's TTL is never before the Event's true deadline.
// Replicas append samples with a compare-and-swap on the key's revision, one
// per sample period (10s, or the pass interval if shorter) while anything is
// written and none while nothing is; samples are thinned as they age, each
// gap at most its age over 64, and kept as far back as the longest lease a
// replica's classes have or one of its passes has found (older Events are
// dated by the oldest sample kept: later, never earlier), so the key holds a
// few hundred samples (8 KB at two days of writes, TestClockNeverEarly)
// whatever the longest TTL, and dating an Event TTL old is late by at most
// TTL/64 beyond the sample period.
//
// The deadline used is the one etcd would have kept: writtenBy plus the TTL
// etcd granted the Event's lease (TimeToLive's GrantedTTL: the TTL the
// writer chose plus the lease manager's reuse slack, ttl.LeaseSeconds). A
// TTL that a rule lengthened, a rule changed since, another writer's
// --event-ttl: the lease says what the write asked for. An Event written
// again since has a new revision, dated by a later sample.
//
// # Finding due Events without a scan: the index
//
// The watch cache gets one more index (IndexFunc): each Event under its TTL
// class (its rule's TTL) and the bucket of its revision (4096 revisions a
// bucket). Both come from the object alone, as the cache's indexer needs to
// remove an entry. Per class, a cursor walks the buckets in revision order:
// a pass asks the clock for the newest revision due for the class's lease
// TTL (dueThrough: the revision of the newest sample at least that old), and
// reads only the buckets between where the cursor stands and that revision;
// a pass that finds it unmoved reads nothing. The Events it reads are
// checked against etcd in batches (one keys-only transaction per 100:
// revision and lease now), then deleted. An Event whose lease is longer
// than its class's (another writer, a changed rule) is handed to a cursor
// of the class for that lease TTL, at most 8 per class; past that, to a
// longer one, which is later, never earlier. The index costs 51 bytes per
// Event (1319 against 1370 B/Event at 10^5 Events, BenchmarkCacheMemory
// indexes=shipped against indexes=shipped+expiry in pkg/fieldselectors).
// With the watch cache off there is no index, and the backstop stays off
// rather than scan etcd.
//
// # Deleting
//
// Through the storage stack (the cacher's delegator, the etcd health gate,
// the etcd3 store), with the resourceVersion found as precondition: a write
// since wins (storage.Preconditions fails and the Event stays, with its new
// deadline), and an Event already gone (its lease expired after all, or
// another replica's backstop came first) is no error; both are counted in
// event_apiserver_ttl_backstop_races_total. Deletes are rate-limited
// (--event-ttl-backstop-qps), so a backlog after many leader changes drains
// without flooding etcd. Each deletion is counted
// (event_apiserver_ttl_backstop_deletions_total) with how late it came
// (event_apiserver_ttl_backstop_lateness_seconds). History capture sees the
// etcd DELETE as it sees a lease's expiry: the Event's record becomes
// live=false with its deletedAt.
//
// # Bounds
//
// An Event whose lease etcd keeps is deleted at most
// --event-ttl-backstop-interval, plus the sample period, plus TTL/64, after
// its deadline (its last write plus its TTL plus the reuse slack), while a
// replica runs and no backlog holds the rate limit; never before that
// deadline, provided the replicas' clocks agree: a sample's time is its
// writer's clock and the deadline is checked against the deleter's, so a
// deleter whose clock is ahead of a sampler's deletes early by the
// difference (a replica that sees a sample from its future logs it).
//
// # Upstream behaviour relied on
//
//   - etcd: a key's mod revision is the Event's resourceVersion; a lease's
//     GrantedTTL does not change, and revoking or expiring a lease deletes its
//     keys, so a key found with a lease has that lease.
//   - k8s.io/apiserver's cacher: an index function is called on the stored
//     object and again on it to remove it; a list with a field selector
//     that pins an indexed field (SelectionPredicate.MatcherIndex) reads that
//     index bucket alone (watchCache.listLatestRV), and the delegator serves
//     a list at resourceVersion 0 from the cache, or answers 429 while the
//     cache is not ready, never from etcd (CacheDelegator.GetList); a Delete
//     checks Preconditions against the current object and answers a
//     mismatch with an InvalidObj error.
//   - The lease manager grants ttl plus min(5% of ttl,
//     --lease-reuse-duration-seconds) (TestLeaseSeconds in pkg/ttl).
//
// Tests: clock_test.go (dating never early, thinning bounded, the
// compare-and-swap between replicas, restores), backstop_test.go (never
// early: rules, rewrites and foreign leases; buckets in order;
// preconditions; off without the cache), and the integration tests in
// test/integration/events (ttl_backstop_test.go) on a three-member etcd
// changing leader every 30s and on a standalone server restarted every 30s.
package expiry
