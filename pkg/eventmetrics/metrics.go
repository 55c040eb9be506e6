package eventmetrics

import (
	"sync"
	"sync/atomic"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

var (
	eventsDesc = metrics.NewDesc("event_apiserver_events_total",
		"Event occurrences, by source (written: stored through this server's Events API; a capture source's "+
			"name, e.g. kubernetes: read by history capture from kube-apiserver, which every replica does), type, "+
			"reason, regarding object's kind and namespace. One count is one occurrence: a new Event adds its "+
			"count (or its series' count), an update adds how much it raised it, so rate() is Events happening "+
			"per second whichever recorder wrote them. Values outside the --event-metrics-* allow-lists, and new "+
			"series past --event-metrics-max-series, are counted as _other.",
		[]string{"source", "type", "reason", "regarding_kind", "regarding_namespace"}, nil, metrics.ALPHA, "")
	foldedDesc = metrics.NewDesc("event_apiserver_events_folded_total",
		"Event occurrences that --event-metrics-max-series kept from a series of their own in "+
			"event_apiserver_events_total: counted there with reason, regarding_kind and regarding_namespace _other.",
		[]string{"source"}, nil, metrics.ALPHA, "")
	seriesDesc = metrics.NewDesc("event_apiserver_events_series",
		"Series of event_apiserver_events_total held, at most --event-metrics-max-series.",
		nil, nil, metrics.ALPHA, "")
)

// collector reads the Counter at scrape time: its series are its own map,
// not a CounterVec's, so that the cap bounds one structure and dropping
// idle series is a map delete.
type collector struct {
	metrics.BaseStableCollector
	counter func() *Counter
}

func (*collector) DescribeWithStability(ch chan<- *metrics.Desc) {
	ch <- eventsDesc
	ch <- foldedDesc
	ch <- seriesDesc
}

func (col *collector) CollectWithStability(ch chan<- metrics.Metric) {
	c := col.counter()
	if c == nil {
		return
	}
	type sample struct {
		key
		count float64
	}
	c.mu.Lock()
	samples := make([]sample, 0, len(c.series))
	for k, v := range c.series {
		samples = append(samples, sample{k, v.count})
	}
	folded := make(map[string]float64, len(c.folded))
	for source, n := range c.folded {
		folded[source] = n
	}
	c.mu.Unlock()

	for _, s := range samples {
		ch <- metrics.NewLazyConstMetric(eventsDesc, metrics.CounterValue, s.count, s.source, s.typ, s.reason, s.kind, s.namespace)
	}
	for source, n := range folded {
		ch <- metrics.NewLazyConstMetric(foldedDesc, metrics.CounterValue, n, source)
	}
	ch <- metrics.NewLazyConstMetric(seriesDesc, metrics.GaugeValue, float64(len(samples)))
}

// shown is the Counter /metrics shows.
var (
	shown        atomic.Pointer[Counter]
	registerOnce sync.Once
)

func register(c *Counter) {
	shown.Store(c)
	registerOnce.Do(func() {
		legacyregistry.CustomMustRegister(&collector{counter: shown.Load})
	})
}

// Collector collects c alone, for a registry of one's own; New already
// shows c on the legacy registry /metrics serves.
func (c *Counter) Collector() metrics.StableCollector {
	return &collector{counter: func() *Counter { return c }}
}
