package workload

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"golang.org/x/time/rate"
)

// The storm's namespaces: the stormers write into one, the person
// debugging reads the other, so that kube-apiserver's describe (a range
// over the namespace in etcd) measures the load, not a growing namespace.
const (
	StormNamespace    = "storm"
	StormDescribeNS   = "storm-describe"
	stormDescribePod  = "victim"
	stormDescribeGap  = 50 * time.Millisecond
	stormVictimEvents = 10
	// stormMaxWarmUp bounds the wait for the first refusal: at 100 writes
	// a second, ten times what it takes to spend a reporter's default
	// burst of 1000 creates.
	stormMaxWarmUp = 100 * time.Second
)

// StormOptions configures Storm.
type StormOptions struct {
	// Clients are connections of one sick kubelet (one reporter), each
	// with a write in flight at most.
	Clients int
	// Rate is the offered load, creates a second, all clients together.
	Rate int
	// Duration is the measured storm; a warm-up of the same length at the
	// same rate comes first and spends the limiter's bursts.
	Duration time.Duration
	// Refusing says the server has write limits (event-apiserver with its
	// defaults): the warm-up then lasts until the first refusal.
	Refusing bool
	// Measuring, when set, is called as the measured storm starts, and
	// what it returns when it ends (the benchmark's CPU profile).
	Measuring func() (done func())
}

