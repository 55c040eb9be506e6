package history

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/jackc/pgx/v5"

	"github.com/eventapiserver/event-apiserver/internal/pgtest"
	"github.com/eventapiserver/event-apiserver/internal/testbed"
	"github.com/eventapiserver/event-apiserver/pkg/history/fleet"
	"github.com/eventapiserver/event-apiserver/test/integration/framework"
	"github.com/eventapiserver/event-apiserver/test/load/workload"
)

// TestFleetCaptureBench is the fleet benchmark of docs/benchmarks.md, not a
// test: set EVENT_APISERVER_FLEET_BENCH=1 (hack/bench-fleet.sh does, under
// the integration tests' exclusive lock). A hub on PostgreSQL captures member
// clusters, each a real kube-apiserver v1.36.3; to fit the machine, the
// members share EVENT_APISERVER_FLEET_BENCH_ETCDS etcds (default 1), each
// member under its own --etcd-prefix. Stages (EVENT_APISERVER_FLEET_BENCH_STAGES,
// default "10x100": members x Events/s each, and optionally :seconds
// measured) run in order, members joining
// the fleet as a stage needs them. The members run with the flags of
// fleetBenchMemberFlags, which cut what a create costs them and nothing the
// hub sees. In each stage every member's writer creates kubelet-like
// core/v1 Events at its rate (open loop: a create not sent on time is
// counted as missed, not delayed; a ticker starved of CPU drops ticks
// uncounted, so the creates answered are the rate to read) for
// EVENT_APISERVER_FLEET_BENCH_SECONDS (default 60) after 10 s of warm-up.
// EVENT_APISERVER_FLEET_BENCH_WRITES says how: "etcd" (the default) puts
// each Event straight into its member's etcd, under the member's prefix, as
// its kube-apiserver stores a create (workload.EtcdEvents), so that the
// members' kube-apiservers only serve the hub's list and watch; "api"
// creates each through the member's API in protobuf, which costs the
// member a create's CPU. Either way the hub captures each member through
// its kube-apiserver, and at the end the test checks that each member's API
// lists every Event written and that history holds each once.
// Every 500 ms it scrapes the hub's /metrics: capture_lag_seconds per member
// (the age of the oldest change received and not yet stored) and
// capture_revision, which, against the newest resourceVersion each writer
// was answered, gives the end-to-end lag from create to stored (to the
// 500 ms of a sample). It reports both lags' p50/p99/max, the creates
// achieved, the hub's CPU (ms/s) and RSS in all and per member (above
// the hub's own with no member, measured first, scraped as often), PostgreSQL's, the
// members' (kube-apiservers and etcd) and the writers' (this process) CPU,
// the machine's, and whether the lag grew through the window (the last
// third's mean end-to-end lag above twice the first third's and above 2 s)
// or capture drained within 30 s of the writers stopping.
func TestFleetCaptureBench(t *testing.T) {
	if os.Getenv("EVENT_APISERVER_FLEET_BENCH") != "1" {
		t.Skip("a benchmark: set EVENT_APISERVER_FLEET_BENCH=1 (hack/bench-fleet.sh)")
	}
	framework.Exclusive(t)
	ctx := context.Background()
	window := time.Duration(framework.BenchEnvInt(t, "EVENT_APISERVER_FLEET_BENCH_SECONDS", 60)) * time.Second
	stages := parseFleetStages(t, os.Getenv("EVENT_APISERVER_FLEET_BENCH_STAGES"), window)
	writes := os.Getenv("EVENT_APISERVER_FLEET_BENCH_WRITES")
	switch writes {
	case "":
		writes = "etcd"
	case "etcd", "api":
	default:
		t.Fatalf("EVENT_APISERVER_FLEET_BENCH_WRITES %q: want etcd or api", writes)
	}
	etcds := make([]*framework.Etcd, framework.BenchEnvInt(t, "EVENT_APISERVER_FLEET_BENCH_ETCDS", 1))
	// On this one machine the members (kube-apiservers, their etcds and
	// the writers) take the CPU the hub would have on its own: a niceness
	// for them (EVENT_APISERVER_FLEET_BENCH_MEMBERS_NICE, 0 to 19) gives
	// the hub and PostgreSQL the CPU first, as separate machines would.
	nice := 0
	if v := os.Getenv("EVENT_APISERVER_FLEET_BENCH_MEMBERS_NICE"); v != "" {
		nice = framework.BenchEnvInt(t, "EVENT_APISERVER_FLEET_BENCH_MEMBERS_NICE", 0)
	}
	renice := func(pid int) {
		// Twice: a thread started during the first pass by one not yet
		// reniced inherits niceness 0.
		for range 2 {
			if nice > 0 {
				if err := reniceThreads(pid, nice); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	for i := range etcds {
		etcds[i] = framework.StartEtcd(t)
		renice(etcds[i].Process().PID())
	}
	most := 0
	for _, s := range stages {
		most = max(most, s.members)
	}

	dsn := pgtest.Start(t)
	// The hub's own cluster has its own etcd: its Secrets and token
	// reviews are not what is measured.
	hubCluster := framework.StartKubeAPIServer(t, framework.KubeAPIServerOptions{})
	const fleetNamespace = "event-history-fleet"
	if _, err := hubCluster.Client(t).CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fleetNamespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The server's defaults for batches (the framework's are small, for
	// tests that kill it mid-batch).
	hub := framework.StartHistoryOnlyReplica(t, hubCluster, []string{"--history-store=postgres", "--history-dsn=" + dsn,
		"--history-cluster-name=hub", "--history-fleet-namespace=" + fleetNamespace,
		"--history-batch-interval=1s", "--history-batch-size=500"})
	postgres := postmasterPID(t, dsn)
	// EVENT_APISERVER_FLEET_BENCH_HOURLY=off drops the hourly counts'
	// trigger once the hub made it: what it costs PostgreSQL per version is
	// the difference between a run with it and one without.
	hourly := os.Getenv("EVENT_APISERVER_FLEET_BENCH_HOURLY")
	if hourly == "off" {
		dropHourlyTrigger(ctx, t, dsn)
	} else if hourly != "" && hourly != "on" {
		t.Fatalf("EVENT_APISERVER_FLEET_BENCH_HOURLY %q: want on or off", hourly)
	}
	// The writers (this process) stand for the members' kubelets: at the
	// members' niceness, as the members they write to, and from here on,
	// so that the hub, its cluster and PostgreSQL, started above, keep 0.
	renice(os.Getpid())
	// The hub with no member: what a member's share is measured against,
	// scraped as often as in a stage (sampleFleet), so that the scrapes'
	// own cost is in the base and not in the members' share.
	idleCPU0 := mustCPU(t, hub.Proc.PID())
	idleStart := time.Now()
	for time.Since(idleStart) < 10*time.Second {
		sampleFleet(t, hub, nil)
		time.Sleep(500 * time.Millisecond)
	}
	idleCPU := float64((mustCPU(t, hub.Proc.PID()) - idleCPU0).Milliseconds()) / time.Since(idleStart).Seconds()
	idleRSS, err := testbed.RSS(hub.Proc.PID())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("hub without members, scraped twice a second: CPU %.1f ms/s, RSS %.0f MiB", idleCPU, float64(idleRSS)/(1<<20))

	var members []*fleetBenchMember
	join := func(n int) {
		for len(members) < n {
			i := len(members)
			prefix := fmt.Sprintf("/member-%d", i)
			kube := framework.StartKubeAPIServer(t, framework.KubeAPIServerOptions{
				EtcdServers: etcds[i%len(etcds)].ClientURL(),
				ExtraFlags:  append([]string{"--etcd-prefix=" + prefix}, fleetBenchMemberFlags...),
			})
			renice(kube.Process().PID())
			m := newFleetBenchMember(t, fmt.Sprintf("m%d", i), kube)
			if writes == "etcd" {
				// One etcd client per member, as each kube-apiserver has its own.
				events, err := workload.NewEtcdEvents([]string{etcds[i%len(etcds)].ClientURL()}, prefix)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = events.Close() })
				m.create = func(ctx context.Context, ev *corev1.Event) (int64, error) {
					rv, _, err := events.Create(ctx, ev)
					return rv, err
				}
			}
			if _, err := m.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "load"}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			secret := &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: "member-" + m.name, Namespace: fleetNamespace, Labels: map[string]string{fleet.MemberLabel: m.name}},
				Data:       map[string][]byte{fleet.KubeconfigKey: eventReaderKubeconfig(ctx, t, kube)},
			}
			if _, err := hubCluster.Client(t).CoreV1().Secrets(fleetNamespace).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			members = append(members, m)
		}
		for _, m := range members[:n] {
			err := wait.PollUntilContextTimeout(ctx, framework.PollInterval, 2*time.Minute, true, func(context.Context) (bool, error) {
				return hub.Metric(t, `event_apiserver_history_capture_revision{source="`+fleet.SourcePrefix+m.name+`"}`) > 0, nil
			})
			if err != nil {
				t.Fatalf("member %s's capture has not started: %v", m.name, err)
			}
		}
	}

	for _, stage := range stages {
		join(stage.members)
		active := members[:stage.members]
		load, err := os.ReadFile("/proc/loadavg")
		if err != nil {
			t.Fatal(err)
		}
		stop := make(chan struct{})
		var writers sync.WaitGroup
		for _, m := range active {
			writers.Add(1)
			go func() { defer writers.Done(); m.write(ctx, stage.rate, stop) }()
		}
		time.Sleep(10 * time.Second) // warm-up: capture of the first creates, connections
		cpu := func() (hubCPU, pgCPU, membersCPU, etcdCPU, writersCPU time.Duration) {
			hubCPU = mustCPU(t, hub.Proc.PID())
			writersCPU = mustCPU(t, os.Getpid())
			pgCPU = processTreeCPU(t, postgres)
			for _, m := range active {
				membersCPU += mustCPU(t, m.kube.Process().PID())
			}
			for _, e := range etcds {
				etcdCPU += mustCPU(t, e.Process().PID())
			}
			return
		}
		// At most 50 s: the hub, as kube-apiserver, ends a request that is
		// no watch after a minute.
		profiled := profileFleetHub(hub, min(stage.window-5*time.Second, 50*time.Second), fmt.Sprintf("hub-%dx%d", stage.members, stage.rate))
		hub0, pg0, members0, etcd0, writers0 := cpu()
		busy0, total0 := machineCPU(t)
		for _, m := range active {
			m.mark()
		}
		start := time.Now()
		var samples []fleetBenchSample
		var maxRSS int64
		for time.Since(start) < stage.window {
			samples = append(samples, sampleFleet(t, hub, active))
			rss, err := testbed.RSS(hub.Proc.PID())
			if err != nil {
				t.Fatal(err)
			}
			maxRSS = max(maxRSS, rss)
			time.Sleep(500 * time.Millisecond)
		}
		elapsed := time.Since(start)
		hub1, pg1, members1, etcd1, writers1 := cpu()
		busy1, total1 := machineCPU(t)
		if err := <-profiled; err != nil {
			t.Errorf("profiling the hub: %v", err)
		}
		var created, missed int64
		var latencies []time.Duration
		for _, m := range active {
			c, ms, l := m.since()
			created, missed = created+c, missed+ms
			latencies = append(latencies, l...)
		}
		close(stop)
		writers.Wait()
		// Drain: how long after the writers stopped until history holds
		// every version they were answered.
		stopped := time.Now()
		drained := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			s := sampleFleet(t, hub, active)
			for i, m := range active {
				if s.captured[i] < m.newest.Load() {
					return false, nil
				}
			}
			return true, nil
		}) == nil
		drain := time.Since(stopped)

		var lag, e2e []float64
		for i, s := range samples {
			lag = append(lag, s.lag...)
			for j := range active {
				e2e = append(e2e, endToEnd(samples, i, j))
			}
		}
		grew := growing(samples, len(active))
		perSecond := func(d time.Duration) float64 { return float64(d.Milliseconds()) / elapsed.Seconds() }
		slices.Sort(latencies)
		verdict := "bounded"
		if grew || !drained {
			verdict = "GROWING"
		}
		t.Logf("stage %dx%d/s for %v (writes through %s, members at nice %d; load before %s): creates %.0f/s of %d/s (missed %d, create p99 %v); "+
			"hub lag_seconds p50 %.2f p99 %.2f max %.2f s; end-to-end p50 %.1f p99 %.1f max %.1f s; "+
			"hub CPU %.0f ms/s (%.1f per member above the idle hub's), RSS max %.0f MiB (%.1f per member above the idle hub's); PostgreSQL %.0f ms/s; "+
			"members' kube-apiservers+etcd %.0f ms/s (%.0f + %.0f); writers %.0f ms/s; machine busy %.0f%%; drained %v after stop (%v); %s",
			stage.members, stage.rate, stage.window, writes, nice, strings.Join(strings.Fields(string(load))[:3], " "), float64(created)/elapsed.Seconds(), stage.members*stage.rate, missed, percentile(latencies, 0.99).Round(time.Millisecond),
			pct(lag, 0.5), pct(lag, 0.99), pct(lag, 1), pct(e2e, 0.5), pct(e2e, 0.99), pct(e2e, 1),
			perSecond(hub1-hub0), (perSecond(hub1-hub0)-idleCPU)/float64(stage.members), float64(maxRSS)/(1<<20), float64(maxRSS-idleRSS)/(1<<20)/float64(stage.members),
			perSecond(pg1-pg0), perSecond(members1-members0+etcd1-etcd0), perSecond(members1-members0), perSecond(etcd1-etcd0), perSecond(writers1-writers0), 100*float64(busy1-busy0)/float64(total1-total0),
			drain.Round(100*time.Millisecond), drained, verdict)
	}
	verifying := time.Now()
	for _, m := range members {
		verifyFleetBenchMember(ctx, t, hub, m)
	}
	t.Logf("every member's Events listed and found in history once, in %v", time.Since(verifying).Round(time.Second))
}

