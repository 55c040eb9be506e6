package history

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/eventapiserver/event-apiserver/internal/testbed"
	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// TestHistoryOnlyCaptureCost measures what capture from the Kubernetes API
// costs kube-apiserver and how far it lags: EVENT_APISERVER_HISTORY_BENCH=1
// to run it. kube-apiserver v1.36.3 runs with its defaults (Events not in
// its watch cache, so the one watch is served from etcd's), a history-only
// replica on SQLite beside it, and 4 clients create core/v1 Events back to
// back in rounds of EVENT_APISERVER_HISTORY_BENCH_CREATES (default 2000),
// EVENT_APISERVER_HISTORY_BENCH_ROUNDS rounds (default 10), the replica
// stopped in every other round. Once it restarts it catches up on what the
// round before it missed, so the on rounds serve the watch every version
// once: kube-apiserver's CPU over the on rounds less the off rounds, per
// create, is the watch's cost per Event version. Then, the replica running
// and caught up, one more round samples capture_lag_seconds every 100 ms,
// and the time from the last create until history holds it all.
func TestHistoryOnlyCaptureCost(t *testing.T) {
	b, kube, rounds := startCaptureBench(t, nil)
	replica, creates := b.replica, b.creates
	kubePID := kube.Process().PID()
	cpu := func() time.Duration {
		d, err := testbed.CPUTime(kubePID)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}

	var on, off time.Duration
	var onCreates, offCreates int
	for r := 0; r < rounds; r++ {
		capturing := r%2 == 0
		if capturing && !replica.Proc.Running() {
			replica.Start(t)
		}
		if !capturing {
			if err := replica.Proc.Stop(); err != nil {
				t.Fatal(err)
			}
		}
		before := cpu()
		b.round()
		if capturing {
			b.stored()
			on += cpu() - before
			onCreates += creates
		} else {
			off += cpu() - before
			offCreates += creates
		}
	}
	if !replica.Proc.Running() {
		replica.Start(t)
	}
	b.stored()
	records := len(framework.ListAllEventRecords(t, replica.Client, b.ns, "", 1000))
	lag := b.lagRound()

	// The cost is a difference of on and off rounds: one round has no off.
	if offCreates > 0 {
		onPer := on / time.Duration(onCreates)
		offPer := off / time.Duration(offCreates)
		t.Logf("kube-apiserver CPU per create: %v with capture's watch (catch-up included), %v without, %d rounds of %d creates",
			onPer, offPer, rounds, creates)
		t.Logf("capture's watch: %v of kube-apiserver CPU per Event version (the difference over all %d versions created in the rounds: %v)",
			(on-off)/time.Duration(onCreates+offCreates), onCreates+offCreates, on-off)
	} else {
		t.Logf("kube-apiserver CPU per create: %v with capture's watch; one round, so no round without it to compare (EVENT_APISERVER_HISTORY_BENCH_ROUNDS >= 2)",
			on/time.Duration(onCreates))
	}
	t.Logf("lag round: %s", lag)
	if records != onCreates+offCreates {
		t.Errorf("history holds %d records of the %d Events created in the rounds", records, onCreates+offCreates)
	}
}

// startCaptureBench starts what both capture benchmarks measure, when
// EVENT_APISERVER_HISTORY_BENCH=1: kube-apiserver, a history-only replica
// with the default batches on SQLite, or on the store whose flags store
// starts and returns, and the Events' creators; rounds is
// EVENT_APISERVER_HISTORY_BENCH_ROUNDS (default 10).
func startCaptureBench(t *testing.T, store func(*testing.T) []string) (b *captureBench, kube *framework.KubeAPIServer, rounds int) {
	if os.Getenv("EVENT_APISERVER_HISTORY_BENCH") != "1" {
		t.Skip("a benchmark: set EVENT_APISERVER_HISTORY_BENCH=1")
	}
	framework.Exclusive(t)
	creates, rounds := framework.BenchEnvInt(t, "EVENT_APISERVER_HISTORY_BENCH_CREATES", 2000), framework.BenchEnvInt(t, "EVENT_APISERVER_HISTORY_BENCH_ROUNDS", 10)
	kube = framework.StartKubeAPIServer(t, framework.KubeAPIServerOptions{})
	// The defaults: the last of a repeated flag wins.
	args := []string{"--history-batch-interval=1s", "--history-batch-size=500"}
	if store != nil {
		args = append(args, store(t)...)
	}
	replica := framework.StartHistoryOnlyReplica(t, kube, args)
	return newCaptureBench(t, kube, replica, creates), kube, rounds
}

// captureBench creates core/v1 Events from 4 clients in rounds, in one
// namespace of kube, and follows the history-only replica capturing them.
type captureBench struct {
	t       *testing.T
	replica *framework.HistoryOnlyReplica
	clients []kubernetes.Interface
	ns      string
	creates int
	seq     int
	lastRV  int64
	// With paced: lagRound's creates come from writer, rate a second for
	// window, open loop, rather than from round.
	writer *fleetBenchMember
	rate   int
	window time.Duration
}

func newCaptureBench(t *testing.T, kube *framework.KubeAPIServer, replica *framework.HistoryOnlyReplica, creates int) *captureBench {
	b := &captureBench{t: t, replica: replica, clients: make([]kubernetes.Interface, 4), ns: framework.UniqueName("capture-cost"), creates: creates}
	for i := range b.clients {
		b.clients[i] = kube.Client(t)
	}
	if _, err := b.clients[0].CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: b.ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return b
}

