package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/eventapiserver/event-apiserver/internal/testbed"
	"github.com/eventapiserver/event-apiserver/test/load/workload"
)

const (
	// doorProxyName is the CN of the door's front-proxy certificate, added
	// to kube-apiserver's --requestheader-allowed-names.
	doorProxyName = "front-door"
	// doorEventsName is the name in event-apiserver's serving certificate.
	doorEventsName = "event-apiserver.event-apiserver.svc"
)

// doorDeployment is kube-apiserver on a main etcd with its Events in a
// second one (--etcd-servers-overrides), an aggregated event-apiserver on
// that second etcd, and the nginx door in front of both.
type doorDeployment struct {
	mainEtcd, etcd *testbed.Etcd
	kube           *testbed.KubeAPIServer
	events         *testbed.Server
	door           *testbed.Door
}

func (o Options) deployDoor(ctx context.Context, s, dir string) (*doorDeployment, error) {
	nginx, err := testbed.NginxBinary()
	if err != nil {
		return nil, err
	}
	d := &doorDeployment{}
	fail := func(err error) (*doorDeployment, error) {
		d.stop()
		return nil, err
	}
	if d.mainEtcd, err = o.startEtcd(ctx, filepath.Join(dir, "etcd-main")); err != nil {
		return fail(err)
	}
	if d.etcd, err = o.startEtcd(ctx, filepath.Join(dir, "etcd-events")); err != nil {
		return fail(err)
	}
	d.kube, err = testbed.StartKubeAPIServer(ctx, testbed.KubeAPIServerOptions{
		Binary: o.KubeAPIServerBinary, Dir: filepath.Join(dir, "kube-apiserver"),
		EtcdServers: d.mainEtcd.ClientURL(), EtcdServersOverrides: "/events#" + d.etcd.ClientURL(),
		AuthorizationMode: "AlwaysAllow", EventTTL: workload.EventTTL, Profiling: true, StartTimeout: serverStartTimeout,
		// Appended to front-proxy-client (a list flag).
		ExtraFlags: []string{"--requestheader-allowed-names=" + doorProxyName},
	})
	if err != nil {
		return fail(err)
	}
	// E has none: an idle replica would still capture every Event E's
	// kube-apiserver writes into its history, on the same cores.
	var events []*testbed.Server
	if s == DoorEvents {
		d.events, err = testbed.StartServer(ctx, testbed.ServerOptions{
			Binary: o.EventAPIServerBinary, Dir: filepath.Join(dir, "event-apiserver"), EtcdServers: d.etcd.ClientURL(),
			AggregatedKubeconfig: d.kube.KubeconfigPath, EventTTL: workload.EventTTL, Profiling: true,
			StartTimeout: serverStartTimeout,
			ExtraArgs:    append([]string{"--self-signed-cert-dns-names=" + doorEventsName}, o.EventAPIServerArgs...),
		})
		if err != nil {
			return fail(err)
		}
		events = append(events, d.events)
	}
	cert, key, err := testbed.IssueClientCert(d.kube.FrontProxyCAFile, d.kube.FrontProxyCAKeyFile, filepath.Join(dir, "door-proxy"), doorProxyName)
	if err != nil {
		return fail(err)
	}
	d.door, err = testbed.StartDoor(ctx, testbed.DoorOptions{
		Binary: nginx, Dir: filepath.Join(dir, "door"), Kube: d.kube, Events: events,
		EventsName: doorEventsName, FrontProxyCert: cert, FrontProxyKey: key, WithoutEventRoutes: s == DoorKube,
	})
	if err != nil {
		return fail(err)
	}
	return d, nil
}

// target is the door, with kube-apiserver's admin token (which passes the
// door unchanged); CPU is the server that answers Events and its etcd.
func (d *doorDeployment) target(s string) workload.Target {
	pid := d.kube.Process().PID()
	if d.events != nil {
		pid = d.events.Process().PID()
	}
	return workload.Target{
		Config: &rest.Config{Host: d.door.URL, BearerToken: d.kube.AdminToken,
			TLSClientConfig: rest.TLSClientConfig{CAData: d.kube.CAData}, QPS: 100, Burst: 200},
		ServerPID: pid, EtcdPID: d.etcd.Process().PID(), NeedsNamespaces: true,
	}
}

