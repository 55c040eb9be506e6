package storm

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// Labels are bounded: operation is create or update, reporter is a
// controller name from a set of at most maxClasses (never an instance or a
// host), limit is reporter or global.
var (
	acceptedTotal = metrics.NewCounterVec(
		&metrics.CounterOpts{
			Namespace:      "event_apiserver",
			Subsystem:      "storm",
			Name:           "accepted_total",
			Help:           "Event writes the storm limiter let through, by operation and reporting controller.",
			StabilityLevel: metrics.ALPHA,
		},
		[]string{"operation", "reporter"},
	)
	throttledTotal = metrics.NewCounterVec(
		&metrics.CounterOpts{
			Namespace: "event_apiserver",
			Subsystem: "storm",
			Name:      "throttled_total",
			Help: "Event writes answered 429 by the storm limiter, by operation, reporting controller and the " +
				"limit that was reached: reporter (its own budget) or global.",
			StabilityLevel: metrics.ALPHA,
		},
		[]string{"operation", "reporter", "limit"},
	)
	oversizeTotal = metrics.NewCounterVec(
		&metrics.CounterOpts{
			Namespace:      "event_apiserver",
			Subsystem:      "storm",
			Name:           "oversize_total",
			Help:           "Event writes refused with 413 because the Event would be over --max-event-bytes when stored.",
			StabilityLevel: metrics.ALPHA,
		},
		[]string{"operation"},
	)
	reportersGauge = metrics.NewGauge(
		&metrics.GaugeOpts{
			Namespace:      "event_apiserver",
			Subsystem:      "storm",
			Name:           "reporters",
			Help:           "Reporters whose token buckets the storm limiter holds in memory.",
			StabilityLevel: metrics.ALPHA,
		},
	)
)

var registerOnce sync.Once

func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(acceptedTotal, throttledTotal, oversizeTotal, reportersGauge)
	})
}
