package integration

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"

	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// soakPlan is how hard and how long the soak test pushes.
type soakPlan struct {
	reporters int
	rate      int // Events a second per reporter
	load      time.Duration
	cycles    int
}

const soakTTL = 10 * time.Second

// soakPlanFromEnv is the short soak by default and the long one with
// EVENT_APISERVER_SOAK=1:
//
//	EVENT_APISERVER_SOAK=1 go test ./test/integration -run TestSoak -v -timeout 30m
func soakPlanFromEnv() (soakPlan, string) {
	if os.Getenv("EVENT_APISERVER_SOAK") == "1" {
		return soakPlan{reporters: 50, rate: 20, load: 2 * time.Minute, cycles: 3}, "long"
	}
	return soakPlan{reporters: 20, rate: 20, load: 20 * time.Second, cycles: 2}, "short"
}

// memorySample is the server's memory at one moment.
type memorySample struct {
	rss  int64 // VmRSS
	heap int64 // go_memstats_heap_inuse_bytes
	live int64 // go_gc_heap_live_bytes: live heap at the last GC
}

func (m memorySample) String() string {
	return fmt.Sprintf("RSS %s, heap in use %s, live heap %s", mibString(m.rss), mibString(m.heap), mibString(m.live))
}

func mibString(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// memoryProbe reads a server's memory: RSS from /proc, heap from /metrics.
type memoryProbe struct {
	t      *testing.T
	pid    int
	config *rest.Config
	admin  *rawClient
}

// sample reads memory as it is; gc first runs a garbage collection in the
// server (the pprof heap endpoint's gc=1), so that live heap is what the
// server still holds, not what it has not yet swept.
func (p *memoryProbe) sample(gc bool) memorySample {
	p.t.Helper()
	if gc {
		if r := p.admin.do(p.t, http.MethodGet, "/debug/pprof/heap?gc=1", nil, nil); r.code != http.StatusOK {
			p.t.Fatalf("forcing a GC: %d %s", r.code, truncate(r.body, 200))
		}
	}
	return memorySample{
		rss:  vmRSS(p.t, p.pid),
		heap: int64(metricValue(p.t, p.config, "go_memstats_heap_inuse_bytes", nil)),
		live: int64(metricValue(p.t, p.config, "go_gc_heap_live_bytes", nil)),
	}
}

// vmRSS is /proc/<pid>/status VmRSS in bytes.
func vmRSS(t *testing.T, pid int) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kib, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("VmRSS %q: %v", rest, err)
			}
			return kib << 10
		}
	}
	t.Fatalf("no VmRSS in /proc/%d/status", pid)
	return 0
}

