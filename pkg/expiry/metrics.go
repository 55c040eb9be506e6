package expiry

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

var (
	deletionsTotal = metrics.NewCounter(&metrics.CounterOpts{
		Namespace:      "event_apiserver",
		Subsystem:      "ttl_backstop",
		Name:           "deletions_total",
		Help:           "Events the TTL backstop deleted because they were still in etcd past their TTL and its reuse slack (etcd's lease did not expire them).",
		StabilityLevel: metrics.ALPHA,
	})
	latenessSeconds = metrics.NewHistogram(&metrics.HistogramOpts{
		Namespace: "event_apiserver",
		Subsystem: "ttl_backstop",
		Name:      "lateness_seconds",
		Help: "For each Event the TTL backstop deleted, how long after its deadline (its last write, as the revision clock dates it, " +
			"plus its lease's granted TTL) the deletion came.",
		// From the pass interval up to the days an Event outlives its TTL
		// when etcd renews its lease on every leader change.
		Buckets:        []float64{1, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 3 * 3600, 12 * 3600, 24 * 3600, 7 * 24 * 3600},
		StabilityLevel: metrics.ALPHA,
	})
	racesTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "event_apiserver",
		Subsystem: "ttl_backstop",
		Name:      "races_total",
		Help: "Deletions the TTL backstop gave up because the Event changed first: gone (etcd's lease or another replica deleted it) " +
			"or rewritten (a write since; its new resourceVersion has a later deadline).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"outcome"})
	clockSamples = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace:      "event_apiserver",
		Subsystem:      "ttl_backstop",
		Name:           "clock_samples",
		Help:           "Samples in the revision clock this replica last wrote to etcd.",
		StabilityLevel: metrics.ALPHA,
	})
)

var registerOnce sync.Once

func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(deletionsTotal, latenessSeconds, racesTotal, clockSamples)
	})
}
