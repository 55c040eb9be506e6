package storm

import (
	"sync"
	"sync/atomic"

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
	earlyRefusedTotal = metrics.NewCounter(
		&metrics.CounterOpts{
			Namespace: "event_apiserver",
			Subsystem: "storm",
			Name:      "early_refused_total",
			Help: "Event creates answered 429 before the API handler (WithEarlyRefusal); they are also " +
				"counted in throttled_total.",
			StabilityLevel: metrics.ALPHA,
		},
	)
)

// The gauges are computed at scrape time, after idle reporters have been
// forgotten, so that they fall when traffic stops.
var (
	reportersDesc = metrics.NewDesc("event_apiserver_storm_reporters",
		"Reporters (and users) whose token buckets the storm limiter holds in memory.",
		nil, nil, metrics.ALPHA, "")
	reportersBytesDesc = metrics.NewDesc("event_apiserver_storm_reporters_bytes",
		"Memory the storm limiter's remembered reporters take, in bytes; at most "+
			"--event-rate-limit-max-reporters times a fixed entry size.",
		nil, nil, metrics.ALPHA, "")
)

type limiterCollector struct{ metrics.BaseStableCollector }

func (limiterCollector) DescribeWithStability(ch chan<- *metrics.Desc) {
	ch <- reportersDesc
	ch <- reportersBytesDesc
}

func (limiterCollector) CollectWithStability(ch chan<- metrics.Metric) {
	n, b := sweepCurrent()
	ch <- metrics.NewLazyConstMetric(reportersDesc, metrics.GaugeValue, float64(n))
	ch <- metrics.NewLazyConstMetric(reportersBytesDesc, metrics.GaugeValue, float64(b))
}

// current is the limiter of the last plugin built, the one the gauges read.
var current atomic.Pointer[limiter]

func sweepCurrent() (int, int) {
	if l := current.Load(); l != nil {
		return l.sweep()
	}
	return 0, 0
}

// throttleLimits are the values of throttled_total's limit label.
var throttleLimits = []string{"reporter", "global", "reporter_bytes", "global_bytes", "user"}

// forgetClass deletes the series of a reporter label value that has been
// reclaimed for another name.
func forgetClass(class string) {
	for _, op := range []operation{opCreate, opUpdate} {
		acceptedTotal.Delete(map[string]string{"operation": op.String(), "reporter": class})
		for _, limit := range throttleLimits {
			throttledTotal.Delete(map[string]string{"operation": op.String(), "reporter": class, "limit": limit})
		}
	}
}

var registerOnce sync.Once

func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(acceptedTotal, throttledTotal, oversizeTotal, earlyRefusedTotal)
		legacyregistry.CustomMustRegister(&limiterCollector{})
	})
}
