// Package app is event-load's command line: one subcommand per workload
// against a running server, and bench, which starts the servers itself.
package app

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/eventapiserver/event-apiserver/internal/testbed"
	"github.com/eventapiserver/event-apiserver/test/load/workload"
)

// NewCommand is the root command.
func NewCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "event-load",
		Short: "Event workloads for an Events API server and its etcd, and the side-by-side benchmark",
		Long: "event-load puts recorder-like Event load on kube-apiserver or event-apiserver: creates, " +
			"client-go recorders, the LISTs of kubectl describe and kubectl events, watches; it measures " +
			"memory and startup, writes Events straight to etcd (preload, and the etcd ceiling), and " +
			"`event-load bench` runs all of it against kube-apiserver and event-apiserver in turn.",
		SilenceUsage: true,
	}
	root.AddCommand(
		newCreateCommand(), newRecorderCommand(), newDescribeCommand(), newWatchCommand(),
		newMemoryCommand(), newStartupCommand(), newCeilingCommand(), newPreloadCommand(),
		newBenchCommand(), newReportCommand(),
	)
	return root
}

// signalContext ends on SIGINT or SIGTERM.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// targetOptions say which server a workload runs against.
type targetOptions struct {
	kubeconfig      string
	serverPID       int
	etcdPID         int
	needsNamespaces bool
	json            bool
}

func (o *targetOptions) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of an admin of the server under load (default $KUBECONFIG)")
	fs.IntVar(&o.serverPID, "server-pid", 0, "the server's process id, to measure its CPU time and memory from /proc")
	fs.IntVar(&o.etcdPID, "etcd-pid", 0, "etcd's process id, to measure its CPU time and memory from /proc")
	fs.BoolVar(&o.needsNamespaces, "create-namespaces", false, "create the workload's namespaces first (kube-apiserver refuses Events in a namespace that does not exist)")
	fs.BoolVar(&o.json, "json", false, "print measurements as JSON")
}

func (o *targetOptions) target() (workload.Target, error) {
	if o.kubeconfig == "" {
		return workload.Target{}, fmt.Errorf("--kubeconfig (or $KUBECONFIG) is required")
	}
	config, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return workload.Target{}, err
	}
	return workload.Target{Config: config, ServerPID: o.serverPID, EtcdPID: o.etcdPID, NeedsNamespaces: o.needsNamespaces,
		SetSelectors: !o.needsNamespaces}, nil
}

// print writes measurements one a line, or as JSON.
func print(ms []workload.Measurement, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(ms)
	}
	for _, m := range ms {
		fmt.Println(m.String())
	}
	return nil
}

// run wraps a workload: it builds the target, runs under a signal context
// and prints what came back.
func run(o *targetOptions, f func(ctx context.Context, t workload.Target) ([]workload.Measurement, error)) func(*cobra.Command, []string) error {
	return func(*cobra.Command, []string) error {
		t, err := o.target()
		if err != nil {
			return err
		}
		ctx, cancel := signalContext()
		defer cancel()
		ms, err := f(ctx, t)
		if perr := print(ms, o.json); perr != nil && err == nil {
			err = perr
		}
		return err
	}
}

func newCreateCommand() *cobra.Command {
	var t targetOptions
	o := workload.CreateOptions{API: workload.CoreV1, ContentType: workload.Protobuf, Clients: 8, Duration: 10 * time.Second}
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Clients create recorder-like Events back to back; creates/s and latency",
		Args:  cobra.NoArgs,
		RunE: run(&t, func(ctx context.Context, tg workload.Target) ([]workload.Measurement, error) {
			return workload.Create(ctx, tg, o)
		}),
	}
	t.addFlags(cmd.Flags())
	cmd.Flags().StringVar(&o.API, "api", o.API, "API to write through: core/v1 (kubelet-like Events) or events.k8s.io/v1 (scheduler-like)")
	cmd.Flags().StringVar(&o.ContentType, "content-type", o.ContentType, "protobuf or json")
	cmd.Flags().IntVar(&o.Clients, "clients", o.Clients, "clients, each on its own connection")
	cmd.Flags().DurationVar(&o.Duration, "duration", o.Duration, "how long to create")
	return cmd
}

