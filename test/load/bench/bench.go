// Package bench runs every workload against kube-apiserver v1.36.3 in two
// configurations and against event-apiserver, in alternation over several
// rounds, each server on a fresh etcd of its own, and measures the etcd
// ceiling beside them; it writes the raw results, a table of medians and a
// chart.
package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/eventapiserver/event-apiserver/internal/testbed"
	"github.com/eventapiserver/event-apiserver/test/load/workload"
)

// Servers under test, by the letter the table uses.
const (
	KubeDefault = "A"
	KubeCached  = "B"
	EventServer = "C"
	// DoorEvents and DoorKube run behind the nginx front door
	// (deploy/door), with kube-apiserver's core/v1 Events in a second
	// etcd as the door needs: D routes Events to an aggregated
	// event-apiserver, E is the same door with its Event routes removed,
	// so that E against A is what the door itself costs.
	DoorEvents = "D"
	DoorKube   = "E"
)

// isDoor says whether server s runs behind the front door.
func isDoor(s string) bool { return s == DoorEvents || s == DoorKube }

// Titles describe the servers in the table.
var Titles = map[string]string{
	KubeDefault: "kube-apiserver v1.36.3, default (Events watch cache off)",
	KubeCached:  "kube-apiserver v1.36.3, --watch-cache-sizes=events#1000 (Events watch cache on)",
	EventServer: "event-apiserver",
	DoorEvents:  "event-apiserver (aggregated) behind the nginx front door, kube-apiserver for the rest",
	DoorKube:    "kube-apiserver v1.36.3, default, behind the same nginx front door with its Event routes removed",
}

// Options configures Run.
type Options struct {
	EtcdBinary, KubeAPIServerBinary, EventAPIServerBinary string
	// EventAPIServerArgs are extra flags for event-apiserver.
	EventAPIServerArgs []string

	// Servers are the servers to compare, in the order each round runs
	// them (a subset of A, B, C).
	Servers []string
	Rounds  int

	// Sizes are the store sizes the describe workload runs at, ascending;
	// the last is also where memory and startup are measured.
	Sizes  []int
	Layout workload.Layout

	// Clients is the concurrency of create, recorder and etcd-ceiling.
	Clients int
	// Duration is how long each create variant, each recorder, the watch
	// writes and the ceiling run.
	Duration time.Duration

	Watchers, AllWatchers, WatchRate int

	DescribeRequests int
	DescribeTime     time.Duration

	// MemoryRest is how long a server's RSS must hold still before its
	// memory is sampled (workload.MemoryRest; 0 only where the figures do
	// not matter).
	MemoryRest time.Duration

	// WorkDir holds the etcd data and server logs.
	WorkDir string
	// ProfileDir, when set, gets CPU profiles of every server taken in one
	// extra round (not counted) during each workload, so that what a server
	// pays per write can be set against what the others pay.
	ProfileDir string
	// EtcdUnsafeNoFsync runs etcd with --unsafe-no-fsync.
	EtcdUnsafeNoFsync bool
	// EtcdNoLeaseCheckpoints runs etcd without lease checkpoints, which
	// every etcd of the test bed has otherwise, to price them.
	EtcdNoLeaseCheckpoints bool
	// RestCPU, when set, is how long the store's server and etcd are
	// watched at rest once the memory is sampled after the preload
	// (workload.RestCPU): the CPU each uses a second, etcd's writes.
	RestCPU time.Duration

	// Workloads are the workloads to run (see AllWorkloads); empty: all.
	Workloads []string
	// StormClients, StormRate: the storm's reporters and offered creates
	// a second.
	StormClients, StormRate int
	// StormEventAPIServerArgs are event-apiserver's extra flags for the
	// storm, in place of EventAPIServerArgs: none by default, so that its
	// write limits are its defaults, what the storm is about.
	StormEventAPIServerArgs []string
}

// Workload names for Options.Workloads. describe, memory and startup share
// the store deployment.
const (
	WorkloadCeiling  = "ceiling"
	WorkloadCreate   = "create"
	WorkloadRecorder = "recorder"
	WorkloadWatch    = "watch"
	WorkloadStorm    = "storm"
	WorkloadDescribe = "describe"
	WorkloadMemory   = "memory"
	WorkloadStartup  = "startup"
)

