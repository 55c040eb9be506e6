package history

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// The metrics are history's health signal. History never fails /readyz or
// /livez: the Events API does not depend on it, and a probe failing on it
// would take Events down with their history. Alert on the lag instead.
var (
	CapturedRevision = newGauge("capture_revision",
		"The etcd revision up to which Event versions are stored in history.")
	EtcdRevision = newGauge("capture_etcd_revision",
		"The newest etcd revision capture has heard of (watch responses and progress notifications).")
	LagRevisions = newGauge("capture_lag_revisions",
		"etcd revisions seen but not yet stored in history: capture_etcd_revision - capture_revision.")
	LagSeconds = newGauge("capture_lag_seconds",
		"Age of the oldest Event change received from etcd and not yet stored in history; 0 when all are stored.")
	QueueBytes = newGauge("capture_queue_bytes",
		"Bytes of Event changes received and waiting to be written to history.")
	VersionsWritten = newCounter("versions_written_total",
		"Event versions handed to the history store (repeats across replicas or restarts are stored once).")
	DeletionsWritten = newCounter("deletions_written_total",
		"Event deletions and lease expiries handed to the history store.")
	DecodeErrors = newCounter("capture_decode_errors_total",
		"etcd values under the Events prefix that could not be decoded as Events and were not stored.")
	StoreErrors = newCounter("store_errors_total",
		"Failed history store writes; capture retries them and reads no more from etcd meanwhile.")
	Relists = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "event_apiserver", Subsystem: "history", Name: "capture_relists_total",
		Help: "Full reads of all Events: reason start (no stored revision), compacted (etcd compacted " +
			"past the stored revision), expired (kube-apiserver answered 410 Gone to a watch from it) or restored " +
			"(kube-apiserver's resourceVersion stayed below it: its etcd was restored from a backup); " +
			"after compacted, expired or restored, versions written and replaced while capture was away are lost.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"reason"})
	RelistChangedEvents = newCounter("capture_relist_changed_events_total",
		"Events that a relist after a 410 from kube-apiserver found changed since capture's resourceVersion: "+
			"each may have had versions replaced unseen.")
	RelistLostVersions = newCounter("capture_relist_lost_versions_total",
		"Estimate of the Event versions a relist after a 410 from kube-apiserver, or after its etcd was restored, could not store, from the "+
			"Events' counts (exact for core/v1 recorders; Events created and deleted while capture was away are not counted).")
	RelistRewoundRevisions = newCounter("capture_relist_rewound_revisions_total",
		"Revisions history's progress went back by in relists with reason restored: the stored resourceVersion "+
			"less kube-apiserver's when capture gave it up (kube-apiserver's etcd restored from a backup).")
	Rows = newGauge("rows",
		"Event versions in the history store, as of the last retention pass.")
	Bytes = newGauge("bytes",
		"Bytes the history store uses, as of the last retention pass.")
	RetentionDeleted = newCounter("retention_deleted_total",
		"Event versions deleted from history by age (--history-retention) or size (--history-max-bytes).")
)

func newGauge(name, help string) *metrics.Gauge {
	return metrics.NewGauge(&metrics.GaugeOpts{
		Namespace: "event_apiserver", Subsystem: "history", Name: name, Help: help, StabilityLevel: metrics.ALPHA,
	})
}

func newCounter(name, help string) *metrics.Counter {
	return metrics.NewCounter(&metrics.CounterOpts{
		Namespace: "event_apiserver", Subsystem: "history", Name: name, Help: help, StabilityLevel: metrics.ALPHA,
	})
}

var registerOnce sync.Once

// RegisterMetrics adds history's metrics to /metrics.
func RegisterMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(CapturedRevision, EtcdRevision, LagRevisions, LagSeconds, QueueBytes,
			VersionsWritten, DeletionsWritten, DecodeErrors, StoreErrors, Relists, RelistChangedEvents, RelistLostVersions, RelistRewoundRevisions, Rows, Bytes, RetentionDeleted)
	})
}
