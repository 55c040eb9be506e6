package workload

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	eventsv1client "k8s.io/client-go/kubernetes/typed/events/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/record"
)

// Recorders the recorder workload drives.
const (
	// LegacyRecorder is client-go tools/record (core/v1), as kubelet and
	// most controllers use it: a repeat of an Event is a strategic-merge
	// PATCH of count, lastTimestamp and message.
	LegacyRecorder = "record"
	// SeriesRecorder is client-go tools/events (events.k8s.io/v1), as
	// kube-scheduler uses it: the first repeat is a PATCH that starts a
	// series; later repeats only count in the client until the 30-minute
	// heartbeat.
	SeriesRecorder = "events"
)

// RecorderNamespace is where the recorder workload's Events go.
const RecorderNamespace = "recorder"

// RecorderOptions configures Recorder.
type RecorderOptions struct {
	// Recorder is LegacyRecorder or SeriesRecorder.
	Recorder string
	// Clients is how many recorders (one broadcaster and connection each,
	// like separate kubelets) emit at once.
	Clients  int
	Duration time.Duration
	// Pods is how many objects each legacy recorder repeats Events about;
	// default 50.
	Pods int
}

// recorderWindow bounds the Events a recorder has emitted but not yet
// written: client-go broadcasters drop Events beyond a queue of 1000.
const recorderWindow = 100

// Recorder drives client-go's real recorders for Duration, as fast as the
// server answers, and reports the writes (POST and PATCH) per second.
func Recorder(ctx context.Context, t Target, o RecorderOptions) ([]Measurement, error) {
	if o.Pods <= 0 {
		o.Pods = 50
	}
	if err := t.EnsureNamespaces(ctx, RecorderNamespace); err != nil {
		return nil, err
	}
	type result struct {
		c       *requests
		elapsed time.Duration
		err     error
	}
	results := make([]result, o.Clients)
	cpu := t.startCPU()
	var wg sync.WaitGroup
	for w := range o.Clients {
		cs, counter, err := t.client(Protobuf)
		if err != nil {
			return nil, err
		}
		results[w].c = counter
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			switch o.Recorder {
			case LegacyRecorder:
				results[w].err = runLegacyRecorder(ctx, cs.CoreV1(), counter, w, o)
			case SeriesRecorder:
				results[w].err = runSeriesRecorder(ctx, cs.EventsV1(), counter, w, o)
			default:
				results[w].err = fmt.Errorf("unknown recorder %q (want %s or %s)", o.Recorder, LegacyRecorder, SeriesRecorder)
			}
			results[w].elapsed = time.Since(start)
		}()
	}
	wg.Wait()

	var posts, patches, ok, failed int64
	var elapsed time.Duration
	for _, r := range results {
		if r.err != nil {
			return nil, r.err
		}
		posts += r.c.posts.Load()
		patches += r.c.patches.Load()
		ok += r.c.ok.Load()
		failed += r.c.failed.Load()
		elapsed = max(elapsed, r.elapsed)
	}
	name := o.Recorder
	out := []Measurement{
		{Workload: "recorder", Metric: name + " writes", Unit: "writes/s", Value: float64(ok) / elapsed.Seconds(), Better: Higher, Count: ok, Errors: failed},
		{Workload: "recorder", Metric: name + " PATCH share", Unit: "%", Value: 100 * float64(patches) / float64(max(1, posts+patches)), Better: Info, Count: posts + patches},
	}
	if used, measured := cpu.used(); measured && ok > 0 {
		out = append(out, Measurement{Workload: "recorder", Metric: name + " server+etcd CPU", Unit: "ms/write",
			Value: ms(used) / float64(ok), Better: Lower, Count: ok, Errors: failed})
	}
	if used, measured := cpu.etcdUsed(); measured && ok > 0 {
		out = append(out, Measurement{Workload: "recorder", Metric: name + " etcd CPU", Unit: "ms/write",
			Value: ms(used) / float64(ok), Better: Lower, Count: ok, Errors: failed})
	}
	return out, nil
}

// answered is how many of a recorder's requests have come back.
func (c *requests) answered() int64 { return c.ok.Load() + c.failed.Load() + c.notFound.Load() }

// waitAnswered waits until at most window of emitted writes are
// unanswered, or ctx ends.
func waitAnswered(ctx context.Context, c *requests, emitted int64, window int64) {
	for emitted-c.answered() > window && ctx.Err() == nil {
		time.Sleep(time.Millisecond)
	}
}

// drain waits (up to a minute) for every emitted write to be answered.
func drain(ctx context.Context, c *requests, emitted int64) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	waitAnswered(ctx, c, emitted, 0)
}

// runLegacyRecorder is one kubelet whose pods crash-loop: every pod's
// BackOff Event repeats, each repeat a PATCH of its count.
func runLegacyRecorder(ctx context.Context, client typedcorev1.CoreV1Interface, c *requests, w int, o RecorderOptions) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	node := nodeName(1000 + w)
	b := record.NewBroadcaster(record.WithContext(ctx), record.WithCorrelatorOptions(record.CorrelatorOptions{
		// No client-side spam filter: every repeat reaches the server.
		QPS: 1e6, BurstSize: 1 << 30,
	}))
	defer b.Shutdown()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.Events("")})
	rec := b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kubelet", Host: node})

	deadline := time.Now().Add(o.Duration)
	var emitted int64
	for time.Now().Before(deadline) && ctx.Err() == nil {
		for p := 0; p < o.Pods; p++ {
			ref := podRef(RecorderNamespace, fmt.Sprintf("crashloop-%03d-%03d", w, p))
			waitAnswered(ctx, c, emitted, recorderWindow)
			rec.Eventf(&ref, corev1.EventTypeWarning, "BackOff", "Back-off restarting failed container app in pod %s_%s(%s)", ref.Name, ref.Namespace, ref.UID)
			emitted++
		}
	}
	drain(ctx, c, emitted)
	return nil
}

// runSeriesRecorder is one scheduler-like controller reporting on new pods:
// each pod's Event is emitted twice, a create and then the PATCH that makes
// it a series. Batches let every create land before its repeat, as a
// repeat seconds later would (tools/events writes each Event from its own
// goroutine, so a repeat emitted at once could overtake its create).
func runSeriesRecorder(ctx context.Context, client eventsv1client.EventsV1Interface, c *requests, w int, o RecorderOptions) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	b := events.NewBroadcaster(&events.EventSinkImpl{Interface: client})
	defer b.Shutdown()
	if err := b.StartRecordingToSinkWithContext(ctx); err != nil {
		return err
	}
	rec := b.NewRecorder(scheme.Scheme, fmt.Sprintf("bench-controller-%d", w))

	deadline := time.Now().Add(o.Duration)
	var emitted int64
	for batch := 0; time.Now().Before(deadline) && ctx.Err() == nil; batch++ {
		refs := make([]corev1.ObjectReference, recorderWindow/2)
		for i := range refs {
			refs[i] = podRef(RecorderNamespace, fmt.Sprintf("scheduled-%03d-%06d", w, batch*len(refs)+i))
		}
		for range 2 {
			for i := range refs {
				rec.Eventf(&refs[i], nil, corev1.EventTypeNormal, "Scheduled", "Binding", "Successfully assigned %s/%s to %s",
					refs[i].Namespace, refs[i].Name, nodeName(i))
				emitted++
			}
			drain(ctx, c, emitted)
		}
	}
	return nil
}
