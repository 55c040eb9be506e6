package app

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"

	"github.com/eventapiserver/event-apiserver/test/load/bench"
	"github.com/eventapiserver/event-apiserver/test/load/workload"
)

// benchOptions are bench's flags.
type benchOptions struct {
	bench.Options
	servers   string
	events    int
	sizes     []int
	outDir    string
	chartPath string
	keepWork  bool
	workloads []string

	etcdLeaseCheckpoints bool
	extraEventArgs       []string
}

// defaultEventAPIServerArgs switch off all of event-apiserver's write
// limits (per reporter, per user, global, in writes and in bytes):
// kube-apiserver has none, and the benchmark compares what each server can
// take. All the load tool's clients are one user, whose default budget
// (burst 5000, then 100 a second) the writes workloads would otherwise
// spend halfway through.
var defaultEventAPIServerArgs = []string{
	"--event-rate-limit-qps=0", "--event-rate-limit-update-qps=0", "--event-rate-limit-global-qps=0",
	"--event-rate-limit-user-qps=0", "--event-rate-limit-bytes-qps=0", "--event-rate-limit-global-bytes-qps=0",
}

func newBenchCommand() *cobra.Command {
	o := &benchOptions{
		Options: bench.Options{
			EtcdBinary:           "_output/bin/etcd",
			KubeAPIServerBinary:  "_output/bin/kube-apiserver",
			EventAPIServerBinary: "_output/bin/event-apiserver",
			EventAPIServerArgs:   defaultEventAPIServerArgs,
			Rounds:               3,
			Layout:               workload.DefaultLayout,
			Clients:              8,
			Duration:             3 * time.Second,
			Watchers:             100,
			AllWatchers:          2,
			WatchRate:            200,
			DescribeRequests:     20,
			DescribeTime:         2 * time.Second,
			MemoryRest:           workload.MemoryRest,
			StormClients:         32,
			StormRate:            2000,
		},
		servers: "A,B,C",
		events:  10000,
		outDir:  "_output/bench",
	}
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Every workload against kube-apiserver (A: default, B: Events watch cache on) and event-apiserver (C), in turn, each on a fresh etcd",
		Long: "Runs rounds of A, B, C (each server on its own fresh etcd: one for create, recorder and watch, " +
			"another for describe at each store size, memory and startup) plus the etcd ceiling, then writes " +
			"results.json, table.md (medians, ratios C/A and C/B, share of the etcd ceiling) and describe.svg " +
			"to --out-dir, and prints the table.",
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error { return o.run() },
	}
	fs := cmd.Flags()
	fs.StringVar(&o.EtcdBinary, "etcd-binary", o.EtcdBinary, "etcd (hack/build-etcd.sh)")
	fs.StringVar(&o.KubeAPIServerBinary, "kube-apiserver-binary", o.KubeAPIServerBinary, "kube-apiserver v1.36.3 (hack/build-kube.sh)")
	fs.StringVar(&o.EventAPIServerBinary, "event-apiserver-binary", o.EventAPIServerBinary, "event-apiserver built from this checkout")
	fs.StringSliceVar(&o.EventAPIServerArgs, "event-apiserver-args", o.EventAPIServerArgs, "extra event-apiserver flags (default: its write limits off, as kube-apiserver has none)")
	fs.StringVar(&o.servers, "servers", o.servers, "servers to compare, in round order: A (kube-apiserver default), B (kube-apiserver, Events watch cache on), C (event-apiserver), "+
		"D (event-apiserver behind the nginx front door, deploy/door), E (kube-apiserver behind the same door, Event routes removed); "+
		"D and E run create, recorder, watch and describe only, and need nginx with njs")
	fs.IntVar(&o.Rounds, "rounds", o.Rounds, "rounds of every server; the table shows medians")
	fs.IntVar(&o.events, "events", o.events, "largest preloaded store: describe runs at 1000, 10000, ... up to it; memory and startup at it")
	fs.IntSliceVar(&o.sizes, "sizes", nil, "store sizes for describe instead of the decades up to --events (the last: memory, startup)")
	fs.IntVar(&o.Layout.Namespaces, "namespaces", o.Layout.Namespaces, "namespaces of the preloaded store")
	fs.IntVar(&o.Layout.EventsPerPod, "events-per-pod", o.Layout.EventsPerPod, "Events per pod in the preloaded store")
	fs.IntVar(&o.Clients, "clients", o.Clients, "concurrent clients for create, recorder and the etcd ceiling")
	fs.DurationVar(&o.Duration, "duration", o.Duration, "length of each create variant, recorder, the watch writes and the ceiling")
	fs.IntVar(&o.Watchers, "watchers", o.Watchers, "field-selector watchers")
	fs.IntVar(&o.AllWatchers, "all-watchers", o.AllWatchers, "watchers of all Events")
	fs.IntVar(&o.WatchRate, "watch-rate", o.WatchRate, "Events a second written under watch")
	fs.IntVar(&o.DescribeRequests, "describe-requests", o.DescribeRequests, "most requests per describe query and store size")
	fs.DurationVar(&o.DescribeTime, "describe-time", o.DescribeTime, "time per describe query and store size (at least 3 requests)")
	fs.DurationVar(&o.MemoryRest, "memory-rest", o.MemoryRest, "memory: how long a server's RSS must hold still (after two forced GCs) before it is sampled")
	fs.StringVar(&o.WorkDir, "work-dir", "", "etcd data and server logs (default: a new temporary directory, removed after a successful run)")
	fs.BoolVar(&o.keepWork, "keep-work-dir", false, "keep --work-dir after a successful run")
	fs.StringVar(&o.outDir, "out-dir", o.outDir, "where results.json, table.md and describe.svg go")
	fs.StringVar(&o.chartPath, "chart", "", "also write the describe chart here (e.g. docs/benchmarks-describe.svg)")
	fs.StringVar(&o.ProfileDir, "profile-dir", "", "take CPU profiles of every server during each workload in one extra round, into this directory")
	fs.StringSliceVar(&o.workloads, "workloads", nil, "workloads to run (default all): "+strings.Join(bench.AllWorkloads, ",")+"; describe, memory and startup run together")
	fs.IntVar(&o.StormClients, "storm-clients", o.StormClients, "storm: reporters (kubelets), each on its own connection, and the most writes in flight")
	fs.IntVar(&o.StormRate, "storm-rate", o.StormRate, "storm: offered creates a second, all reporters together, well above event-apiserver's default budgets")
	fs.StringSliceVar(&o.StormEventAPIServerArgs, "storm-event-apiserver-args", nil, "extra event-apiserver flags for the storm (default none: its default write limits)")
	fs.BoolVar(&o.EtcdUnsafeNoFsync, "etcd-unsafe-no-fsync", false, "run etcd with --unsafe-no-fsync")
	fs.BoolVar(&o.etcdLeaseCheckpoints, "etcd-lease-checkpoints", true, "run etcd with lease checkpoints (--feature-gates=LeaseCheckpoint=true,LeaseCheckpointPersist=true), as every etcd of this project runs; false prices them")
	fs.DurationVar(&o.RestCPU, "rest-cpu", 0, "once the memory is sampled after the preload, watch the store's server and etcd at rest this long: CPU a second, etcd's revisions and raft proposals a second (0: skip)")
	fs.StringSliceVar(&o.extraEventArgs, "event-apiserver-extra-args", nil, "event-apiserver flags added after --event-apiserver-args (e.g. --event-ttl-backstop-interval=0)")
	return cmd
}