// AllWorkloads are the workloads a run without Options.Workloads runs, in
// the order they run.
var AllWorkloads = []string{WorkloadCeiling, WorkloadCreate, WorkloadRecorder, WorkloadWatch, WorkloadStorm,
	WorkloadDescribe, WorkloadMemory, WorkloadStartup}

// runs says whether workload w is to run.
func (o Options) runs(w string) bool {
	if len(o.Workloads) == 0 {
		return true
	}
	for _, x := range o.Workloads {
		if x == w {
			return true
		}
	}
	return false
}

// RunResult is one server's (or the ceiling's) measurements in one round.
type RunResult struct {
	Server       string                 `json:"server"`
	Round        int                    `json:"round"`
	Measurements []workload.Measurement `json:"measurements"`
	Error        string                 `json:"error,omitempty"`
}

// Results is everything a benchmark measured.
type Results struct {
	Options Options     `json:"options"`
	Started time.Time   `json:"started"`
	Elapsed string      `json:"elapsed"`
	Runs    []RunResult `json:"runs"`
}

// memorySettle is the pause between a server's readiness and its empty
// memory baseline.
const memorySettle = 2 * time.Second

// captureSettleLimit bounds the wait for event-apiserver's history capture
// to store what was preloaded before memory is sampled (at 100k Events on 2
// shared cores it takes tens of seconds).
const captureSettleLimit = 10 * time.Minute

// Ceiling is the pseudo-server name of the etcd ceiling's runs.
const Ceiling = "etcd"

// Run runs the rounds. A server that fails to start or a workload that
// fails is recorded in the results and the benchmark goes on; the error
// returned is the first such failure.
func Run(ctx context.Context, o Options) (*Results, error) {
	res := &Results{Options: o, Started: time.Now()}
	var firstErr error
	record := func(r RunResult, err error) {
		if err != nil {
			r.Error = err.Error()
			klog.ErrorS(err, "Benchmark run failed", "server", r.Server, "round", r.Round)
			if firstErr == nil {
				firstErr = fmt.Errorf("%s round %d: %w", r.Server, r.Round, err)
			}
		}
		res.Runs = append(res.Runs, r)
	}
	for round := 1; round <= o.Rounds; round++ {
		if o.runs(WorkloadCeiling) {
			r, err := runCeiling(ctx, o, round)
			record(r, err)
		}
		for _, s := range o.Servers {
			if ctx.Err() != nil {
				return res, ctx.Err()
			}
			if isDoor(s) {
				r, err := runDoor(ctx, o, s, round)
				record(r, err)
				continue
			}
			r, err := runServer(ctx, o, s, round, "")
			record(r, err)
		}
	}
	if o.ProfileDir != "" && ctx.Err() == nil {
		if err := os.MkdirAll(o.ProfileDir, 0o755); err != nil {
			return res, err
		}
		for _, s := range o.Servers {
			if ctx.Err() != nil {
				break
			}
			if isDoor(s) {
				continue
			}
			if _, err := runServer(ctx, o, s, 0, o.ProfileDir); err != nil && firstErr == nil {
				firstErr = fmt.Errorf("profiling round of %s: %w", s, err)
			}
		}
	}
	res.Elapsed = time.Since(res.Started).Round(time.Second).String()
	return res, firstErr
}

func runCeiling(ctx context.Context, o Options, round int) (RunResult, error) {
	r := RunResult{Server: Ceiling, Round: round}
	klog.InfoS("Measuring the etcd ceiling", "round", round)
	etcd, err := o.startEtcd(ctx, filepath.Join(o.WorkDir, fmt.Sprintf("round-%d", round), "ceiling"))
	if err != nil {
		return r, err
	}
	defer func() { _ = etcd.Process().Stop() }()
	r.Measurements, err = workload.Ceiling(ctx, workload.CeilingOptions{
		Endpoints: []string{etcd.ClientURL()}, EtcdPID: etcd.Process().PID(), Clients: o.Clients, Duration: o.Duration,
	})
	return r, err
}

