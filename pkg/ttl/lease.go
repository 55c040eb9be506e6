package ttl

// reusePercent is the lease manager's share of a TTL that a lease is reused
// for (k8s.io/apiserver storage/etcd3 newDefaultLeaseManager).
const reusePercent = 0.05

// LeaseSeconds is the TTL etcd grants the lease of a write whose TTL is ttl
// seconds: the lease manager asks for ttl plus its reuse window, the lesser
// of 5% of ttl and reuseSeconds (--lease-reuse-duration-seconds), and hands
// the lease to every write of the window, so an Event's lease ends between
// ttl and ttl+window after its write: the window is the reuse slack an
// Event's TTL carries (storage/etcd3/lease_manager.go GetLease). etcd may
// raise a tiny TTL to its minimum; TimeToLive's GrantedTTL says what it
// granted.
func LeaseSeconds(ttl, reuseSeconds int64) int64 {
	window := int64(reusePercent * float64(ttl))
	if window > reuseSeconds {
		window = reuseSeconds
	}
	return ttl + window
}
