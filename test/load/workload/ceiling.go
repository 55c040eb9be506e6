package workload

import (
	"context"
	"time"

	"k8s.io/klog/v2"

	"github.com/eventapiserver/event-apiserver/internal/testbed"
)

// CeilingOptions configures Ceiling.
type CeilingOptions struct {
	Endpoints []string
	// EtcdPID, when known, lets Ceiling report etcd's CPU per write.
	EtcdPID int
	// Clients is how many writes are in flight, as in Create.
	Clients  int
	Duration time.Duration
}

// Ceiling is the create workload without an API server: Clients writers
// put core/v1 Events straight into etcd with the etcd3 store's create
// transaction, value encoding and lease reuse, over one etcd client (an API
// server has one per resource). It is the most creates this etcd can take
// on this machine, the ceiling for the servers' create throughput.
func Ceiling(ctx context.Context, o CeilingOptions) ([]Measurement, error) {
	events, err := NewEtcdEvents(o.Endpoints, DefaultPrefix)
	if err != nil {
		return nil, err
	}
	defer func() { _ = events.Close() }()
	var bytes, writes int64
	var cpu0 time.Duration
	if o.EtcdPID != 0 {
		cpu0, _ = testbed.CPUTime(o.EtcdPID)
	}
	r := closedLoop(ctx, o.Clients, o.Duration, func(ctx context.Context, w, seq int) error {
		ns, pod, node := createObject(w, seq)
		ev := kubeletEvent(ns, pod, node, seq, time.Now())
		_, n, err := events.Create(ctx, ev)
		if w == 0 && err == nil {
			bytes += int64(n)
			writes++
		}
		return err
	})
	if r.firstErr != nil {
		klog.InfoS("Ceiling writes failed", "failed", r.failed, "err", r.firstErr)
	}
	out := []Measurement{
		{Workload: "etcd-ceiling", Metric: "core/v1 create", Unit: "events/s", Value: r.rate(), Better: Higher, Count: r.ok, Errors: r.failed},
		{Workload: "etcd-ceiling", Metric: "core/v1 create p50", Unit: "ms", Value: ms(r.latencies.Percentile(50)), Better: Lower, Count: r.ok, Errors: r.failed},
		{Workload: "etcd-ceiling", Metric: "core/v1 create p99", Unit: "ms", Value: ms(r.latencies.Percentile(99)), Better: Lower, Count: r.ok, Errors: r.failed},
	}
	if writes > 0 {
		out = append(out, Measurement{Workload: "etcd-ceiling", Metric: "value size", Unit: "bytes", Value: float64(bytes) / float64(writes), Better: Info, Count: writes})
	}
	if o.EtcdPID != 0 && r.ok > 0 {
		if cpu1, err := testbed.CPUTime(o.EtcdPID); err == nil {
			out = append(out, Measurement{Workload: "etcd-ceiling", Metric: "core/v1 create etcd CPU", Unit: "ms/event",
				Value: float64(cpu1-cpu0) / float64(time.Millisecond) / float64(r.ok), Better: Lower, Count: r.ok})
		}
	}
	return out, nil
}