// etcdProgressNotifyInterval is kubeadm's --watch-progress-notify-interval,
// so that both servers' watch caches see bookmarks at the pace a production
// etcd gives them. It is pkg/etcd's DefaultProgressNotifyInterval
// (TestEtcdProgressNotifyIntervalIsTheServers pins it), not imported so that
// the load tool does not link the embedded etcd server.
const etcdProgressNotifyInterval = 5 * time.Second

// startEtcd starts a fresh single-member etcd, with fsync unless
// EtcdUnsafeNoFsync: a benchmark measures etcd as it runs in production.
func (o Options) startEtcd(ctx context.Context, dir string) (*testbed.Etcd, error) {
	members, err := testbed.StartEtcd(ctx, testbed.EtcdOptions{
		Binary:                 o.EtcdBinary,
		Dir:                    dir,
		ProgressNotifyInterval: etcdProgressNotifyInterval,
		UnsafeNoFsync:          o.EtcdUnsafeNoFsync,
		NoLeaseCheckpoints:     o.EtcdNoLeaseCheckpoints,
		StartTimeout:           time.Minute,
		ExtraFlags:             []string{"--quota-backend-bytes=" + strconv.Itoa(8<<30), "--log-level=warn"},
	})
	if err != nil {
		return nil, err
	}
	return members[0], nil
}

// apiServer is what a benchmark needs of kube-apiserver or event-apiserver.
type apiServer interface {
	Process() *testbed.Process
	// Restart stops the server and starts it again with the same flags;
	// Startup is then the time from process start to the first /readyz 200.
	Restart(ctx context.Context) error
	Startup() time.Duration
}

// serverStartTimeout bounds the wait for a server's readiness.
const serverStartTimeout = 3 * time.Minute

// startServer starts server s over etcd in dir, with profiling on and
// --event-ttl=workload.EventTTL, event-apiserver with eventArgs, and returns
// it with an admin client configuration.
func (o Options) startServer(ctx context.Context, s, dir string, etcd *testbed.Etcd, eventArgs []string) (apiServer, *rest.Config, error) {
	switch s {
	case KubeDefault, KubeCached:
		k, err := testbed.StartKubeAPIServer(ctx, testbed.KubeAPIServerOptions{
			Binary: o.KubeAPIServerBinary, Dir: dir, EtcdServers: etcd.ClientURL(),
			AuthorizationMode: "AlwaysAllow", EventTTL: workload.EventTTL, Profiling: true,
			EventsWatchCache: s == KubeCached, StartTimeout: serverStartTimeout,
		})
		if err != nil {
			return nil, nil, err
		}
		return k, k.RestConfig(), nil
	case EventServer:
		e, err := testbed.StartServer(ctx, testbed.ServerOptions{
			Binary: o.EventAPIServerBinary, Dir: dir, EtcdServers: etcd.ClientURL(),
			EventTTL: workload.EventTTL, Profiling: true, ExtraArgs: eventArgs, StartTimeout: serverStartTimeout,
		})
		if err != nil {
			return nil, nil, err
		}
		config, err := e.RestConfig()
		if err != nil {
			_ = e.Process().Stop()
			return nil, nil, err
		}
		return e, config, nil
	}
	return nil, nil, fmt.Errorf("unknown server %q (want %s, %s or %s)", s, KubeDefault, KubeCached, EventServer)
}

// deployment is a server on its own fresh etcd.
type deployment struct {
	etcd   *testbed.Etcd
	server apiServer
	config *rest.Config
	kube   bool
}

func (o Options) deploy(ctx context.Context, s, dir string) (*deployment, error) {
	return o.deployWith(ctx, s, dir, o.EventAPIServerArgs)
}

// deployWith is deploy with event-apiserver's extra flags eventArgs.
func (o Options) deployWith(ctx context.Context, s, dir string, eventArgs []string) (*deployment, error) {
	etcd, err := o.startEtcd(ctx, filepath.Join(dir, "etcd"))
	if err != nil {
		return nil, err
	}
	server, config, err := o.startServer(ctx, s, filepath.Join(dir, "server"), etcd, eventArgs)
	if err != nil {
		_ = etcd.Process().Stop()
		return nil, err
	}
	return &deployment{etcd: etcd, server: server, config: config, kube: s != EventServer}, nil
}

