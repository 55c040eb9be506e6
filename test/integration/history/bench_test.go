package history

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/eventapiserver/event-apiserver/internal/testbed"
	historyv1alpha1 "github.com/eventapiserver/event-apiserver/pkg/apis/history/v1alpha1"
	"github.com/eventapiserver/event-apiserver/pkg/history/storetest"
	"github.com/eventapiserver/event-apiserver/test/integration/framework"
	"github.com/eventapiserver/event-apiserver/test/load/workload"
)

// TestHistoryCaptureCPU measures the server's CPU per create with history
// off and on: EVENT_APISERVER_HISTORY_BENCH=1 to run it. Two servers run
// side by side, one with history off and one with it on, each on its own
// embedded etcd (whose CPU counts in both), and take the same creates in
// turns: EVENT_APISERVER_HISTORY_BENCH_ROUNDS=<n> rounds (default 30) of
// EVENT_APISERVER_HISTORY_BENCH_CREATES=<n> creates (default 2000) to each,
// the first server of a round alternating. The figure is each server's
// whole CPU over all rounds, capture included until it has stored every
// version, per create. On this shared machine one server's CPU per create
// moves by up to a fifth between runs of 20 seconds, in stretches: runs one
// after the other (the test's first design) needed dozens of pairs to tell
// 10% apart, turns of a few seconds put both servers in the same stretch.
// Runs of 30 rounds still differ by a few points: quote the median of
// several.
// EVENT_APISERVER_HISTORY_PROFILE_DIR=<dir> also keeps there an 8-second CPU
// profile of each server from the start of its first turn.
func TestHistoryCaptureCPU(t *testing.T) {
	// Not parallel: it measures the servers' CPU per create, which other
	// tests' processes on the same cores would inflate.
	if os.Getenv("EVENT_APISERVER_HISTORY_BENCH") != "1" {
		t.Skip("a benchmark: set EVENT_APISERVER_HISTORY_BENCH=1")
	}
	framework.Exclusive(t)
	creates, rounds := framework.BenchEnvInt(t, "EVENT_APISERVER_HISTORY_BENCH_CREATES", 2000), framework.BenchEnvInt(t, "EVENT_APISERVER_HISTORY_BENCH_ROUNDS", 30)
	type target struct {
		mode   string
		server *framework.Server
		pid    int
		client kubernetes.Interface
		raw    *framework.RawClient
		ns     string
		// stored is how many versions capture has stored when caught up.
		stored int
		// cpu is the CPU of each of the server's turns.
		cpu []time.Duration
	}
	var targets []*target
	for _, mode := range []string{"off", "on"} {
		server := framework.StartServer(t, framework.ServerOptions{ExtraArgs: []string{
			"--history=" + map[string]string{"off": "false", "on": "true"}[mode],
			// Every write limit off, as the benchmark runs it: past the
			// user's burst of 5000 client-go would retry 429s, and their
			// refusals would be counted as creates' CPU in both modes.
			"--event-rate-limit-qps=0", "--event-rate-limit-update-qps=0", "--event-rate-limit-global-qps=0",
			"--event-rate-limit-user-qps=0", "--event-rate-limit-bytes-qps=0", "--event-rate-limit-global-bytes-qps=0",
		}})
		pid, err := framework.FindServerPID(server.DataDir)
		if err != nil {
			t.Fatal(err)
		}
		config := server.Config(t)
		config.QPS, config.Burst = -1, 0 // no client-side throttling
		client, err := kubernetes.NewForConfig(config)
		if err != nil {
			t.Fatal(err)
		}
		targets = append(targets, &target{mode: mode, server: server, pid: pid, client: client,
			raw: framework.AdminRawClient(t, server), ns: framework.UniqueName("bench")})
	}
	create := func(tg *target, n int, prefix string) {
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for w := 0; w < 8; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for i := w; i < n; i += 8 {
					_, err := tg.client.CoreV1().Events(tg.ns).Create(context.Background(), &corev1.Event{
						ObjectMeta:     metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", prefix, i)},
						InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: tg.ns, Name: fmt.Sprintf("pod-%d", i%100), UID: "uid"},
						Reason:         "BackOff", Message: strings.Repeat("m", 200), Type: corev1.EventTypeWarning,
						Source: corev1.EventSource{Component: "kubelet", Host: "node"}, Count: 1, LastTimestamp: metav1.Now(),
					}, metav1.CreateOptions{})
					if err != nil {
						errs <- err
						return
					}
				}
			}(w)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		tg.stored += n
	}
	caughtUp := func(tg *target) {
		if tg.mode == "off" {
			return
		}
		// Every scrape of /metrics costs the server milliseconds of CPU,
		// counted against "on" only: a few, not one per 50 ms.
		err := wait.PollUntilContextTimeout(framework.PollCtx(t), 250*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
			m := string(tg.raw.Do(t, "GET", "/metrics", nil, nil).Body)
			return strings.Contains(m, fmt.Sprintf("event_apiserver_history_versions_written_total{source=\"etcd\"} %d\n", tg.stored)), nil
		})
		if err != nil {
			t.Fatalf("capture did not store %d versions: %v", tg.stored, err)
		}
	}
	for _, tg := range targets {
		create(tg, 300, "warmup")
		caughtUp(tg)
	}
	before := map[*target]time.Duration{}
	for _, tg := range targets {
		before[tg] = cpuTime(t, tg.pid)
	}
	start := time.Now()
	for round := range rounds {
		order := targets
		if round%2 == 1 {
			order = []*target{targets[1], targets[0]}
		}
		for _, tg := range order {
			profiled := func() {}
			if round == 0 {
				profiled = profileServer(t, tg.server, "history-"+tg.mode)
			}
			cpu0 := cpuTime(t, tg.pid)
			create(tg, creates, fmt.Sprintf("measured-%d", round))
			tg.cpu = append(tg.cpu, cpuTime(t, tg.pid)-cpu0)
			profiled()
		}
	}
	for _, tg := range targets {
		caughtUp(tg)
	}
	var total [2]time.Duration
	for i, tg := range targets {
		total[i] = cpuTime(t, tg.pid) - before[tg]
		if err := tg.server.Stop(); err != nil {
			t.Fatal(err)
		}
	}
	// A turn's ratio leaves out capture's work that spills into the other
	// server's turn: the spread, not the figure.
	var ratios []float64
	for round := range rounds {
		off, on := targets[0].cpu[round], targets[1].cpu[round]
		ratios = append(ratios, float64(on)/float64(off))
		t.Logf("round %d: off %v, on %v per create in the turn: on/off %.3f", round+1,
			off/time.Duration(creates), on/time.Duration(creates), ratios[round])
	}
	sort.Float64s(ratios)
	n := time.Duration(rounds * creates)
	t.Logf("%d rounds of %d creates in %v; turns' on/off from %.3f to %.3f, median %.3f", rounds, creates,
		time.Since(start).Round(time.Second), ratios[0], ratios[len(ratios)-1], ratios[len(ratios)/2])
	t.Logf("server CPU per create, capture included until it stored every version: off %v, on %v: capture adds %.1f%%",
		total[0]/n, total[1]/n, 100*(float64(total[1])/float64(total[0])-1))
}