// Storm offers Rate kubelet-like core/v1 creates a second (protobuf) from
// one reporter on Clients connections that ignores Retry-After, as a
// broken node does (refusing must cost the server less than accepting), while
// one person runs `kubectl describe pod` every 50 ms on a pod elsewhere.
// It reports what was accepted and refused (429) per second, the server's
// and etcd's CPU per refusal and per write attempt, and the describe
// latency during the storm. The clients do not retry: each 429 is counted
// once, as the refusal it is.
func Storm(ctx context.Context, t Target, o StormOptions) ([]Measurement, error) {
	if o.Clients <= 0 || o.Rate <= 0 || o.Duration <= 0 {
		return nil, fmt.Errorf("storm: clients, rate and duration must be positive (got %d, %d, %s)", o.Clients, o.Rate, o.Duration)
	}
	if err := t.EnsureNamespaces(ctx, StormNamespace, StormDescribeNS); err != nil {
		return nil, err
	}
	reader, _, err := t.client(JSON)
	if err != nil {
		return nil, err
	}
	// The pod being described, written before the storm spends the
	// budgets.
	for i := range stormVictimEvents {
		ev := kubeletEvent(StormDescribeNS, stormDescribePod, "node-victim", i, time.Now())
		if _, err := reader.CoreV1().Events(StormDescribeNS).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
			return nil, fmt.Errorf("creating the described pod's Events: %w", err)
		}
	}
	clients := make([]*kubernetes.Clientset, o.Clients)
	for i := range clients {
		if clients[i], _, err = t.client(Protobuf); err != nil {
			return nil, err
		}
	}

	limiter := rate.NewLimiter(rate.Limit(o.Rate), max(1, o.Rate/100))
	var accepted, refused, failed atomic.Int64
	var errOnce sync.Once
	var firstErr error
	write := func(w, seq int) {
		// One reporter: the node's kubelet, whatever the connection.
		ns, pod, node := StormNamespace, fmt.Sprintf("storm-pod-%03d-%03d", w, seq%100), "node-sick"
		ev := kubeletEvent(ns, pod, node, seq, time.Now())
		// The REST client directly: the typed client retries a 429 that
		// carries Retry-After, and a storm's refusals must be counted.
		err := clients[w].CoreV1().RESTClient().Post().Namespace(ns).Resource("events").
			Body(ev).MaxRetries(0).Do(ctx).Error()
		switch {
		case err == nil:
			accepted.Add(1)
		case apierrors.IsTooManyRequests(err):
			refused.Add(1)
		default:
			failed.Add(1)
			errOnce.Do(func() { firstErr = err })
		}
	}
	// storm offers the load until stop is closed.
	stop := make(chan struct{})
	var stormers sync.WaitGroup
	for w := range o.Clients {
		stormers.Add(1)
		go func() {
			defer stormers.Done()
			for seq := 0; ; seq++ {
				select {
				case <-stop:
					return
				default:
				}
				if err := limiter.Wait(ctx); err != nil {
					return
				}
				write(w, seq)
			}
		}()
	}
	stopStorm := func() { close(stop); stormers.Wait() }

	// The warm-up: at least Duration, and on a server that refuses, until
	// it has refused a write (its bursts are spent), for up to
	// stormMaxWarmUp; a server that takes everything is measured after
	// Duration.
	warmUpStart := time.Now()
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, stormMaxWarmUp, false, func(context.Context) (bool, error) {
		return time.Since(warmUpStart) >= o.Duration && (refused.Load() > 0 || !o.Refusing), nil
	})
	if err != nil && ctx.Err() != nil {
		stopStorm()
		return nil, ctx.Err()
	}
	klog.InfoS("Storm warmed up", "took", time.Since(warmUpStart).Round(time.Millisecond),
		"accepted", accepted.Load(), "refused", refused.Load())
	accepted.Store(0)
	refused.Store(0)
	failed.Store(0)
	measured := func() {}
	if o.Measuring != nil {
		measured = o.Measuring()
	}
	cpu := t.startCPU()
	start := time.Now()

	lat := &Latencies{}
	var describeFailed int64
	var describeErr error
	deadline := start.Add(o.Duration)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		t0 := time.Now()
		list, err := reader.CoreV1().Events(StormDescribeNS).List(ctx, metav1.ListOptions{
			FieldSelector: fmt.Sprintf("involvedObject.name=%s,involvedObject.namespace=%s,involvedObject.uid=%s",
				stormDescribePod, StormDescribeNS, podUID(StormDescribeNS, stormDescribePod)),
			Limit: describeChunk,
		})
		d := time.Since(t0)
		if err == nil && len(list.Items) != stormVictimEvents {
			err = fmt.Errorf("describe during the storm: %d Events, want %d", len(list.Items), stormVictimEvents)
		}
		if err != nil {
			describeFailed++
			if describeErr == nil {
				describeErr = err
			}
		} else {
			lat.Add(d)
		}
		select {
		case <-ctx.Done():
		case <-time.After(stormDescribeGap):
		}
	}
	elapsed := time.Since(start)
	used, cpuOK := cpu.used()
	serverUsed, serverOK := cpu.serverUsed()
	a, r, f := accepted.Load(), refused.Load(), failed.Load()
	stopStorm()
	measured()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if describeErr != nil {
		klog.InfoS("Describe during the storm failed", "failed", describeFailed, "err", describeErr)
	}
	if firstErr != nil {
		klog.InfoS("Storm writes failed", "failed", f, "err", firstErr)
	}
	if a+r == 0 {
		return nil, errors.New("storm: no write was answered")
	}
	secs := elapsed.Seconds()
	n := a + r
	out := []Measurement{
		{Workload: "storm", Metric: "offered", Unit: "writes/s", Value: float64(a+r+f) / secs, Better: Info, Count: n, Errors: f},
		{Workload: "storm", Metric: "accepted", Unit: "events/s", Value: float64(a) / secs, Better: Info, Count: a, Errors: f},
		{Workload: "storm", Metric: "refused (429)", Unit: "writes/s", Value: float64(r) / secs, Better: Info, Count: r, Errors: f},
		{Workload: "storm", Metric: "describe pod p50 during the storm", Unit: "ms", Value: ms(lat.Percentile(50)), Better: Lower, Count: int64(lat.Len()), Errors: describeFailed},
		{Workload: "storm", Metric: "describe pod p99 during the storm", Unit: "ms", Value: ms(lat.Percentile(99)), Better: Lower, Count: int64(lat.Len()), Errors: describeFailed},
	}
	if cpuOK {
		out = append(out, Measurement{Workload: "storm", Metric: "server+etcd CPU per write answered", Unit: "ms/write",
			Value: ms(used) / float64(n), Better: Lower, Count: n, Errors: f})
	}
	// Per refusal: all the server's CPU over the refusals, so an upper
	// bound (it includes the accepted writes and the describes); etcd is
	// left out, as a refusal never reaches it.
	if serverOK && r > 0 {
		out = append(out, Measurement{Workload: "storm", Metric: "server CPU per refusal", Unit: "ms/write",
			Value: ms(serverUsed) / float64(r), Better: Lower, Count: r, Errors: f})
	}
	return out, nil
}