func (d *deployment) target() (workload.Target, error) {
	return workload.Target{
		Config: rest.CopyConfig(d.config), ServerPID: d.server.Process().PID(), EtcdPID: d.etcd.Process().PID(),
		NeedsNamespaces: d.kube, SetSelectors: !d.kube,
	}, nil
}

func (d *deployment) stop() {
	_ = d.server.Process().Stop()
	_ = d.etcd.Process().Stop()
}

// runServer runs every workload against server s: the writing workloads
// (create, recorder, watch) on one fresh etcd, the store workloads
// (describe at each size, memory, startup) on another, so that neither
// sees the other's Events. With profileDir set it takes CPU profiles.
func runServer(ctx context.Context, o Options, s string, round int, profileDir string) (RunResult, error) {
	r := RunResult{Server: s, Round: round}
	dir := filepath.Join(o.WorkDir, fmt.Sprintf("round-%d", round), s)
	klog.InfoS("Running workloads", "server", s, "round", round, "title", Titles[s])
	add := func(ms []workload.Measurement, err error) error {
		for _, m := range ms {
			klog.V(1).InfoS("Measured", "server", s, "round", round, "m", m.String())
		}
		r.Measurements = append(r.Measurements, ms...)
		return err
	}
	profile := func(t workload.Target, name string, d time.Duration) func() {
		if profileDir == "" {
			return func() {}
		}
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			path := filepath.Join(profileDir, s+"-"+name+".pprof")
			if err := workload.CPUProfile(ctx, t, d, path); err != nil {
				klog.ErrorS(err, "CPU profile failed", "workload", name)
			}
		}()
		return wg.Wait
	}

	if o.runs(WorkloadCreate) || o.runs(WorkloadRecorder) || o.runs(WorkloadWatch) {
		if err := o.runWrites(ctx, s, filepath.Join(dir, "writes"), add, profile); err != nil {
			return r, err
		}
	}
	if o.runs(WorkloadStorm) {
		if err := o.runStorm(ctx, s, filepath.Join(dir, "storm"), add, profile); err != nil {
			return r, err
		}
	}
	if !o.runs(WorkloadDescribe) && !o.runs(WorkloadMemory) && !o.runs(WorkloadStartup) {
		return r, nil
	}

	// Store: describe, memory and startup, together.
	d, err := o.deploy(ctx, s, filepath.Join(dir, "store"))
	if err != nil {
		return r, err
	}
	defer d.stop()
	t, err := d.target()
	if err != nil {
		return r, err
	}
	emptyStartup := d.server.Startup()
	// Let start-up work (kube-apiserver's bootstrap controllers) and its
	// garbage settle before the baseline.
	select {
	case <-ctx.Done():
		return r, ctx.Err()
	case <-time.After(memorySettle):
	}
	empty, err := workload.SampleMemory(ctx, t, o.MemoryRest)
	if err != nil {
		return r, err
	}
	loaded, preloaded := 0, workload.PreloadResult{}
	for _, size := range o.Sizes {
		pre, err := workload.Preload(ctx, workload.PreloadOptions{Endpoints: []string{d.etcd.ClientURL()}, Layout: o.Layout, From: loaded, To: size})
		if err != nil {
			return r, err
		}
		klog.InfoS("Preloaded", "server", s, "events", size, "took", pre.Elapsed.Round(time.Millisecond))
		loaded = size
		preloaded.Events += pre.Events
		preloaded.Bytes += pre.Bytes
		// The preload writes straight to etcd far faster than any cluster
		// writes Events (100k in seconds); event-apiserver's history capture
		// then stores them for tens of seconds, and describe timed meanwhile
		// measured that digestion (p99 of seconds at 100k, nothing of it once
		// capture had caught up; docs/benchmarks-log.md). Reads under writes
		// are the storm workload's.
		if err := settleCapture(ctx, t, d, s, "describe", fmt.Sprintf("history capture settled before describe @%d", size), add); err != nil {
			return r, err
		}
		done := func() {}
		if size == o.Sizes[len(o.Sizes)-1] {
			done = profile(t, "describe", time.Duration(len(workload.Queries))*o.DescribeTime)
		}
		err = add(workload.Describe(ctx, t, workload.DescribeOptions{
			Layout: o.Layout, Size: size, Requests: o.DescribeRequests, MaxTime: o.DescribeTime,
		}))
		done()
		if err != nil {
			return r, err
		}
	}
	settle := func(when string) {
		_ = settleCapture(ctx, t, d, s, "memory", "history capture settled"+when, add)
		if profileDir != "" {
			path := filepath.Join(profileDir, s+"-heap"+strings.ReplaceAll(when, " ", "-")+".pprof")
			if err := workload.HeapProfile(ctx, t, path); err != nil {
				klog.ErrorS(err, "Heap profile failed", "when", when)
			}
		}
	}
	valueBytes := float64(preloaded.Bytes) / float64(max(1, preloaded.Events))
	settle("")
	full, err := workload.SampleMemory(ctx, t, o.MemoryRest)
	if err != nil {
		return r, err
	}
	_ = add(workload.MemoryMeasurements(loaded, valueBytes, empty, full, ""), nil)
	if o.RestCPU > 0 {
		if err := add(workload.RestCPU(ctx, t, d.etcd.ClientURL(), loaded, o.RestCPU, "")); err != nil {
			return r, err
		}
	}

	// Ready is not always serving (a watch cache still filling answers
	// 429), nor is serving always ready (a server may answer LISTs from
	// etcd before its cache is filled): the first describe LIST is timed
	// from the new process's start by polling beside the wait for /readyz.
	before := d.server.Process().StartedAt()
	restarted := make(chan error, 1)
	go func() { restarted <- d.server.Restart(ctx) }()
	var restartErr error
	restartDone := false
	_ = wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		select {
		case restartErr = <-restarted:
			restartDone = true
			return true, nil
		default:
		}
		return d.server.Process().StartedAt().After(before), nil
	})
	served, servedErr := workload.FirstServed(ctx, t, o.Layout, loaded, d.server.Process().StartedAt())
	if !restartDone {
		restartErr = <-restarted
	}
	startup := d.server.Startup()
	if restartErr != nil {
		return r, fmt.Errorf("restarting with %d Events: %w", loaded, restartErr)
	}
	if servedErr != nil {
		return r, fmt.Errorf("after restarting with %d Events: %w", loaded, servedErr)
	}
	_ = add([]workload.Measurement{
		{Workload: "startup", Metric: fmt.Sprintf("to /readyz @%d", loaded), Unit: "s", Value: startup.Seconds(), Better: workload.Lower, Count: 1},
		{Workload: "startup", Metric: fmt.Sprintf("to first describe LIST served @%d", loaded), Unit: "s", Value: served.Seconds(), Better: workload.Lower, Count: 1},
		{Workload: "startup", Metric: "to /readyz empty", Unit: "s", Value: emptyStartup.Seconds(), Better: workload.Info, Count: 1},
	}, nil)

	// The same store at rest: a cache filled by one LIST holds no history
	// of the writes that made the store (the watch cache's ring of recent
	// watch events and the store snapshots kept for them), which the sample
	// above, taken right after preloading, includes.
	// The restarted server is a new process.
	if t, err = d.target(); err != nil {
		return r, err
	}
	if s != KubeDefault {
		if err := workload.WaitCacheFilled(ctx, t, captureSettleLimit); err != nil {
			return r, fmt.Errorf("watch cache not filled after restarting with %d Events: %w", loaded, err)
		}
	}
	settle(" after restart")
	rested, err := workload.SampleMemory(ctx, t, o.MemoryRest)
	if err != nil {
		return r, err
	}
	_ = add(workload.MemoryMeasurements(loaded, valueBytes, empty, rested, " after restart"), nil)
	return r, nil
}