// cpuTime is the CPU time process pid has used so far.
func cpuTime(t *testing.T, pid int) time.Duration {
	t.Helper()
	cpu, err := testbed.CPUTime(pid)
	if err != nil {
		t.Fatal(err)
	}
	return cpu
}

// profileServer starts a CPU profile of the server when
// EVENT_APISERVER_HISTORY_PROFILE_DIR is set; the returned function waits for
// it and writes <dir>/<name>.pprof.
func profileServer(t *testing.T, server *framework.Server, name string) func() {
	dir := os.Getenv("EVENT_APISERVER_HISTORY_PROFILE_DIR")
	if dir == "" {
		return func() {}
	}
	config := server.Config(t)
	httpClient, err := rest.HTTPClientFor(config)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		resp, err := httpClient.Get(config.Host + "/debug/pprof/profile?seconds=8")
		if err != nil {
			done <- err
			return
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("profile: %d %s", resp.StatusCode, body)
		}
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, name+".pprof"), body, 0o644)
		}
		done <- err
	}()
	return func() {
		if err := <-done; err != nil {
			t.Errorf("profiling the server: %v", err)
		}
	}
}

// TestHistoryQueryAtScale measures "one object's week" through the REST
// endpoint on the history BenchmarkListOneObjectWeek filled and kept
// (HISTORY_BENCH_DB=<file>, HISTORY_BENCH_ROWS=<its size>): p50 and p99 of
// the namespaced and the all-namespaces list with regarding.uid and
// regardingOrRelated.uid, a week's window and limit 500. The file is served
// as the server's own store, with no age retention. HISTORY_BENCH_LIVE=<n>
// first writes n live Events (the load tool's preload: 10 namespaces, 10
// Events per pod, an hour's lease) into the server's etcd and waits until its
// watch cache holds them and capture has stored them too, so that the
// queries run beside a full store: its cache in memory, its history grown
// by n versions. Nothing is asserted about latency: the figures are logged.
func TestHistoryQueryAtScale(t *testing.T) {
	path, rows := os.Getenv("HISTORY_BENCH_DB"), os.Getenv("HISTORY_BENCH_ROWS")
	if path == "" || rows == "" {
		t.Skip("a benchmark: set HISTORY_BENCH_DB and HISTORY_BENCH_ROWS to a history BenchmarkListOneObjectWeek filled")
	}
	framework.Exclusive(t)
	objects, err := strconv.Atoi(rows)
	if err != nil {
		t.Fatal(err)
	}
	objects = max(objects/100, 1)
	live := framework.BenchEnvInt(t, "HISTORY_BENCH_LIVE", 0)
	server := framework.StartServer(t, framework.ServerOptions{
		EmbeddedEtcdPort: framework.FreePort(t),
		ExtraArgs:        []string{"--history-dsn=" + path, "--history-retention=0"},
	})
	c := framework.AdminRawClient(t, server)
	if live > 0 {
		preloadLive(t, server, live)
	}
	list := func(path string) historyv1alpha1.EventRecordList {
		t.Helper()
		resp := c.Do(t, "GET", path, nil, nil)
		if resp.Code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, resp.Code, resp.Body)
		}
		var l historyv1alpha1.EventRecordList
		if err := json.Unmarshal(resp.Body, &l); err != nil {
			t.Fatal(err)
		}
		return l
	}
	const group = "/apis/history.eventapiserver.io/v1alpha1"
	newest := list(group + "/eventrecords?limit=1")
	if len(newest.Items) != 1 {
		t.Fatalf("the store at %s serves nothing", path)
	}
	since := newest.Items[0].LastSeen.Add(-7 * 24 * time.Hour).UTC().Format(time.RFC3339)
	for _, tc := range []struct {
		name       string
		namespaced bool
		label      string
	}{
		{"namespaced regarding.uid", true, "regarding.uid"},
		{"all namespaces regarding.uid", false, "regarding.uid"},
		{"namespaced regardingOrRelated.uid", true, "regardingOrRelated.uid"},
		{"all namespaces regardingOrRelated.uid", false, "regardingOrRelated.uid"},
	} {
		const queries = 200
		latencies := make([]time.Duration, 0, queries)
		found := 0
		for i := 0; i < queries; i++ {
			object := i * 7919 % objects
			p := group + "/eventrecords"
			if tc.namespaced {
				p = fmt.Sprintf("%s/namespaces/%s/eventrecords", group, storetest.BenchNamespace(object))
			}
			p += "?limit=500&fieldSelector=" + url.QueryEscape(tc.label+"="+storetest.BenchObjectUID(object)+",since="+since)
			start := time.Now()
			l := list(p)
			latencies = append(latencies, time.Since(start))
			found += len(l.Items)
		}
		sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
		t.Logf("%s: p50 %v, p99 %v, %.1f records a query", tc.name, latencies[queries/2].Round(10*time.Microsecond),
			latencies[queries*99/100].Round(10*time.Microsecond), float64(found)/queries)
		if found == 0 {
			t.Errorf("%s found nothing: not the history the benchmark filled?", tc.name)
		}
	}
}