// profileFleetHub takes a CPU profile of the hub for d (whole seconds) when
// EVENT_APISERVER_FLEET_BENCH_PROFILE_DIR is set, into <dir>/<name>.pprof;
// the channel says when it is done.
func profileFleetHub(hub *framework.HistoryOnlyReplica, d time.Duration, name string) <-chan error {
	done := make(chan error, 1)
	dir := os.Getenv("EVENT_APISERVER_FLEET_BENCH_PROFILE_DIR")
	if dir == "" {
		done <- nil
		return done
	}
	go func() {
		done <- func() error {
			req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", hub.Client.BaseURL, int(d.Seconds())), nil)
			if err != nil {
				return err
			}
			req.Header.Set("Authorization", "Bearer "+hub.Client.Token)
			// The raw client's 30 s timeout is shorter than a profile.
			resp, err := (&http.Client{Transport: hub.Client.HTTP.Transport}).Do(req)
			if err != nil {
				return err
			}
			defer func() { _ = resp.Body.Close() }()
			body, err := io.ReadAll(resp.Body)
			if err == nil && resp.StatusCode != http.StatusOK {
				err = fmt.Errorf("%d %s", resp.StatusCode, body)
			}
			if err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(dir, name+".pprof"), body, 0o644)
		}()
	}()
	return done
}