// settleCapture waits until event-apiserver's history capture has stored
// what etcd holds (workload.SettleCapture) and records how long that took as
// metric of workload wl; a capture that does not settle is logged, and what follows is
// measured anyway. Only the context's end is an error.
func settleCapture(ctx context.Context, t workload.Target, d *deployment, s, wl, metric string, add recordFunc) error {
	waited, ok, err := workload.SettleCapture(ctx, t, []string{d.etcd.ClientURL()}, captureSettleLimit)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil {
		klog.ErrorS(err, "History capture did not settle; measuring anyway", "server", s, "metric", metric)
	}
	if ok {
		_ = add([]workload.Measurement{{Workload: wl, Metric: metric, Unit: "s",
			Value: waited.Seconds(), Better: workload.Info, Count: 1}}, nil)
	}
	return nil
}

// recordFunc adds measurements to a run's result and passes err on.
type recordFunc func(ms []workload.Measurement, err error) error

// profileFunc starts a CPU profile of a workload of length d and returns
// the wait for it.
type profileFunc func(t workload.Target, name string, d time.Duration) func()

// runWrites runs create, recorder and watch, as selected, on one fresh
// deployment of server s.
func (o Options) runWrites(ctx context.Context, s, dir string, add recordFunc, profile profileFunc) error {
	return o.onDeployment(ctx, s, dir, o.EventAPIServerArgs, func(t workload.Target) error {
		return o.writes(ctx, t, add, profile)
	})
}