func newRecorderCommand() *cobra.Command {
	var t targetOptions
	o := workload.RecorderOptions{Recorder: workload.LegacyRecorder, Clients: 8, Duration: 10 * time.Second, Pods: 50}
	cmd := &cobra.Command{
		Use:   "recorder",
		Short: "client-go's tools/record or tools/events recorders emit repeated Events (POST, then PATCH); writes/s",
		Args:  cobra.NoArgs,
		RunE: run(&t, func(ctx context.Context, tg workload.Target) ([]workload.Measurement, error) {
			return workload.Recorder(ctx, tg, o)
		}),
	}
	t.addFlags(cmd.Flags())
	cmd.Flags().StringVar(&o.Recorder, "recorder", o.Recorder, "record (tools/record, core/v1: every repeat a PATCH) or events (tools/events, events.k8s.io/v1: create, then one series PATCH)")
	cmd.Flags().IntVar(&o.Clients, "clients", o.Clients, "recorders (broadcaster and connection each)")
	cmd.Flags().DurationVar(&o.Duration, "duration", o.Duration, "how long to emit")
	cmd.Flags().IntVar(&o.Pods, "pods", o.Pods, "objects each record recorder repeats Events about")
	return cmd
}

func addLayoutFlags(fs *pflag.FlagSet, l *workload.Layout) {
	fs.IntVar(&l.Namespaces, "namespaces", l.Namespaces, "namespaces the preloaded store spreads its pods over")
	fs.IntVar(&l.EventsPerPod, "events-per-pod", l.EventsPerPod, "Events per pod in the preloaded store")
}

func newDescribeCommand() *cobra.Command {
	var t targetOptions
	o := workload.DescribeOptions{Layout: workload.DefaultLayout, Size: 10000, Requests: 20, MaxTime: 3 * time.Second}
	cmd := &cobra.Command{
		Use:   "describe",
		Short: "Time the field-selector LISTs of kubectl describe pod, kubectl events --for (and -A) against a preloaded store",
		Long: "Times the Event LISTs kubectl sends (limit 500, JSON) for random pods of a store preloaded with " +
			"`event-load preload` (same --events and layout flags), one request at a time, and checks each answer.",
		Args: cobra.NoArgs,
		RunE: run(&t, func(ctx context.Context, tg workload.Target) ([]workload.Measurement, error) {
			return workload.Describe(ctx, tg, o)
		}),
	}
	t.addFlags(cmd.Flags())
	addLayoutFlags(cmd.Flags(), &o.Layout)
	cmd.Flags().IntVar(&o.Size, "events", o.Size, "Events in the preloaded store")
	cmd.Flags().IntVar(&o.Requests, "requests", o.Requests, "most requests per query")
	cmd.Flags().DurationVar(&o.MaxTime, "max-time", o.MaxTime, "time per query (at least 3 requests run)")
	return cmd
}

func newWatchCommand() *cobra.Command {
	var t targetOptions
	o := workload.WatchOptions{Selectors: 100, All: 2, Rate: 200, Duration: 10 * time.Second, Connections: 10}
	cmd := &cobra.Command{
		Use:   "watch",
		Short: "Watchers with and without field selectors while Events are written; create-to-receipt latency",
		Args:  cobra.NoArgs,
		RunE: run(&t, func(ctx context.Context, tg workload.Target) ([]workload.Measurement, error) {
			return workload.Watch(ctx, tg, o)
		}),
	}
	t.addFlags(cmd.Flags())
	cmd.Flags().IntVar(&o.Selectors, "watchers", o.Selectors, "watchers with a field selector on one pod each (kubectl events --for pod/x --watch)")
	cmd.Flags().IntVar(&o.All, "all-watchers", o.All, "watchers of all Events in all namespaces")
	cmd.Flags().IntVar(&o.Rate, "rate", o.Rate, "Events written a second")
	cmd.Flags().DurationVar(&o.Duration, "duration", o.Duration, "how long to write")
	cmd.Flags().IntVar(&o.Connections, "connections", o.Connections, "connections the watchers of each kind share")
	return cmd
}

func newMemoryCommand() *cobra.Command {
	var t targetOptions
	cmd := &cobra.Command{
		Use:   "memory",
		Short: "The server's RSS and Go heap in use, and etcd's RSS, now",
		Long: "Has the server run two GCs, then reads VmRSS of --server-pid from /proc and go_memstats_heap_inuse_bytes " +
			"from the server's /metrics until the RSS has held still for 3 s (the least of the samples: the server at rest), " +
			"go_gc_heap_live_bytes (the heap the last GC found live), and VmRSS of --etcd-pid. bench takes it on an empty " +
			"server and after preloading, and reports the growth per Event.",
		Args: cobra.NoArgs,
		RunE: run(&t, func(ctx context.Context, tg workload.Target) ([]workload.Measurement, error) {
			s, err := workload.SampleMemory(ctx, tg, workload.MemoryRest)
			if err != nil {
				return nil, err
			}
			mib := func(b int64) float64 { return float64(b) / (1 << 20) }
			return []workload.Measurement{
				{Workload: "memory", Metric: "server RSS", Unit: "MiB", Value: mib(s.ServerRSS), Better: workload.Lower},
				{Workload: "memory", Metric: "server Go heap in use", Unit: "MiB", Value: mib(s.HeapInuse), Better: workload.Lower},
				{Workload: "memory", Metric: "server Go live heap", Unit: "MiB", Value: mib(s.HeapLive), Better: workload.Lower},
				{Workload: "memory", Metric: "etcd RSS", Unit: "MiB", Value: mib(s.EtcdRSS), Better: workload.Info},
			}, nil
		}),
	}
	t.addFlags(cmd.Flags())
	return cmd
}

