package etcdhealth

import (
	"context"
	"errors"
	"math/rand/v2"

	"k8s.io/apiserver/pkg/storage/etcd3/metrics"
)

// Monitors is a getter for metrics.SetStorageMonitorGetter, which feeds
// apiserver_storage_size_bytes on every /metrics scrape. The generic getter
// dials a new etcd client per scrape and waits up to 20 s for it, so while
// etcd is down /metrics hangs (kube-apiserver's too); this one asks etcd on
// the gate's client, and not at all while the gate is closed.
func (g *Gate) Monitors() ([]metrics.Monitor, error) {
	return []metrics.Monitor{sizeMonitor{g}}, nil
}

type sizeMonitor struct{ gate *Gate }

func (m sizeMonitor) Monitor(ctx context.Context) (metrics.StorageMetrics, error) {
	if err := m.gate.Unavailable(); err != nil {
		return metrics.StorageMetrics{}, err
	}
	m.gate.mu.Lock()
	client, endpoints := m.gate.client, m.gate.endpoints
	m.gate.mu.Unlock()
	if client == nil || len(endpoints) == 0 {
		return metrics.StorageMetrics{}, errors.New("the etcd health probe has not started")
	}
	status, err := client.Status(ctx, endpoints[rand.IntN(len(endpoints))])
	if err != nil {
		return metrics.StorageMetrics{}, err
	}
	return metrics.StorageMetrics{Size: status.DbSize}, nil
}

// Close leaves the client to the gate, which closes it when it stops.
func (sizeMonitor) Close() error { return nil }