// TestSoak runs cycles of recorder traffic against a server with a 10 s
// Event TTL, each cycle followed by the expiry of all its Events, and reads
// the server's memory after each (live heap after a forced GC, and RSS).
//
// Memory does not drop back to the baseline while the server is idle: the
// watch cache keeps its recent history (a ring of watch events holding their
// objects and selectable fields, and the store snapshots it serves older
// resource versions from) and k8s.io/apiserver trims it only as new writes
// come in; the ring holds at most 100 Ki events. So what is asserted is that
// expired Events leave nothing but that history behind: what the server
// holds beyond its baseline, per slot of the watch cache's ring, stays
// within what one watch event can hold; and once the ring stops growing,
// the next cycle does not add to it. Only memory is asserted, never speed.
func TestSoak(t *testing.T) {
	plan, kind := soakPlanFromEnv()
	t.Logf("%s soak: %d cycles of %d reporters × %d Events/s for %v, TTL %v",
		kind, plan.cycles, plan.reporters, plan.rate, plan.load, soakTTL)
	server := framework.StartServer(t, framework.ServerOptions{
		EventTTL: soakTTL,
		// The soak is about memory, not the storm budget.
		ExtraArgs: []string{"--event-rate-limit-qps=0", "--event-rate-limit-update-qps=0", "--event-rate-limit-global-qps=0"},
	})
	pid, err := findServerPID(server.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	config := server.Config(t)
	admin := server.Client(t)
	probe := &memoryProbe{t: t, pid: pid, config: config, admin: adminRawClient(t, server)}
	const ns = "soak"

	// Warm up every path once (create, patch, list, expiry), so that the
	// baseline holds what the first requests allocate for good.
	warm := soakRecorders(t, config, 1, ns)
	for i := range 20 {
		warm[0].emit(i)
	}
	err = wait.PollUntilContextTimeout(context.Background(), pollInterval, pollTimeout, true, func(ctx context.Context) (bool, error) {
		list, err := admin.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(list.Items) >= 16, err
	})
	if err != nil {
		t.Fatalf("warm-up Events did not land: %v", err)
	}
	warm[0].shutdown()
	waitExpired(t, admin, ns, time.Minute)
	baseline := probe.sample(true)
	t.Logf("baseline: %s", baseline)

	peak := baseline
	var previous memorySample
	previousCapacity := 0.0
	for cycle := 1; cycle <= plan.cycles; cycle++ {
		emitted, alive := soakCycle(t, plan, config, admin, ns, probe, &peak)
		loaded := probe.sample(true)
		waitExpired(t, admin, ns, 2*time.Minute)
		expired := probe.sample(true)

		capacity := metricValue(t, config, "watch_cache_capacity", map[string]string{"resource": "events"})
		received := metricValue(t, config, "apiserver_watch_cache_events_received_total", map[string]string{"resource": "events"})
		slots := min(capacity, received)
		retained := max(expired.live-baseline.live, 0)
		perSlot := float64(retained) / max(slots, 1)
		t.Logf("cycle %d: %d Events emitted, %d alive at the end of the load; live heap %s then, %s once all "+
			"expired (RSS %s); watch cache ring of %.0f slots, %.0f watch events received: %.0f bytes retained a slot",
			cycle, emitted, alive, mibString(loaded.live), mibString(expired.live), mibString(expired.rss),
			capacity, received, perSlot)
		// A slot holds one watch event: the Event, the one it replaced, and
		// both their selectable field sets, plus its share of the store
		// snapshots. These Events are about 0.5 KiB as protobuf.
		if perSlot > 16<<10 {
			t.Errorf("cycle %d: %.0f bytes retained per watch cache slot once all Events expired: more than its history explains",
				cycle, perSlot)
		}
		if cycle > 1 && capacity == previousCapacity && received >= 2*capacity {
			// The ring was full and did not grow: this cycle's history
			// replaced the last one's.
			if bound := previous.live + max(previous.live-baseline.live, 0)/4 + 16<<20; expired.live > bound {
				t.Errorf("cycle %d: live heap grew from %s to %s (bound %s) with the watch cache ring unchanged",
					cycle, mibString(previous.live), mibString(expired.live), mibString(bound))
			}
		}
		previous, previousCapacity = expired, capacity
	}
	t.Logf("summary: live heap baseline %s, peak %s, after the last cycle %s; RSS baseline %s, peak %s, after the last cycle %s",
		mibString(baseline.live), mibString(peak.live), mibString(previous.live),
		mibString(baseline.rss), mibString(peak.rss), mibString(previous.rss))

	if path := os.Getenv("EVENT_APISERVER_SOAK_HEAP_PROFILE"); path != "" {
		r := probe.admin.do(t, http.MethodGet, "/debug/pprof/heap?gc=1", nil, nil)
		if err := os.WriteFile(path, r.body, 0o600); err != nil {
			t.Error(err)
		}
		t.Logf("heap profile after the soak written to %s (go tool pprof -sample_index=inuse_space %s)", path, path)
	}
}

// soakCycle runs one load and samples memory every two seconds into peak.
// It returns the Events emitted and those alive when the load ends.
func soakCycle(t *testing.T, plan soakPlan, config *rest.Config, admin kubernetes.Interface, ns string,
	probe *memoryProbe, peak *memorySample) (int64, int) {
	t.Helper()
	recorders := soakRecorders(t, config, plan.reporters, ns)
	defer func() {
		for _, r := range recorders {
			r.shutdown()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), plan.load)
	defer cancel()
	var emitted atomic.Int64
	var wg sync.WaitGroup
	for _, r := range recorders {
		wg.Go(func() {
			tick := time.NewTicker(time.Second / time.Duration(plan.rate))
			defer tick.Stop()
			for i := 0; ; i++ {
				r.emit(i)
				emitted.Add(1)
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
			}
		})
	}
	sampleEvery := time.NewTicker(2 * time.Second)
	defer sampleEvery.Stop()
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-sampleEvery.C:
			s := probe.sample(false)
			peak.rss, peak.heap, peak.live = max(peak.rss, s.rss), max(peak.heap, s.heap), max(peak.live, s.live)
		}
	}
	wg.Wait()
	list, err := admin.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return emitted.Load(), len(list.Items)
}

// soakReporter is one kubelet's recorder: most Events are about new pods
// (creates); every fifth repeats one about a crash-looping pod (a patch
// with a count, until the recorder's spam filter holds it back).
type soakReporter struct {
	emit     func(i int)
	shutdown func()
}

func soakRecorders(t *testing.T, config *rest.Config, n int, ns string) []*soakReporter {
	t.Helper()
	config = rest.CopyConfig(config)
	config.QPS, config.Burst = 50, 100
	var out []*soakReporter
	for r := range n {
		client, err := kubernetes.NewForConfig(config)
		if err != nil {
			t.Fatal(err)
		}
		broadcaster := record.NewBroadcaster()
		broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
		node := fmt.Sprintf("soak-node-%d-%d", r, nameSeq.Add(1))
		recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kubelet", Host: node})
		crashing := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: node + "-crashing", Namespace: ns, UID: types.UID(node + "-crashing")}}
		out = append(out, &soakReporter{
			emit: func(i int) {
				if i%5 == 0 {
					recorder.Event(crashing, corev1.EventTypeWarning, "BackOff", "Back-off restarting failed container")
					return
				}
				pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
					Name: fmt.Sprintf("%s-pod-%d", node, i), Namespace: ns, UID: types.UID(fmt.Sprintf("%s-%d", node, i)),
				}}
				recorder.Eventf(pod, corev1.EventTypeNormal, "Pulled", "Container image \"registry.k8s.io/pause:3.10\" already present on machine (%d)", i)
			},
			shutdown: broadcaster.Shutdown,
		})
	}
	return out
}

// waitExpired waits until ns holds no Event: the TTL has run out for all.
func waitExpired(t *testing.T, client kubernetes.Interface, ns string, timeout time.Duration) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		list, err := client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{Limit: 1})
		if err != nil {
			return false, err
		}
		return len(list.Items) == 0, nil
	})
	if err != nil {
		t.Fatalf("Events in %s did not expire within %v: %v", ns, timeout, err)
	}
}
