package integration

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
// off and on (capture included until it has stored every version), on the
// same workload: EVENT_APISERVER_HISTORY_BENCH=1 to run it,
// EVENT_APISERVER_HISTORY_BENCH_CREATES=<n> for the creates of each run
// (default 10000) and EVENT_APISERVER_HISTORY_BENCH_PAIRS=<n> for the off/on
// pairs (default 3), and EVENT_APISERVER_HISTORY_PROFILE_DIR=<dir> to also
// keep a CPU profile of each measured phase there. Both runs use the
// embedded etcd, whose CPU counts in both. On a shared machine one run's
// CPU per create moves by a quarter between runs: each pair's ratio is
// reported, and their median is the figure.
func TestHistoryCaptureCPU(t *testing.T) {
	// Not parallel: it measures the server's CPU per create, which other
	// tests' processes on the same cores would inflate.
	if os.Getenv("EVENT_APISERVER_HISTORY_BENCH") != "1" {
		t.Skip("a benchmark: set EVENT_APISERVER_HISTORY_BENCH=1")
	}
	creates, pairs := benchEnvInt(t, "EVENT_APISERVER_HISTORY_BENCH_CREATES", 10000), benchEnvInt(t, "EVENT_APISERVER_HISTORY_BENCH_PAIRS", 3)
	// Pairs alternate their order (off, on, on, off, ...): on this shared
	// machine one mode's CPU per create moves by up to a fifth between runs,
	// in stretches that span several of them, and with a fixed order a
	// stretch that falls or rises over a run would always favour one mode.
	var modes []string
	for i := range pairs {
		if i%2 == 0 {
			modes = append(modes, "off", "on")
		} else {
			modes = append(modes, "on", "off")
		}
	}
	perCreate := map[string][]time.Duration{}
	for run, mode := range modes {
		server := framework.StartServer(t, framework.ServerOptions{ExtraArgs: []string{
			"--history=" + map[string]string{"off": "false", "on": "true"}[mode],
			// Every write limit off, as the benchmark runs it: past the
			// user's burst of 5000 client-go would retry 429s, and their
			// refusals would be counted as creates' CPU in both modes.
			"--event-rate-limit-qps=0", "--event-rate-limit-update-qps=0", "--event-rate-limit-global-qps=0",
			"--event-rate-limit-user-qps=0", "--event-rate-limit-bytes-qps=0", "--event-rate-limit-global-bytes-qps=0",
		}})
		pid, err := findServerPID(server.DataDir)
		if err != nil {
			t.Fatal(err)
		}
		config := server.Config(t)
		config.QPS, config.Burst = -1, 0 // no client-side throttling
		client, err := kubernetes.NewForConfig(config)
		if err != nil {
			t.Fatal(err)
		}
		ns := uniqueName("bench")
		create := func(n int, prefix string) {
			var wg sync.WaitGroup
			errs := make(chan error, n)
			for w := 0; w < 8; w++ {
				wg.Add(1)
				go func(w int) {
					defer wg.Done()
					for i := w; i < n; i += 8 {
						_, err := client.CoreV1().Events(ns).Create(context.Background(), &corev1.Event{
							ObjectMeta:     metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", prefix, i)},
							InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: fmt.Sprintf("pod-%d", i%100), UID: "uid"},
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
		}
		create(300, "warmup")
		c := adminRawClient(t, server)
		caughtUp := func(want int) {
			if mode == "off" {
				return
			}
			// Every scrape of /metrics costs the server milliseconds of CPU,
			// counted against "on" only: a few, not one per 50 ms.
			err := wait.PollUntilContextTimeout(pollCtx(t), 250*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
				m := string(c.do(t, "GET", "/metrics", nil, nil).body)
				return strings.Contains(m, fmt.Sprintf("event_apiserver_history_versions_written_total %d\n", want)), nil
			})
			if err != nil {
				t.Fatalf("capture did not store %d versions: %v", want, err)
			}
		}
		caughtUp(300)
		before, err := testbed.CPUTime(pid)
		if err != nil {
			t.Fatal(err)
		}
		profiled := profileServer(t, server, fmt.Sprintf("history-%s-%d", mode, run))
		start := time.Now()
		create(creates, "measured")
		caughtUp(300 + creates)
		after, _ := testbed.CPUTime(pid)
		profiled()
		cpu := (after - before) / time.Duration(creates)
		t.Logf("history %s: %d creates in %v, server CPU %v per create", mode, creates, time.Since(start).Round(time.Millisecond), cpu)
		perCreate[mode] = append(perCreate[mode], cpu)
		if err := server.Stop(); err != nil {
			t.Fatal(err)
		}
	}
	var ratios []float64
	for i := range pairs {
		off, on := perCreate["off"][i], perCreate["on"][i]
		ratio := float64(on) / float64(off)
		t.Logf("pair %d: off %v, on %v per create: on/off %.3f", i+1, off, on, ratio)
		ratios = append(ratios, ratio)
	}
	sort.Float64s(ratios)
	t.Logf("median of %d pairs: capture adds %.1f%% to the server's CPU per create", len(ratios), 100*(ratios[len(ratios)/2]-1))
}

// benchEnvInt reads a positive count from the environment, def when unset.
func benchEnvInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
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
	objects, err := strconv.Atoi(rows)
	if err != nil {
		t.Fatal(err)
	}
	objects = max(objects/100, 1)
	live := benchEnvInt(t, "HISTORY_BENCH_LIVE", 0)
	server := framework.StartServer(t, framework.ServerOptions{
		EmbeddedEtcdPort: framework.FreePort(t),
		ExtraArgs:        []string{"--history-dsn=" + path, "--history-retention=0"},
	})
	c := adminRawClient(t, server)
	if live > 0 {
		preloadLive(t, server, live)
	}
	list := func(path string) historyv1alpha1.EventRecordList {
		t.Helper()
		resp := c.do(t, "GET", path, nil, nil)
		if resp.code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, resp.code, resp.body)
		}
		var l historyv1alpha1.EventRecordList
		if err := json.Unmarshal(resp.body, &l); err != nil {
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
	pid, err := findServerPID(server.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	rss, err := testbed.RSS(pid)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("server RSS (embedded etcd included): %d MiB", rss>>20)
}