// onDeployment runs f against a fresh deployment of server s
// (event-apiserver with eventArgs), and stops it.
func (o Options) onDeployment(ctx context.Context, s, dir string, eventArgs []string, f func(workload.Target) error) error {
	d, err := o.deployWith(ctx, s, dir, eventArgs)
	if err != nil {
		return err
	}
	defer d.stop()
	t, err := d.target()
	if err != nil {
		return err
	}
	return f(t)
}

// writes runs create, recorder and watch, as selected, against t.
func (o Options) writes(ctx context.Context, t workload.Target, add recordFunc, profile profileFunc) error {
	for _, api := range []string{workload.CoreV1, workload.EventsV1} {
		for _, ct := range []string{workload.Protobuf, workload.JSON} {
			if !o.runs(WorkloadCreate) {
				break
			}
			done := func() {}
			if api == workload.CoreV1 && ct == workload.Protobuf {
				done = profile(t, "create", o.Duration)
			}
			err := add(workload.Create(ctx, t, workload.CreateOptions{API: api, ContentType: ct, Clients: o.Clients, Duration: o.Duration}))
			done()
			if err != nil {
				return err
			}
		}
	}
	for _, rec := range []string{workload.LegacyRecorder, workload.SeriesRecorder} {
		if !o.runs(WorkloadRecorder) {
			break
		}
		done := profile(t, "recorder-"+rec, o.Duration)
		err := add(workload.Recorder(ctx, t, workload.RecorderOptions{Recorder: rec, Clients: o.Clients, Duration: o.Duration}))
		done()
		if err != nil {
			return err
		}
	}
	if !o.runs(WorkloadWatch) {
		return nil
	}
	done := profile(t, "watch", o.Duration)
	err := add(workload.Watch(ctx, t, workload.WatchOptions{
		Selectors: o.Watchers, All: o.AllWatchers, Rate: o.WatchRate, Duration: o.Duration,
	}))
	done()
	return err
}

// runStorm runs the storm on a fresh deployment of server s,
// event-apiserver with its write limits at StormEventAPIServerArgs.
func (o Options) runStorm(ctx context.Context, s, dir string, add recordFunc, profile profileFunc) error {
	return o.onDeployment(ctx, s, dir, o.StormEventAPIServerArgs, func(t workload.Target) error {
		return add(workload.Storm(ctx, t, workload.StormOptions{
			Clients: o.StormClients, Rate: o.StormRate, Duration: o.Duration,
			Refusing:  s == EventServer && len(o.StormEventAPIServerArgs) == 0,
			Measuring: func() func() { return profile(t, "storm", o.Duration) },
		}))
	})
}

// WriteJSON writes the results to path.
func (r *Results) WriteJSON(path string) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

// ReadResults reads what WriteJSON wrote.
func ReadResults(path string) (*Results, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	r := &Results{}
	if err := json.Unmarshal(data, r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}
