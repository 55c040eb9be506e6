package workload

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

// APIs an Event can be written through.
const (
	CoreV1   = "core/v1"
	EventsV1 = "events.k8s.io/v1"
)

// CreateNamespaces are the namespaces the create workload writes into.
var CreateNamespaces = []string{"create-0", "create-1", "create-2", "create-3"}

// CreateOptions configures Create.
type CreateOptions struct {
	// API is CoreV1 (kubelet-like Events) or EventsV1 (scheduler-like).
	API string
	// ContentType is Protobuf or JSON.
	ContentType string
	// Clients is how many clients create back to back, each on its own
	// connection.
	Clients  int
	Duration time.Duration
}

// Create has Clients clients create recorder-like Events, each waiting for
// its answer before the next (as a recorder's sink does), for Duration.
// It reports creates per second, their latency, and the server's and
// etcd's CPU time per create.
func Create(ctx context.Context, t Target, o CreateOptions) ([]Measurement, error) {
	if err := t.EnsureNamespaces(ctx, CreateNamespaces...); err != nil {
		return nil, err
	}
	clients := make([]*kubernetes.Clientset, o.Clients)
	for i := range clients {
		cs, _, err := t.client(o.ContentType)
		if err != nil {
			return nil, err
		}
		clients[i] = cs
	}
	var op func(ctx context.Context, w, seq int) error
	switch o.API {
	case CoreV1:
		op = func(ctx context.Context, w, seq int) error {
			ns, pod, node := createObject(w, seq)
			ev := kubeletEvent(ns, pod, node, seq, time.Now())
			_, err := clients[w].CoreV1().Events(ns).Create(ctx, ev, metav1.CreateOptions{})
			return err
		}
	case EventsV1:
		op = func(ctx context.Context, w, seq int) error {
			ns, pod, node := createObject(w, seq)
			ev := schedulerEvent(ns, pod, node, time.Now())
			_, err := clients[w].EventsV1().Events(ns).Create(ctx, ev, metav1.CreateOptions{})
			return err
		}
	default:
		return nil, fmt.Errorf("unknown API %q (want %s or %s)", o.API, CoreV1, EventsV1)
	}

	cpu := t.startCPU()
	r := closedLoop(ctx, o.Clients, o.Duration, op)
	if r.firstErr != nil {
		klog.InfoS("Create failed", "api", o.API, "contentType", o.ContentType, "failed", r.failed, "err", r.firstErr)
	}
	name := o.API + " " + o.ContentType
	out := []Measurement{
		{Workload: "create", Metric: name, Unit: "events/s", Value: r.rate(), Better: Higher, Count: r.ok, Errors: r.failed},
		{Workload: "create", Metric: name + " p50", Unit: "ms", Value: ms(r.latencies.Percentile(50)), Better: Lower, Count: r.ok, Errors: r.failed},
		{Workload: "create", Metric: name + " p99", Unit: "ms", Value: ms(r.latencies.Percentile(99)), Better: Lower, Count: r.ok, Errors: r.failed},
	}
	if used, ok := cpu.used(); ok && r.ok > 0 {
		out = append(out, Measurement{Workload: "create", Metric: name + " server+etcd CPU", Unit: "ms/event",
			Value: ms(used) / float64(r.ok), Better: Lower, Count: r.ok, Errors: r.failed})
	}
	if used, ok := cpu.etcdUsed(); ok && r.ok > 0 {
		out = append(out, Measurement{Workload: "create", Metric: name + " etcd CPU", Unit: "ms/event",
			Value: ms(used) / float64(r.ok), Better: Lower, Count: r.ok, Errors: r.failed})
	}
	return out, nil
}

// createObject is the namespace, pod and node of worker w's seq-th create:
// each worker is a node reporting on its own 100 pods.
func createObject(w, seq int) (ns, pod, node string) {
	p := seq % 100
	return CreateNamespaces[(w+p)%len(CreateNamespaces)], fmt.Sprintf("create-pod-%03d-%03d", w, p), nodeName(w)
}