// decades are 1000, 10000, ... up to n, and n itself.
func decades(n int) []int {
	var out []int
	for s := 1000; s < n; s *= 10 {
		out = append(out, s)
	}
	return append(out, n)
}

func (o *benchOptions) run() error {
	for _, s := range strings.Split(o.servers, ",") {
		if s = strings.TrimSpace(s); s != "" {
			if _, ok := bench.Titles[s]; !ok {
				return fmt.Errorf("--servers: unknown server %q (want A, B, C, D or E)", s)
			}
			o.Servers = append(o.Servers, s)
		}
	}
	for _, w := range o.workloads {
		if !slices.Contains(bench.AllWorkloads, w) {
			return fmt.Errorf("--workloads: unknown workload %q (want some of %s)", w, strings.Join(bench.AllWorkloads, ","))
		}
	}
	o.Workloads = o.workloads
	o.EtcdNoLeaseCheckpoints = !o.etcdLeaseCheckpoints
	o.EventAPIServerArgs = append(slices.Clone(o.EventAPIServerArgs), o.extraEventArgs...)
	o.Sizes = o.sizes
	if len(o.Sizes) == 0 {
		o.Sizes = decades(o.events)
	}
	sort.Ints(o.Sizes)
	if o.Sizes[0] < o.Layout.EventsPerPod {
		return fmt.Errorf("store sizes must hold at least one pod's %d Events", o.Layout.EventsPerPod)
	}
	for _, bin := range []*string{&o.EtcdBinary, &o.KubeAPIServerBinary, &o.EventAPIServerBinary} {
		abs, err := filepath.Abs(*bin)
		if err != nil {
			return err
		}
		*bin = abs
	}
	temporary := o.WorkDir == ""
	if temporary {
		dir, err := os.MkdirTemp("", "event-load-bench-")
		if err != nil {
			return err
		}
		o.WorkDir = dir
	}
	if err := os.MkdirAll(o.outDir, 0o755); err != nil {
		return err
	}

	ctx, cancel := signalContext()
	defer cancel()
	klog.InfoS("Benchmark starting", "servers", o.Servers, "rounds", o.Rounds, "sizes", o.Sizes, "workDir", o.WorkDir)
	res, runErr := bench.Run(ctx, o.Options)
	if res != nil {
		table := res.Markdown()
		svg := res.DescribeChartSVG()
		for path, data := range map[string]string{
			filepath.Join(o.outDir, "table.md"):     table,
			filepath.Join(o.outDir, "describe.svg"): svg,
		} {
			if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
				return err
			}
		}
		if o.chartPath != "" {
			if err := os.WriteFile(o.chartPath, []byte(svg), 0o644); err != nil {
				return err
			}
		}
		if err := res.WriteJSON(filepath.Join(o.outDir, "results.json")); err != nil {
			return err
		}
		fmt.Print(table)
		fmt.Printf("\nElapsed: %s. Results in %s.\n", res.Elapsed, o.outDir)
	}
	if runErr != nil {
		klog.InfoS("Keeping the work directory for its logs", "workDir", o.WorkDir)
		return runErr
	}
	if temporary && !o.keepWork {
		return os.RemoveAll(o.WorkDir)
	}
	return nil
}

func newReportCommand() *cobra.Command {
	var resultsPath, chartPath string
	cmd := &cobra.Command{
		Use:   "report --results FILE",
		Short: "Print the table of a bench run's results.json again, and redraw its chart",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			res, err := bench.ReadResults(resultsPath)
			if err != nil {
				return err
			}
			if chartPath != "" {
				if err := os.WriteFile(chartPath, []byte(res.DescribeChartSVG()), 0o644); err != nil {
					return err
				}
			}
			fmt.Print(res.Markdown())
			return nil
		},
	}
	cmd.Flags().StringVar(&resultsPath, "results", "", "results.json of a bench run")
	cmd.Flags().StringVar(&chartPath, "chart", "", "write the describe chart (SVG) here")
	return cmd
}