// direct is event-apiserver without the door, for its history capture's
// metrics (the door sends /metrics to kube-apiserver).
func (d *doorDeployment) direct() workload.Target {
	return workload.Target{Config: &rest.Config{Host: d.events.URL, BearerToken: d.kube.AdminToken,
		TLSClientConfig: rest.TLSClientConfig{CAFile: d.events.CACertFile()}}}
}

func (d *doorDeployment) stop() {
	for _, p := range []*testbed.Process{d.doorProcess(), d.eventsProcess(), d.kubeProcess(), d.etcdProcess(d.etcd), d.etcdProcess(d.mainEtcd)} {
		if p != nil {
			_ = p.Stop()
		}
	}
}

func (d *doorDeployment) doorProcess() *testbed.Process {
	if d.door == nil {
		return nil
	}
	return d.door.Process()
}

func (d *doorDeployment) eventsProcess() *testbed.Process {
	if d.events == nil {
		return nil
	}
	return d.events.Process()
}

func (d *doorDeployment) kubeProcess() *testbed.Process {
	if d.kube == nil {
		return nil
	}
	return d.kube.Process()
}

func (d *doorDeployment) etcdProcess(e *testbed.Etcd) *testbed.Process {
	if e == nil {
		return nil
	}
	return e.Process()
}

// runDoor runs the writing workloads (create, recorder, watch, as
// selected) and describe against server s behind the door, each on a fresh
// deployment. Memory, startup and the storm are the servers' own and run
// without the door only.
func runDoor(ctx context.Context, o Options, s string, round int) (RunResult, error) {
	r := RunResult{Server: s, Round: round}
	dir := filepath.Join(o.WorkDir, fmt.Sprintf("round-%d", round), s)
	klog.InfoS("Running workloads through the door", "server", s, "round", round, "title", Titles[s])
	add := func(ms []workload.Measurement, err error) error {
		r.Measurements = append(r.Measurements, ms...)
		return err
	}
	noProfile := func(workload.Target, string, time.Duration) func() { return func() {} }
	if o.runs(WorkloadCreate) || o.runs(WorkloadRecorder) || o.runs(WorkloadWatch) {
		d, err := o.deployDoor(ctx, s, filepath.Join(dir, "writes"))
		if err != nil {
			return r, err
		}
		err = o.writes(ctx, d.target(s), add, noProfile)
		d.stop()
		if err != nil {
			return r, err
		}
	}
	if !o.runs(WorkloadDescribe) {
		return r, nil
	}
	d, err := o.deployDoor(ctx, s, filepath.Join(dir, "store"))
	if err != nil {
		return r, err
	}
	defer d.stop()
	t := d.target(s)
	loaded := 0
	for _, size := range o.Sizes {
		if _, err := workload.Preload(ctx, workload.PreloadOptions{Endpoints: []string{d.etcd.ClientURL()}, Layout: o.Layout, From: loaded, To: size}); err != nil {
			return r, err
		}
		loaded = size
		// event-apiserver's capture of the preload is not what describe
		// measures (see runServer).
		if d.events != nil {
			if _, _, err := workload.SettleCapture(ctx, d.direct(), []string{d.etcd.ClientURL()}, captureSettleLimit); err != nil {
				if ctx.Err() != nil {
					return r, ctx.Err()
				}
				klog.ErrorS(err, "History capture did not settle; measuring anyway", "server", s)
			}
		}
		if err := add(workload.Describe(ctx, t, workload.DescribeOptions{
			Layout: o.Layout, Size: size, Requests: o.DescribeRequests, MaxTime: o.DescribeTime,
		})); err != nil {
			return r, err
		}
	}
	return r, nil
}
