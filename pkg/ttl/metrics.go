package ttl

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// leaseGrantsTotal shows lease reuse per TTL class: about one grant per
// class per reuse window (5% of the TTL, at most a minute) at any write
// rate, more only past 1000 Events per lease (--lease-reuse-duration-seconds
// and the lease manager's object limit).
var leaseGrantsTotal = metrics.NewCounterVec(
	&metrics.CounterOpts{
		Namespace:      "event_apiserver",
		Subsystem:      "ttl",
		Name:           "lease_grants_total",
		Help:           "etcd leases granted for Event writes, by TTL class (set by --event-ttl and --event-ttl-rule).",
		StabilityLevel: metrics.ALPHA,
	},
	[]string{"ttl"},
)

var registerOnce sync.Once

func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(leaseGrantsTotal)
	})
}