// round creates b.creates Events back to back and returns when the last
// was created.
func (b *captureBench) round() time.Time {
	t := b.t
	t.Helper()
	ctx := context.Background()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	per := b.creates / len(b.clients)
	for w, client := range b.clients {
		wg.Add(1)
		go func(w, from int) {
			defer wg.Done()
			for i := from; i < from+per; i++ {
				now := metav1.Now()
				created, err := client.CoreV1().Events(b.ns).Create(ctx, &corev1.Event{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("e-%d", i)},
					InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: b.ns, Name: fmt.Sprintf("pod-%d", i%500),
						UID: types.UID(fmt.Sprintf("uid-%d", i%500)), APIVersion: "v1"},
					Reason: "Pulled", Message: "Container image \"registry.k8s.io/pause:3.10\" already present on machine",
					Type: corev1.EventTypeNormal, Count: 1, FirstTimestamp: now, LastTimestamp: now,
					Source: corev1.EventSource{Component: "kubelet", Host: fmt.Sprintf("node-%d", w)},
				}, metav1.CreateOptions{})
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
					mu.Unlock()
					return
				}
				rv, _ := strconv.ParseInt(created.ResourceVersion, 10, 64)
				b.lastRV = max(b.lastRV, rv)
				mu.Unlock()
			}
		}(w, b.seq)
		b.seq += per
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	return time.Now()
}

// stored waits until history holds every Event created so far: its
// progress reached the newest one's resourceVersion.
func (b *captureBench) stored() {
	t := b.t
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 5*time.Minute, true, func(context.Context) (bool, error) {
		return b.replica.Metric(t, `event_apiserver_history_capture_revision{source="kubernetes"}`) >= float64(b.lastRV), nil
	})
	if err != nil {
		t.Fatalf("history never reached resourceVersion %d: %v", b.lastRV, err)
	}
}

// paced makes lagRound offer rate creates a second for window, open loop
// (fleetBenchMember.write, as the fleet benchmark's members write, in the
// namespace "load"): a create not sent on time is missed, not delayed, so
// that the rate capture must keep is the same quietly and under load,
// whatever else takes the machine's CPU.
func (b *captureBench) paced(kube *framework.KubeAPIServer, rate int, window time.Duration) {
	t := b.t
	t.Helper()
	b.writer = newFleetBenchMember(t, "capture", kube)
	b.rate, b.window = rate, window
	if _, err := b.writer.client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "load"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// offer runs the paced writer for b.window and returns when its last
// create was answered, with the creates answered and missed.
func (b *captureBench) offer() (last time.Time, created, missed int64) {
	b.writer.mark()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.writer.write(context.Background(), b.rate, stop)
	}()
	time.Sleep(b.window)
	close(stop)
	<-done
	last = time.Now()
	created, missed, _ = b.writer.since()
	b.lastRV = max(b.lastRV, b.writer.newest.Load())
	return last, created, missed
}

// lagRound is one round with capture running and caught up:
// capture_lag_seconds sampled every 100 ms, the creates answered a second
// (and, paced, offered and missed), and the time from the last create
// until history holds it all.
func (b *captureBench) lagRound() lagFigures {
	samples := []float64{}
	sampleCtx, stopSampling := context.WithCancel(context.Background())
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		_ = wait.PollUntilContextCancel(sampleCtx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
			samples = append(samples, b.replica.Metric(b.t, `event_apiserver_history_capture_lag_seconds{source="kubernetes"}`))
			return false, nil
		})
	}()
	f := lagFigures{offered: b.rate}
	start := time.Now()
	var last time.Time
	if b.writer == nil {
		last, f.creates = b.round(), int64(b.creates)
	} else {
		last, f.creates, f.missed = b.offer()
	}
	f.rate = float64(f.creates) / last.Sub(start).Seconds()
	b.stored()
	f.drain = time.Since(last)
	stopSampling()
	<-sampled
	sort.Float64s(samples)
	f.samples = samples
	return f
}

type lagFigures struct {
	// offered is the paced writer's rate a second, 0 for back-to-back
	// creates; missed its creates not sent on time or failed.
	offered         int
	creates, missed int64
	rate            float64
	samples         []float64
	drain           time.Duration
}

func (l lagFigures) pct(p float64) float64 {
	return l.samples[min(len(l.samples)-1, int(p*float64(len(l.samples))))]
}

func (l lagFigures) String() string {
	creates := fmt.Sprintf("%d creates at %.0f/s", l.creates, l.rate)
	if l.offered > 0 {
		creates = fmt.Sprintf("%d creates answered at %.0f/s of %d/s offered (missed %d)", l.creates, l.rate, l.offered, l.missed)
	}
	return fmt.Sprintf("%s; capture_lag_seconds sampled every 100 ms (%d samples): p50 %.2f s, p99 %.2f s, max %.2f s; "+
		"history held every version %v after the last create (default batches: 500 or 1 s)",
		creates, len(l.samples), l.pct(0.5), l.pct(0.99), l.samples[len(l.samples)-1], l.drain.Round(time.Millisecond))
}
