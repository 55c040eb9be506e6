// Package ttl chooses how long each Event lives, and keeps the etcd leases
// that carry those TTLs few.
//
// kube-apiserver has one --event-ttl, applied by the Event registry's
// TTLFunc on every create and update (pkg/registry/core/event). Here
// --event-ttl-rule flags select another TTL by the Event's type, reason and
// reporting controller (rules.go); Rules.TTLFunc is the Store's TTLFunc, so
// every write, series heartbeats included, restarts the TTL of the Event's
// own rule.
//
// The TTL reaches etcd as a lease. k8s.io/apiserver's etcd3 store grants them
// through a lease manager that keeps a single lease and hands it to every
// write whose TTL ends within the lease's reuse window
// (storage/etcd3/lease_manager.go GetLease); two TTLs written in turn would
// each miss it and grant a lease per write. Rules.NewRawStorage therefore
// builds one etcd3 store, with its own lease manager, per distinct TTL, over
// one shared etcd client, and a router under the watch cache sends each
// create and update to the store of its TTL, everything else to the store
// the generic factory builds (router.go). TestRouterLeases pins the
// difference: 60 writes of alternating TTLs hold 60 leases through one
// store, 2 through the router.
package ttl
