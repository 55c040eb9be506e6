package workload

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

// WatchNamespace is where the watch workload writes.
const WatchNamespace = "watch"

// WatchOptions configures Watch.
type WatchOptions struct {
	// Selectors is how many watchers follow one pod each, as
	// `kubectl events --for pod/x --watch` does: namespace-scoped, with
	// the field selector involvedObject.kind=Pod,...,involvedObject.name=x.
	Selectors int
	// All is how many watchers follow every Event of every namespace, as an
	// event exporter's informer does.
	All int
	// Rate is how many Events a second are written (round-robin over the
	// selector watchers' pods), for Duration.
	Rate     int
	Duration time.Duration
	// Connections is how many connections the watchers share; default 10.
	Connections int
}

// watchWriters is how many goroutines share the write rate.
const watchWriters = 8

// Watch writes Events at Rate for Duration twice: first with no watcher
// open, then with the watchers open. It reports the time from the start of
// each create to its receipt by each watcher (p50, p99, apart for selector
// and all-namespace watchers), the server's and etcd's CPU time per
// delivered Event, and that CPU time less what the creates cost alone
// (the first pass): the cost of fanning Events out to watchers.
func Watch(ctx context.Context, t Target, o WatchOptions) ([]Measurement, error) {
	if o.Connections <= 0 {
		o.Connections = 10
	}
	if o.Rate <= 0 {
		return nil, fmt.Errorf("watch rate must be positive")
	}
	if err := t.EnsureNamespaces(ctx, WatchNamespace); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	writer, _, err := t.client(Protobuf)
	if err != nil {
		return nil, err
	}
	// The same writes with no watcher open: what the server and etcd spend
	// on the creates alone, to tell the watchers' cost apart.
	baseCPU := t.startCPU()
	baseCreated, baseFailed := writeAtRate(ctx, writer, o, nil)
	baseUsed, _ := baseCPU.used()

	list, err := writer.CoreV1().Events(WatchNamespace).List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return nil, fmt.Errorf("listing for a resourceVersion: %w", err)
	}
	rv := list.ResourceVersion

	// kubectl watches in JSON; informers in protobuf.
	selectorConns, err := watchClients(t, JSON, o.Connections)
	if err != nil {
		return nil, err
	}
	allConns, err := watchClients(t, Protobuf, o.Connections)
	if err != nil {
		return nil, err
	}
	var sent sync.Map // event name -> time.Time its create started
	selLat, allLat := &Latencies{}, &Latencies{}
	var delivered, closedEarly atomic.Int64
	var watchers []watch.Interface
	defer func() {
		for _, w := range watchers {
			w.Stop()
		}
	}()
	var wg sync.WaitGroup
	open := func(cs kubernetes.Interface, ns, selector string, lat *Latencies) error {
		w, err := cs.CoreV1().Events(ns).Watch(ctx, metav1.ListOptions{FieldSelector: selector, ResourceVersion: rv})
		if err != nil {
			return fmt.Errorf("watch %q: %w", selector, err)
		}
		watchers = append(watchers, w)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for e := range w.ResultChan() {
				if e.Type != watch.Added {
					continue
				}
				ev, ok := e.Object.(*corev1.Event)
				if !ok {
					continue
				}
				if at, ok := sent.Load(ev.Name); ok {
					lat.Add(time.Since(at.(time.Time)))
					delivered.Add(1)
				}
			}
			if ctx.Err() == nil {
				closedEarly.Add(1)
			}
		}()
		return nil
	}
	for i := range o.Selectors {
		if err := open(selectorConns[i%len(selectorConns)], WatchNamespace, eventsForSelector("", watchPod(i), ""), selLat); err != nil {
			return nil, err
		}
	}
	for i := range o.All {
		if err := open(allConns[i%len(allConns)], "", "", allLat); err != nil {
			return nil, err
		}
	}

	cpu := t.startCPU()
	created, failed := writeAtRate(ctx, writer, o, &sent)

	perEvent := int64(o.All)
	if o.Selectors > 0 {
		perEvent++
	}
	want := created * perEvent
	deadline := time.Now().Add(30 * time.Second)
	for delivered.Load() < want && time.Now().Before(deadline) && closedEarly.Load() == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	used, measured := cpu.used()
	got := delivered.Load()
	errs := failed + baseFailed + closedEarly.Load() + max(0, want-got)
	if errs > 0 {
		klog.InfoS("Watch workload incomplete", "createFailures", failed+baseFailed, "watchesClosedEarly", closedEarly.Load(), "delivered", got, "want", want)
	}
	cancel()
	for _, w := range watchers {
		w.Stop()
	}
	wg.Wait()
	watchers = nil

	out := []Measurement{
		{Workload: "watch", Metric: "delivered", Unit: "events", Value: float64(got), Better: Info, Count: got, Errors: errs},
	}
	if o.Selectors > 0 {
		n := int64(selLat.Len())
		out = append(out,
			Measurement{Workload: "watch", Metric: fmt.Sprintf("%d selector watchers p50", o.Selectors), Unit: "ms", Value: ms(selLat.Percentile(50)), Better: Lower, Count: n, Errors: errs},
			Measurement{Workload: "watch", Metric: fmt.Sprintf("%d selector watchers p99", o.Selectors), Unit: "ms", Value: ms(selLat.Percentile(99)), Better: Lower, Count: n, Errors: errs})
	}
	if o.All > 0 {
		n := int64(allLat.Len())
		out = append(out,
			Measurement{Workload: "watch", Metric: fmt.Sprintf("%d all-namespace watchers p50", o.All), Unit: "ms", Value: ms(allLat.Percentile(50)), Better: Lower, Count: n, Errors: errs},
			Measurement{Workload: "watch", Metric: fmt.Sprintf("%d all-namespace watchers p99", o.All), Unit: "ms", Value: ms(allLat.Percentile(99)), Better: Lower, Count: n, Errors: errs})
	}
	if measured && got > 0 {
		out = append(out, Measurement{Workload: "watch", Metric: "server+etcd CPU", Unit: "ms/delivery",
			Value: ms(used) / float64(got), Better: Lower, Count: got, Errors: errs})
		if baseCreated > 0 {
			// What the creates themselves cost, measured without watchers,
			// taken out: the cost of fanning Events out to the watchers.
			perCreate := float64(baseUsed) / float64(baseCreated)
			fanOut := (float64(used) - perCreate*float64(created)) / float64(got)
			out = append(out,
				Measurement{Workload: "watch", Metric: "server+etcd CPU per create, no watchers", Unit: "ms/event",
					Value: perCreate / float64(time.Millisecond), Better: Info, Count: baseCreated, Errors: baseFailed},
				Measurement{Workload: "watch", Metric: "fan-out CPU (over the creates)", Unit: "ms/delivery",
					Value: fanOut / float64(time.Millisecond), Better: Lower, Count: got, Errors: errs})
		}
	}
	return out, nil
}