// verifyFleetBenchMember checks, after the stages, that m's API lists every
// Event its writer was answered for, at the resourceVersion it was answered
// (a list through client-go in protobuf decodes each: what the hub read is
// what kube-apiserver serves), and that history holds each of those
// versions exactly once (a record is named <event name>.<resourceVersion>).
func verifyFleetBenchMember(ctx context.Context, t *testing.T, hub *framework.HistoryOnlyReplica, m *fleetBenchMember) {
	t.Helper()
	m.mu.Lock()
	want := make(map[string]int64, len(m.written))
	for _, w := range m.written {
		want[w.name] = w.rv
	}
	m.mu.Unlock()
	listed := 0
	events := m.client.CoreV1().Events("load")
	eachPage(t, "member "+m.name+"'s Events", metav1.ListOptions{Limit: 5000}, func(opts metav1.ListOptions) (string, error) {
		list, err := events.List(ctx, opts)
		if err != nil {
			return "", err
		}
		for _, ev := range list.Items {
			rv, ok := want[ev.Name]
			if !ok {
				continue // a create answered with an error that was stored
			}
			if strconv.FormatInt(rv, 10) != ev.ResourceVersion || ev.Reason != "Pulled" || ev.InvolvedObject.Kind != "Pod" {
				t.Fatalf("member %s lists %s at %s (reason %q, about %s), written at %d", m.name, ev.Name, ev.ResourceVersion, ev.Reason, ev.InvolvedObject.Kind, rv)
			}
			listed++
		}
		return list.Continue, nil
	})
	if listed != len(want) {
		t.Fatalf("member %s's API lists %d of the %d Events written", m.name, listed, len(want))
	}
	records := framework.HistoryClient(t, hub.Client).EventRecords("load")
	seen := make(map[string]bool, len(want))
	held := 0
	eachPage(t, "member "+m.name+"'s eventrecords", metav1.ListOptions{FieldSelector: "cluster=" + m.name, Limit: 5000}, func(opts metav1.ListOptions) (string, error) {
		list, err := records.List(ctx, opts)
		if err != nil {
			return "", err
		}
		for _, r := range list.Items {
			if seen[r.Name] {
				t.Fatalf("member %s: history holds %s twice", m.name, r.Name)
			}
			seen[r.Name] = true
			// Event names are pod-<n>.<seq>, a record's that and .<rv>.
			i := strings.LastIndexByte(r.Name, '.')
			name, rv := r.Name[:i], r.Name[i+1:]
			w, ok := want[name]
			if !ok {
				continue // a create answered with an error that was stored
			}
			if strconv.FormatInt(w, 10) != rv {
				t.Fatalf("member %s: history holds %s, not the version written (%d)", m.name, r.Name, w)
			}
			held++
		}
		return list.Continue, nil
	})
	if held != len(want) {
		t.Fatalf("member %s: history holds %d of the %d versions written", m.name, held, len(want))
	}
	t.Logf("member %s: its API lists all %d Events written, history holds each once", m.name, len(want))
}

