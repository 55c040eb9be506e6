package etcdhealth

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

var (
	availableGauge = metrics.NewGauge(
		&metrics.GaugeOpts{
			Namespace: "event_apiserver",
			Subsystem: "etcd",
			Name:      "available",
			Help: "1 while etcd answers the server's health probe, 0 while requests that need etcd are refused " +
				"with 503 (after two failed probes a second apart).",
			StabilityLevel: metrics.ALPHA,
		},
	)
	writesAvailableGauge = metrics.NewGauge(
		&metrics.GaugeOpts{
			Namespace: "event_apiserver",
			Subsystem: "etcd",
			Name:      "writes_available",
			Help: "1 while requests that need etcd (writes, GETs, consistent LISTs) can be served, 0 before etcd " +
				"first answers, while they are refused with 503, and while etcd's NOSPACE alarm is raised: " +
				"the /readyz check etcd-writes.",
			StabilityLevel: metrics.ALPHA,
		},
	)
	// operation is one of the storage calls: create, update, delete, get,
	// list, current_resource_version, stats. Bounded.
	refusedTotal = metrics.NewCounterVec(
		&metrics.CounterOpts{
			Namespace: "event_apiserver",
			Subsystem: "etcd",
			Name:      "refused_total",
			Help: "Storage calls answered 503 because etcd did not answer: refused while the gate was closed " +
				"(reason closed), ended when it closed (reason outage), failed on an unreachable etcd " +
				"(reason unavailable), or refused by etcd over its space quota (reason nospace).",
			StabilityLevel: metrics.ALPHA,
		},
		[]string{"operation", "reason"},
	)
)

var registerOnce sync.Once

func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(availableGauge, writesAvailableGauge, refusedTotal)
	})
}