// preloadLive writes n Events straight into the server's etcd as the load
// tool's preload does, then waits until the server's watch cache holds them
// and its history capture has stored every revision etcd holds, logging how
// long each took and the server's memory.
func preloadLive(t *testing.T, server *framework.Server, n int) {
	t.Helper()
	ctx := context.Background()
	endpoints := []string{server.EtcdURL}
	res, err := workload.Preload(ctx, workload.PreloadOptions{Endpoints: endpoints, Layout: workload.DefaultLayout, To: n})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("preloaded %d live Events (%d bytes each) in %v", res.Events, res.Bytes/int64(res.Events), res.Elapsed.Round(time.Second))
	target := workload.Target{Config: server.Config(t)}
	start := time.Now()
	// The cache was filled at start-up, empty, and follows etcd's writes
	// since: a LIST at resourceVersion 0 is served by it at its own
	// revision, and once that reaches etcd's after the preload (a quorum
	// LIST's), the cache holds every preloaded Event.
	client, err := kubernetes.NewForConfig(target.Config)
	if err != nil {
		t.Fatal(err)
	}
	head, err := client.CoreV1().Events("").List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	want, err := strconv.ParseInt(head.ResourceVersion, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, time.Second, 30*time.Minute, true, func(ctx context.Context) (bool, error) {
		l, err := client.CoreV1().Events("").List(ctx, metav1.ListOptions{ResourceVersion: "0", Limit: 1})
		if err != nil {
			return false, err
		}
		got, err := strconv.ParseInt(l.ResourceVersion, 10, 64)
		return got >= want, err
	})
	if err != nil {
		t.Fatalf("the watch cache did not reach %d Events: %v", n, err)
	}
	t.Logf("the watch cache held them %v after the preload", time.Since(start).Round(time.Second))
	took, _, err := workload.SettleCapture(ctx, target, endpoints, 60*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("history capture had stored them %v later", took.Round(time.Second))
	pid, err := framework.FindServerPID(server.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	rss, err := testbed.RSS(pid)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("server RSS (embedded etcd included): %d MiB", rss>>20)
}