// startupTimeout bounds the wait for the server's /readyz.
const startupTimeout = 3 * time.Minute

func newStartupCommand() *cobra.Command {
	var kubeconfig, logPath string
	cmd := &cobra.Command{
		Use:   "startup --kubeconfig FILE -- SERVER [FLAGS...]",
		Short: "Start a server and time it from process start to /readyz",
		Long: "Runs SERVER with its FLAGS, polls /readyz every 50ms with the credentials of --kubeconfig, " +
			"prints the time from process start to the first 200, and stops the server.",
		Args: cobra.MinimumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
			if err != nil {
				return err
			}
			ctx, cancel := signalContext()
			defer cancel()
			p := &testbed.Process{Name: args[0], Path: args[0], Args: args[1:], LogPath: logPath}
			if err := p.Start(); err != nil {
				return err
			}
			defer func() { _ = p.Stop() }()
			ctx, cancelStart := context.WithTimeout(ctx, startupTimeout)
			defer cancelStart()
			startup, err := testbed.WaitReadyz(ctx, p, func() (*rest.Config, error) { return config, nil })
			if err != nil {
				return err
			}
			return print([]workload.Measurement{{Workload: "startup", Metric: "to /readyz", Unit: "s", Value: startup.Seconds(), Better: workload.Lower, Count: 1}}, false)
		},
	}
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig that reaches the server once it runs")
	cmd.Flags().StringVar(&logPath, "log", "startup.log", "file for the server's output")
	return cmd
}

// etcdFlags are the flags of the workloads that talk to etcd directly.
type etcdFlags struct {
	endpoints string
}

func (e *etcdFlags) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&e.endpoints, "etcd-servers", "http://127.0.0.1:2379", "etcd client URLs, comma-separated")
}

func (e *etcdFlags) list() []string { return strings.Split(e.endpoints, ",") }

func newCeilingCommand() *cobra.Command {
	var e etcdFlags
	var asJSON bool
	o := workload.CeilingOptions{Clients: 8, Duration: 10 * time.Second}
	cmd := &cobra.Command{
		Use:   "etcd-ceiling",
		Short: "The create workload written straight to etcd (the servers' create transaction, encoding and leases): the most this etcd takes",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			ctx, cancel := signalContext()
			defer cancel()
			o.Endpoints = e.list()
			ms, err := workload.Ceiling(ctx, o)
			if perr := print(ms, asJSON); perr != nil && err == nil {
				err = perr
			}
			return err
		},
	}
	e.addFlags(cmd.Flags())
	cmd.Flags().IntVar(&o.EtcdPID, "etcd-pid", 0, "etcd's process id, to report its CPU per write")
	cmd.Flags().IntVar(&o.Clients, "clients", o.Clients, "writes in flight")
	cmd.Flags().DurationVar(&o.Duration, "duration", o.Duration, "how long to write")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print measurements as JSON")
	return cmd
}

func newPreloadCommand() *cobra.Command {
	var e etcdFlags
	o := workload.PreloadOptions{Layout: workload.DefaultLayout, To: 10000, Workers: 32}
	cmd := &cobra.Command{
		Use:   "preload",
		Short: "Write Events straight to etcd in the servers' layout (key, protobuf envelope, lease)",
		Long: "Writes Events [--from, --events) of the benchmark store to /registry/events/<ns>/<name> as " +
			"core/v1 protobuf in the k8s\\x00 envelope, with 1h leases reused as the etcd3 store does; " +
			"kube-apiserver and event-apiserver both read this layout.",
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			ctx, cancel := signalContext()
			defer cancel()
			o.Endpoints = e.list()
			r, err := workload.Preload(ctx, o)
			if err != nil {
				return err
			}
			fmt.Printf("preloaded %d Events (%d bytes, %.0f bytes each) in %v\n", r.Events, r.Bytes,
				float64(r.Bytes)/float64(max(1, r.Events)), r.Elapsed.Round(time.Millisecond))
			return nil
		},
	}
	e.addFlags(cmd.Flags())
	addLayoutFlags(cmd.Flags(), &o.Layout)
	cmd.Flags().IntVar(&o.From, "from", o.From, "first Event to write")
	cmd.Flags().IntVar(&o.To, "events", o.To, "Events the store holds afterwards")
	cmd.Flags().IntVar(&o.Workers, "workers", o.Workers, "transactions in flight")
	return cmd
}
