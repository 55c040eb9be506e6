package capture

import (
	"k8s.io/component-base/metrics"

	"github.com/eventapiserver/event-apiserver/pkg/history"
)

// sourceMetrics are one source's series of history's capture metrics
// (pkg/history/metrics.go), labelled with its name.
type sourceMetrics struct {
	source                                                 string
	revision, newest, lagRevisions, lagSeconds, queueBytes metrics.GaugeMetric
	versions, deletions, decodeErrors, storeErrors         metrics.CounterMetric
	changed, lost, rewound                                 metrics.CounterMetric
}

var (
	sourceGauges   = []*metrics.GaugeVec{history.CapturedRevision, history.EtcdRevision, history.LagRevisions, history.LagSeconds, history.QueueBytes}
	sourceCounters = []*metrics.CounterVec{history.VersionsWritten, history.DeletionsWritten, history.DecodeErrors, history.StoreErrors,
		history.RelistChangedEvents, history.RelistLostVersions, history.RelistRewoundRevisions}
)

// newSourceMetrics registers history's metrics (a vector hands out no-op
// series until it is registered) and makes source's series, so that they
// are on /metrics, at zero, before anything happens.
func newSourceMetrics(source string) *sourceMetrics {
	history.RegisterMetrics()
	return &sourceMetrics{
		source:       source,
		revision:     history.CapturedRevision.WithLabelValues(source),
		newest:       history.EtcdRevision.WithLabelValues(source),
		lagRevisions: history.LagRevisions.WithLabelValues(source),
		lagSeconds:   history.LagSeconds.WithLabelValues(source),
		queueBytes:   history.QueueBytes.WithLabelValues(source),
		versions:     history.VersionsWritten.WithLabelValues(source),
		deletions:    history.DeletionsWritten.WithLabelValues(source),
		decodeErrors: history.DecodeErrors.WithLabelValues(source),
		storeErrors:  history.StoreErrors.WithLabelValues(source),
		changed:      history.RelistChangedEvents.WithLabelValues(source),
		lost:         history.RelistLostVersions.WithLabelValues(source),
		rewound:      history.RelistRewoundRevisions.WithLabelValues(source),
	}
}

func (m *sourceMetrics) relisted(reason string) {
	history.Relists.WithLabelValues(m.source, reason).Inc()
}

// delete removes the source's series.
func (m *sourceMetrics) delete() {
	labels := map[string]string{history.SourceLabel: m.source}
	for _, g := range sourceGauges {
		g.Delete(labels)
	}
	for _, c := range sourceCounters {
		c.Delete(labels)
	}
	history.Relists.DeletePartialMatch(labels)
}