func watchPod(i int) string { return fmt.Sprintf("watch-pod-%04d", i) }

// watchClients makes n clients for watchers, each on its own connection.
func watchClients(t Target, contentType string, n int) ([]kubernetes.Interface, error) {
	out := make([]kubernetes.Interface, n)
	for i := range out {
		cs, _, err := t.clientWithTimeout(contentType, 0)
		if err != nil {
			return nil, err
		}
		out[i] = cs
	}
	return out, nil
}

// writeAtRate creates kubelet-like Events about the watched pods at
// o.Rate for o.Duration, recording in sent (when not nil) when each create
// started.
func writeAtRate(ctx context.Context, writer kubernetes.Interface, o WatchOptions, sent *sync.Map) (created, failed int64) {
	var ok, bad, seq atomic.Int64
	ticks := make(chan struct{}, o.Rate)
	go func() {
		defer close(ticks)
		interval := time.Second / time.Duration(o.Rate)
		start := time.Now()
		for n := 0; ; n++ {
			next := start.Add(time.Duration(n) * interval)
			if next.Sub(start) >= o.Duration || ctx.Err() != nil {
				return
			}
			time.Sleep(time.Until(next))
			ticks <- struct{}{}
		}
	}()
	var wg sync.WaitGroup
	for range watchWriters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range ticks {
				s := int(seq.Add(1) - 1)
				pod := watchPod(s % max(1, o.Selectors))
				ev := kubeletEvent(WatchNamespace, pod, nodeName(s%100), s, time.Now())
				if sent != nil {
					sent.Store(ev.Name, time.Now())
				}
				if _, err := writer.CoreV1().Events(WatchNamespace).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
					bad.Add(1)
					if sent != nil {
						sent.Delete(ev.Name)
					}
					klog.V(2).InfoS("Watch workload create failed", "err", err)
					continue
				}
				ok.Add(1)
			}
		}()
	}
	wg.Wait()
	return ok.Load(), bad.Load()
}
