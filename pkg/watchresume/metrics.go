package watchresume

import (
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

const (
	sourceCache = "cache"
	sourceEtcd  = "etcd"
)

// resumesTotal shows how often the cache's window is too short for the
// watches clients resume: a steady "etcd" rate means clients come back later
// than the window (or replicas' caches start after their RVs), each such
// watch costing its own etcd watch as it would on kube-apiserver.
var resumesTotal = metrics.NewCounterVec(
	&metrics.CounterOpts{
		Namespace: "event_apiserver",
		Subsystem: "watch",
		Name:      "resumes_total",
		Help: "Watches started from a resource version without initial events, by where they are served: " +
			"cache, or etcd when the resource version is older than the watch cache's history.",
		StabilityLevel: metrics.ALPHA,
	},
	[]string{"group", "resource", "source"},
)

// listsBeforeReady counts the LISTs served from etcd because the watch
// cache was still filling (Storage.GetList): after a start, and after every
// relist of the cache.
var listsBeforeReady = metrics.NewCounter(
	&metrics.CounterOpts{
		Namespace:      "event_apiserver",
		Subsystem:      "watch_cache",
		Name:           "lists_before_ready_total",
		Help:           "Event LISTs served from etcd because the watch cache was not filled yet.",
		StabilityLevel: metrics.ALPHA,
	},
)

var registerOnce sync.Once

func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(resumesTotal, listsBeforeReady)
	})
}

func recordResume(gr schema.GroupResource, source string) {
	resumesTotal.WithLabelValues(gr.Group, gr.Resource, source).Inc()
}
