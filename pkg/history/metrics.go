package history

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// The metrics are history's health signal. History never fails /readyz or
// /livez: the Events API does not depend on it, and a probe failing on it
// would take Events down with their history. Alert on the lag instead. The
// one exception is a store whose schema is newer than this server knows
// (SchemaCheck): a deployment error, not an outage.
//
// Capture's metrics carry the capture source's name (label source: "etcd",
// "kubernetes", a member cluster's name), which comes from the server's
// configuration, never from an Event, so each source adds a fixed number of
// series; package capture binds them per source and deletes them when the
// source's capture stops.
var (
	CapturedRevision = newGaugeVec("capture_revision",
		"The revision (etcd's, or kube-apiserver's resourceVersion) up to which the source's Event versions are stored in history.")
	EtcdRevision = newGaugeVec("capture_etcd_revision",
		"The newest revision capture has heard of from the source (watch responses, progress notifications, bookmarks, lists).")
	LagRevisions = newGaugeVec("capture_lag_revisions",
		"Revisions seen but not yet stored in history: capture_etcd_revision - capture_revision.")
	LagSeconds = newGaugeVec("capture_lag_seconds",
		"Age of the oldest Event change received from the source and not yet stored in history; 0 when all are stored.")
	QueueBytes = newGaugeVec("capture_queue_bytes",
		"Bytes of Event changes received from the source and waiting to be written to history.")
	VersionsWritten = newCounterVec("versions_written_total",
		"Event versions handed to the history store (repeats across replicas or restarts are stored once).")
	DeletionsWritten = newCounterVec("deletions_written_total",
		"Event deletions and lease expiries handed to the history store.")
	DecodeErrors = newCounterVec("capture_decode_errors_total",
		"Values from the source that could not be read as Events and were not stored.")
	StoreErrors = newCounterVec("store_errors_total",
		"Failed history store writes (and progress reads) of capture; it retries them and reads no more from the source meanwhile.")
	Relists = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "event_apiserver", Subsystem: "history", Name: "capture_relists_total",
		Help: "Full reads of all Events: reason start (no stored revision), compacted (etcd compacted " +
			"past the stored revision), expired (kube-apiserver answered 410 Gone to a watch from it) or restored " +
			"(kube-apiserver's resourceVersion stayed below it: its etcd was restored from a backup); " +
			"after compacted, expired or restored, versions written and replaced while capture was away are lost.",
		StabilityLevel: metrics.ALPHA,
	}, []string{SourceLabel, "reason"})
	RelistChangedEvents = newCounterVec("capture_relist_changed_events_total",
		"Events that a relist after a 410 from kube-apiserver found changed since capture's resourceVersion: "+
			"each may have had versions replaced unseen.")
	RelistLostVersions = newCounterVec("capture_relist_lost_versions_total",
		"Estimate of the Event versions a relist after a 410 from kube-apiserver, or after its etcd was restored, could not store, from the "+
			"Events' counts (exact for core/v1 recorders; Events created and deleted while capture was away are not counted).")
	RelistRewoundRevisions = newCounterVec("capture_relist_rewound_revisions_total",
		"Revisions history's progress went back by in relists with reason restored: the stored resourceVersion "+
			"less kube-apiserver's when capture gave it up (kube-apiserver's etcd restored from a backup).")
	Rows = newGauge("rows",
		"Event versions in the history store, as of the last retention pass.")
	Bytes = newGauge("bytes",
		"Bytes the history store uses, as of the last retention pass.")
	RetentionDeleted = newCounter("retention_deleted_total",
		"Event versions deleted from history by age (--history-retention) or size (--history-max-bytes).")
	schemaVersion = newGaugeBy("schema", "schema_version",
		"The history store's schema version (schema=\"store\") and the newest this server knows (schema=\"server\"); "+
			"a store ahead of its server is refused its writes (event_apiserver_history_schema_refused).")
	schemaRefused = newGaugeBy("access", "schema_refused",
		"1 while this server refuses to write (access=\"write\") or to read (access=\"read\") the history store, "+
			"whose schema a newer server migrated past what this one knows: a replica left behind by a rolling upgrade.")
)

// SourceLabel names the capture source on capture's metrics.
const SourceLabel = "source"

// published is the last schema state PublishSchema was given, set again
// when the metrics are registered: before, component-base drops values.
var published struct {
	sync.Mutex
	schema *Schema
}

// PublishSchema sets the schema metrics to s.
func PublishSchema(s Schema) {
	published.Lock()
	defer published.Unlock()
	published.schema = &s
	setSchemaMetrics(s)
}

func setSchemaMetrics(s Schema) {
	schemaVersion.WithLabelValues("store").Set(float64(s.Version))
	schemaVersion.WithLabelValues("server").Set(float64(s.Known))
	refused := func(err error) float64 {
		if err != nil {
			return 1
		}
		return 0
	}
	schemaRefused.WithLabelValues("write").Set(refused(s.WriteError()))
	schemaRefused.WithLabelValues("read").Set(refused(s.ReadError()))
}

func newGauge(name, help string) *metrics.Gauge {
	return metrics.NewGauge(&metrics.GaugeOpts{
		Namespace: "event_apiserver", Subsystem: "history", Name: name, Help: help, StabilityLevel: metrics.ALPHA,
	})
}

// newGaugeVec is a gauge per capture source.
func newGaugeVec(name, help string) *metrics.GaugeVec { return newGaugeBy(SourceLabel, name, help) }

// newGaugeBy is a gauge per value of label.
func newGaugeBy(label, name, help string) *metrics.GaugeVec {
	return metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace: "event_apiserver", Subsystem: "history", Name: name, Help: help, StabilityLevel: metrics.ALPHA,
	}, []string{label})
}

// newCounterVec is a counter per capture source.
func newCounterVec(name, help string) *metrics.CounterVec {
	return metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "event_apiserver", Subsystem: "history", Name: name, Help: help, StabilityLevel: metrics.ALPHA,
	}, []string{SourceLabel})
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
			VersionsWritten, DeletionsWritten, DecodeErrors, StoreErrors, Relists, RelistChangedEvents, RelistLostVersions, RelistRewoundRevisions, Rows, Bytes, RetentionDeleted,
			schemaVersion, schemaRefused)
		published.Lock()
		defer published.Unlock()
		if published.schema != nil {
			setSchemaMetrics(*published.schema)
		}
	})
}