// eachPage lists with opts, then with each continue token list returns,
// until there is none; what names the list in a failure.
func eachPage(t *testing.T, what string, opts metav1.ListOptions, list func(metav1.ListOptions) (string, error)) {
	t.Helper()
	for {
		next, err := list(opts)
		if err != nil {
			t.Fatalf("listing %s: %v", what, err)
		}
		if next == "" {
			return
		}
		opts.Continue = next
	}
}

// dropHourlyTrigger waits for the hub to have made the hourly counts'
// trigger (its schema's migration), then drops it.
func dropHourlyTrigger(ctx context.Context, t *testing.T, dsn string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, framework.PollInterval, time.Minute, true, func(context.Context) (bool, error) {
		var made bool
		queryDatabase(t, dsn, func(conn *pgx.Conn) error {
			return conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = 'event_versions_hourly_counted')`).Scan(&made)
		})
		return made, nil
	})
	if err != nil {
		t.Fatalf("the hub has not made the hourly counts' trigger: %v", err)
	}
	queryDatabase(t, dsn, func(conn *pgx.Conn) error {
		_, err := conn.Exec(ctx, `DROP TRIGGER event_versions_hourly_counted ON event_versions`)
		return err
	})
}

// fleetBenchMemberFlags are the members' kube-apiserver flags beyond the
// framework's: each cuts the CPU a create of an Event costs the member, or
// its idle cost, without changing what the hub sees (the members' core/v1
// Events, listed and watched from etcd, as kube-apiserver serves them by
// default: without a watch cache). The framework's kube-apiservers already
// run without audit (no --audit-policy-file) and without --profiling.
var fleetBenchMemberFlags = []string{
	// No API Priority and Fairness: no classification against
	// FlowSchemas, no queues, no seat accounting per request; the
	// max-in-flight limits (400 and 200) bound the members instead.
	"--enable-priority-and-fairness=false",
	// Of the admission plugins on by default, only NamespaceLifecycle
	// acts on an Event (a create in a terminating namespace is refused);
	// the rest would each look at every create and pass it.
	"--disable-admission-plugins=LimitRanger,ServiceAccount,TaintNodesByCondition,PodSecurity,Priority," +
		"DefaultTolerationSeconds,DefaultStorageClass,StorageObjectInUseProtection,PodGroupProtection," +
		"PersistentVolumeClaimResize,RuntimeClass,CertificateApproval,CertificateSigning,ClusterTrustBundleAttest," +
		"CertificateSubjectRestriction,DefaultIngressClass,PodTopologyLabels,PodGroupWorkloadExists," +
		"NodeDeclaredFeatureValidator,JobValidation,PodResizeValidator,MutatingAdmissionPolicy," +
		"MutatingAdmissionWebhook,ValidatingAdmissionPolicy,ValidatingAdmissionWebhook,ResourceQuota",
	// No watch cache for any resource: Events have none by default
	// anyway, and the caches of the other resources are an etcd watch
	// and a cacher each, ten members' worth on one etcd, that nothing
	// here reads.
	"--watch-cache=false",
	// No periodic count of every resource's keys and size of the
	// database: etcd reads the hub never sees.
	"--etcd-count-metric-poll-period=0",
	"--etcd-db-metric-poll-interval=0",
}

// reniceThreads sets the niceness of every thread of process pid: Linux's
// niceness is a thread's, and a Go program's threads exist before its pid
// is known here; threads started later inherit their creator's.
func reniceThreads(pid, nice int) error {
	entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return err
	}
	for _, e := range entries {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		// A thread that exited meanwhile is ESRCH: nothing to renice.
		if err := syscall.Setpriority(syscall.PRIO_PROCESS, tid, nice); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("renice thread %d of %d: %w", tid, pid, err)
		}
	}
	return nil
}

// fleetBenchStage is one stage: members writing rate Events/s each,
// measured for window.
type fleetBenchStage struct {
	members, rate int
	window        time.Duration
}

// parseFleetStages reads MEMBERSxRATE[:SECONDS][,...]; a stage without
// SECONDS is measured for window.
func parseFleetStages(t *testing.T, s string, window time.Duration) []fleetBenchStage {
	t.Helper()
	if s == "" {
		s = "10x100"
	}
	var stages []fleetBenchStage
	for _, f := range strings.Split(s, ",") {
		f, secs, timed := strings.Cut(strings.TrimSpace(f), ":")
		m, r, ok := strings.Cut(f, "x")
		members, err1 := strconv.Atoi(m)
		rate, err2 := strconv.Atoi(r)
		stage := fleetBenchStage{members, rate, window}
		var err3 error
		if timed {
			var n int
			n, err3 = strconv.Atoi(secs)
			stage.window = time.Duration(n) * time.Second
		}
		if !ok || err1 != nil || err2 != nil || err3 != nil || members <= 0 || rate <= 0 || stage.window < 10*time.Second {
			t.Fatalf("EVENT_APISERVER_FLEET_BENCH_STAGES %q: want MEMBERSxRATE[:SECONDS][,...], SECONDS at least 10, e.g. 10x100:120,10x200:60", s)
		}
		stages = append(stages, stage)
	}
	return stages
}

// fleetBenchMember is one member cluster and its writer.
type fleetBenchMember struct {
	name   string
	kube   *framework.KubeAPIServer
	client kubernetes.Interface
	// create writes a new Event and returns its resourceVersion.
	create func(context.Context, *corev1.Event) (int64, error)
	seq    atomic.Int64
	// newest is the highest resourceVersion a create was answered with.
	newest          atomic.Int64
	created, missed atomic.Int64
	mu              sync.Mutex
	latencies       []time.Duration
	// written is every Event created, for verifyFleetBenchMember.
	written []fleetBenchWritten
	// at mark: the counts the window starts from.
	created0, missed0 int64
	latencies0        int
}

// newFleetBenchMember is kube's writer, creating through its API.
func newFleetBenchMember(t *testing.T, name string, kube *framework.KubeAPIServer) *fleetBenchMember {
	t.Helper()
	m := &fleetBenchMember{name: name, kube: kube}
	config := kube.RestConfig()
	// The writer's pace is the stage's, not client-go's default limit;
	// protobuf, as kubelets and controllers send Events, is the
	// cheapest body for the member to decode and answer.
	config.QPS, config.Burst = -1, 0
	config.ContentType = runtime.ContentTypeProtobuf
	config.AcceptContentTypes = runtime.ContentTypeProtobuf
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		t.Fatal(err)
	}
	m.client = client
	m.create = func(ctx context.Context, ev *corev1.Event) (int64, error) {
		created, err := client.CoreV1().Events(ev.Namespace).Create(ctx, ev, metav1.CreateOptions{})
		if err != nil {
			return 0, err
		}
		return strconv.ParseInt(created.ResourceVersion, 10, 64)
	}
	return m
}

func (m *fleetBenchMember) mark() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.created0, m.missed0, m.latencies0 = m.created.Load(), m.missed.Load(), len(m.latencies)
}

func (m *fleetBenchMember) since() (created, missed int64, latencies []time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.created.Load() - m.created0, m.missed.Load() - m.missed0, slices.Clone(m.latencies[m.latencies0:])
}

// fleetBenchWritten is an Event created and the resourceVersion answered.
type fleetBenchWritten struct {
	name string
	rv   int64
}

// write creates rate Events a second until stop: a ticker hands each create
// to one of a pool of senders, and a tick no sender is free for is missed
// (an open loop, as kubelets do not slow down for a slow apiserver).
func (m *fleetBenchMember) write(ctx context.Context, rate int, stop <-chan struct{}) {
	// A second's creates in flight: with rate/10 senders a member whose
	// creates took 200 ms under load (nice 10, a full machine) capped its
	// writer at half the rate asked, the pool and not the member missing
	// the ticks.
	senders := max(4, rate)
	work := make(chan struct{}, senders)
	var wg sync.WaitGroup
	for w := 0; w < senders; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range work {
				i := m.seq.Add(1)
				now := metav1.Now()
				pod := fmt.Sprintf("pod-%d", i%500)
				name := fmt.Sprintf("%s.%d", pod, i)
				t0 := time.Now()
				rv, err := m.create(ctx, &corev1.Event{
					ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "load"},
					InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "load", Name: pod,
						UID: types.UID(fmt.Sprintf("uid-%d", i%500)), APIVersion: "v1"},
					Reason: "Pulled", Message: "Container image \"registry.k8s.io/pause:3.10\" already present on machine",
					Type: corev1.EventTypeNormal, Count: 1, FirstTimestamp: now, LastTimestamp: now,
					Source: corev1.EventSource{Component: "kubelet", Host: fmt.Sprintf("node-%d", i%50)},
				})
				if err != nil {
					m.missed.Add(1)
					continue
				}
				latency := time.Since(t0)
				for {
					old := m.newest.Load()
					if rv <= old || m.newest.CompareAndSwap(old, rv) {
						break
					}
				}
				m.created.Add(1)
				m.mu.Lock()
				m.latencies = append(m.latencies, latency)
				m.written = append(m.written, fleetBenchWritten{name, rv})
				m.mu.Unlock()
			}
		}()
	}
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	defer wg.Wait()
	defer close(work)
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
			select {
			case work <- struct{}{}:
			default:
				m.missed.Add(1)
			}
		}
	}
}

// fleetBenchSample is one scrape of the hub: per active member, its
// capture_lag_seconds, its capture_revision, and the newest resourceVersion
// its writer had been answered with just before.
type fleetBenchSample struct {
	at                time.Time
	lag               []float64
	captured, written []int64
}

func sampleFleet(t *testing.T, hub *framework.HistoryOnlyReplica, members []*fleetBenchMember) fleetBenchSample {
	t.Helper()
	s := fleetBenchSample{at: time.Now()}
	for _, m := range members {
		s.written = append(s.written, m.newest.Load())
	}
	// Uncompressed: gzip of the whole text twice a second was most of an
	// idle hub's CPU, the benchmark measuring itself.
	resp := hub.Client.Do(t, http.MethodGet, "/metrics", nil, map[string]string{"Accept-Encoding": "identity"})
	if resp.Code != http.StatusOK {
		t.Fatalf("hub /metrics: %d %s", resp.Code, resp.Body)
	}
	values := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(resp.Body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "event_apiserver_history_capture_lag_seconds{") && !strings.HasPrefix(line, "event_apiserver_history_capture_revision{") {
			continue
		}
		series, value, _ := strings.Cut(line, " ")
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			t.Fatalf("hub metric %q: %v", line, err)
		}
		values[series] = v
	}
	for _, m := range members {
		source := `{source="` + fleet.SourcePrefix + m.name + `"}`
		s.lag = append(s.lag, values["event_apiserver_history_capture_lag_seconds"+source])
		s.captured = append(s.captured, int64(values["event_apiserver_history_capture_revision"+source]))
	}
	return s
}

// endToEnd is how long member j's newest version at sample i took to be
// stored: until the first sample whose captured revision reached it (the
// window's end when none did, a lower bound).
func endToEnd(samples []fleetBenchSample, i, j int) float64 {
	want := samples[i].written[j]
	for _, s := range samples[i:] {
		if s.captured[j] >= want {
			return s.at.Sub(samples[i].at).Seconds()
		}
	}
	return samples[len(samples)-1].at.Sub(samples[i].at).Seconds()
}

// growing says whether the end-to-end lag rose through the window: the
// last third's mean above twice the first third's and above 2 s.
func growing(samples []fleetBenchSample, members int) bool {
	third := len(samples) / 3
	if third == 0 {
		return false
	}
	mean := func(from, to int) float64 {
		var sum float64
		for i := from; i < to; i++ {
			for j := 0; j < members; j++ {
				sum += endToEnd(samples, i, j)
			}
		}
		return sum / float64((to-from)*members)
	}
	// The last third ends where the window ends, where endToEnd of a
	// version not yet stored is cut short: compare the middle third.
	first, last := mean(0, third), mean(third, 2*third)
	return last > 2*first && last > 2
}

func pct(v []float64, p float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[min(len(s)-1, int(p*float64(len(s))))]
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(p*float64(len(sorted))))]
}

func mustCPU(t *testing.T, pid int) time.Duration {
	t.Helper()
	d, err := testbed.CPUTime(pid)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// postmasterPID reads the PostgreSQL server's pid from its data directory
// (pgtest's dsn names the directory as its socket host).
func postmasterPID(t *testing.T, dsn string) int {
	t.Helper()
	var dir string
	for _, f := range strings.Fields(dsn) {
		if v, ok := strings.CutPrefix(f, "host="); ok {
			dir = v
		}
	}
	data, err := os.ReadFile(filepath.Join(dir, "data", "postmaster.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(data), "\n", 2)[0]))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// processTreeCPU is the CPU time of pid and its children (PostgreSQL's
// backends are the postmaster's children), those still running.
func processTreeCPU(t *testing.T, pid int) time.Duration {
	t.Helper()
	total := mustCPU(t, pid)
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// The fields after the command name: state, ppid, ...
		i := bytes.LastIndexByte(stat, ')')
		if f := strings.Fields(string(stat[i+1:])); len(f) > 1 && f[1] == strconv.Itoa(pid) {
			if d, err := testbed.CPUTime(child); err == nil {
				total += d
			}
		}
	}
	return total
}

// machineCPU is the machine's busy and total jiffies (/proc/stat's cpu line).
func machineCPU(t *testing.T) (busy, total int64) {
	t.Helper()
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(strings.SplitN(string(data), "\n", 2)[0])
	for i, v := range f[1:] {
		n, _ := strconv.ParseInt(v, 10, 64)
		total += n
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return busy, total
}
