// Package cluster runs a real one-node Kubernetes v1.36.3 cluster on this
// machine for the end-to-end tier (test/cluster): `kubeadm init` with its
// static pods (etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler) run by a real kubelet on containerd and runc, CoreDNS as
// kubeadm's Deployment, kube-proxy in iptables mode and the CNI bridge
// plugin. Every image is a local archive (hack/build-cluster-images.sh)
// imported with ctr: no registry is reachable.
//
// The cluster is the machine's: kubeadm and the kubelet use fixed paths
// (/etc/kubernetes, /var/lib/kubelet, /var/log/pods), the kubelet's ports,
// iptables and sysctls. Start takes a machine-wide lock, so clusters of
// several test processes run one after another, and refuses to start over
// a kubeadm install it did not make. Stop undoes everything Start did. The
// facts of these machines that shape it are in
// ../shared/research/realcluster.md (cgroup v1, no CAP_SYS_RESOURCE, no
// systemd as PID 1).
//
// All traffic stays on the machine: the node's address is on an interface
// of its own with nothing attached (a bridge: these kernels lack the dummy
// type), pods are on a local bridge, the Service range is routed to that
// interface, and CoreDNS forwards nothing off the node.
package cluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	"github.com/eventapiserver/event-apiserver/internal/testbed"
)

// The cluster's addresses and names. NodeIP is on an interface with nothing
// attached, so nothing answers it but this machine.
const (
	NodeIP          = "10.230.0.1"
	PodCIDR         = "10.244.0.0/24"
	ServiceCIDR     = "10.96.0.0/16"
	DNSServiceIP    = "10.96.0.10"
	KubernetesVer   = testbed.KubeVersion
	nodeInterface   = "eacluster0"
	bridgeInterface = "cni0"

	// KubeDir is kubeadm's fixed configuration directory; AdminKubeconfig
	// is the cluster-admin kubeconfig kubeadm writes there.
	KubeDir         = "/etc/kubernetes"
	AdminKubeconfig = KubeDir + "/admin.conf"
	// ManifestsDir is the kubelet's staticPodPath, kubeadm's.
	ManifestsDir = KubeDir + "/manifests"
	kubeletDir   = "/var/lib/kubelet"
	// ContainerdSocket is containerd's default address, so `ctr -n k8s.io`
	// as an operator types it reaches this cluster's containerd.
	ContainerdSocket = "/run/containerd/containerd.sock"

	lockPath = "/run/lock/event-apiserver-cluster.lock"
	// ownerMark, in KubeDir, says a cluster of this package made the
	// kubeadm install there, so a later Start may clean it up after a crash.
	ownerMark = ".event-apiserver-cluster"
)

// kubeletSysctls are the sysctls the kubelet, kube-proxy and this package
// change; Start records them and Stop writes them back.
var kubeletSysctls = []string{
	"vm/overcommit_memory",
	"vm/panic_on_oom",
	"kernel/panic",
	"kernel/panic_on_oops",
	"kernel/keys/root_maxkeys",
	"kernel/keys/root_maxbytes",
	"net/ipv4/ip_forward",
	"net/ipv4/conf/all/route_localnet",
	"net/bridge/bridge-nf-call-iptables",
	"net/netfilter/nf_conntrack_max",
}

// Images are the archives, in _output/image, that Start imports.
var Images = []string{"pause.tar", "etcd.tar", "coredns.tar", "kube-apiserver.tar", "kube-controller-manager.tar", "kube-scheduler.tar"}

// Options says where the binaries and images are and where the cluster keeps
// its own state.
type Options struct {
	// BinDir holds kubeadm, kubelet, kube-proxy and kubectl
	// (hack/build-kube.sh); default _output/bin.
	BinDir string
	// ImageDir holds Images (hack/build-cluster-images.sh); default
	// _output/image.
	ImageDir string
	// Dir is for containerd's root and state, the CNI and kube-proxy
	// configuration and every log; default a new directory under
	// os.TempDir(). It is removed by Stop unless KeepDir.
	Dir     string
	KeepDir bool
	// Logf reports progress (t.Logf); default klog.
	Logf func(format string, args ...any)
}

// Cluster is a running one-node cluster.
type Cluster struct {
	opts       Options
	dir        string
	lock       *os.File
	containerd *testbed.Process
	kubelet    *testbed.Process
	kubeProxy  *testbed.Process
	sysctls    map[string]string
	undo       []func() error
	kubectl    string
	nodeName   string
	started    time.Time
	// preexisting are the machinePaths that existed before Start: not the
	// cluster's to remove.
	preexisting map[string]bool
}

// Dir is the cluster's private directory (logs are in Dir()/logs).
func (c *Cluster) Dir() string { return c.dir }

// NodeName is the node's name: the machine's hostname, as kubeadm names a
// node by default, so commands written for kubeadm clusters ($(hostname)
// for the node) hold.
func (c *Cluster) NodeName() string { return c.nodeName }

// Kubectl is the path of kubectl v1.36.3.
func (c *Cluster) Kubectl() string { return c.kubectl }

// Env is the environment for commands run against the cluster: KUBECONFIG
// set to the admin kubeconfig and the binaries' directory first on PATH.
func (c *Cluster) Env() []string {
	env := []string{"KUBECONFIG=" + AdminKubeconfig}
	for _, kv := range os.Environ() {
		switch {
		case strings.HasPrefix(kv, "KUBECONFIG="):
		case strings.HasPrefix(kv, "PATH="):
			env = append(env, "PATH="+c.opts.BinDir+":"+strings.TrimPrefix(kv, "PATH="))
		default:
			env = append(env, kv)
		}
	}
	return env
}

// Processes are the host processes the cluster runs (the control plane runs
// as the kubelet's static pods).
func (c *Cluster) Processes() []*testbed.Process {
	return []*testbed.Process{c.containerd, c.kubelet, c.kubeProxy}
}

// Start brings the cluster up: CoreDNS Available and the node Ready. On error
// everything started is undone.
func Start(ctx context.Context, o Options) (_ *Cluster, err error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("a real cluster needs root (kubelet, containerd, iptables)")
	}
	if o.Logf == nil {
		o.Logf = func(format string, args ...any) { klog.InfoDepth(1, fmt.Sprintf(format, args...)) }
	}
	root, err := testbed.RepoRoot()
	if err != nil {
		return nil, err
	}
	if o.BinDir == "" {
		o.BinDir = filepath.Join(root, "_output", "bin")
	}
	if o.ImageDir == "" {
		o.ImageDir = filepath.Join(root, "_output", "image")
	}
	if err := missing(o); err != nil {
		return nil, err
	}
	hostname, err := os.Hostname()
	if err != nil {
		return nil, err
	}
	c := &Cluster{opts: o, started: time.Now(), kubectl: filepath.Join(o.BinDir, "kubectl"), nodeName: strings.ToLower(hostname)}
	if err := c.takeLock(ctx); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			if stopErr := c.Stop(); stopErr != nil {
				o.Logf("cleaning up after a failed start: %v", stopErr)
			}
		}
	}()
	if err := c.claimMachine(); err != nil {
		return nil, err
	}
	if o.Dir == "" {
		if o.Dir, err = os.MkdirTemp("", "eacluster-"); err != nil {
			return nil, err
		}
		c.opts.Dir = o.Dir
	}
	c.dir = o.Dir
	for _, d := range []string{"logs", "cni/net.d", "cni/ipam", "containerd", "kube-proxy", "etcd"} {
		if err := os.MkdirAll(filepath.Join(c.dir, d), 0o700); err != nil {
			return nil, err
		}
	}
	c.saveSysctls()
	steps := []struct {
		name string
		run  func(context.Context) error
	}{
		{"network", c.setUpNetwork},
		{"containerd", c.startContainerd},
		{"images", c.importImages},
		{"kubeadm init and the kubelet", c.kubeadmInit},
		{"kube-proxy", c.startKubeProxy},
		{"node Ready and CoreDNS Available", c.waitReady},
	}
	for _, s := range steps {
		start := time.Now()
		if err := s.run(ctx); err != nil {
			return nil, fmt.Errorf("%s: %w\n%s", s.name, err, c.tails())
		}
		o.Logf("cluster: %s took %v", s.name, time.Since(start).Round(100*time.Millisecond))
	}
	o.Logf("cluster: up in %v", time.Since(c.started).Round(100*time.Millisecond))
	return c, nil
}

func missing(o Options) error {
	var lacking []string
	for _, b := range []string{"kubeadm", "kubelet", "kube-proxy", "kubectl"} {
		if _, err := os.Stat(filepath.Join(o.BinDir, b)); err != nil {
			lacking = append(lacking, filepath.Join(o.BinDir, b)+" (hack/build-kube.sh)")
		}
	}
	for _, img := range Images {
		if _, err := os.Stat(filepath.Join(o.ImageDir, img)); err != nil {
			lacking = append(lacking, filepath.Join(o.ImageDir, img)+" (hack/build-cluster-images.sh)")
		}
	}
	for _, b := range []string{"containerd", "containerd-shim-runc-v2", "runc", "ctr", "iptables", "ip6tables", "conntrack", "ip"} {
		if _, err := exec.LookPath(b); err != nil {
			lacking = append(lacking, b+" (hack/install-test-packages.sh)")
		}
	}
	for _, p := range []string{"bridge", "host-local", "loopback"} {
		if _, err := os.Stat(filepath.Join(cniBinDir, p)); err != nil {
			lacking = append(lacking, filepath.Join(cniBinDir, p)+" (containernetworking-plugins, hack/install-test-packages.sh)")
		}
	}
	if len(lacking) > 0 {
		return fmt.Errorf("missing: %s", strings.Join(lacking, ", "))
	}
	return nil
}

// cniBinDir is where Debian's containernetworking-plugins puts the plugins.
const cniBinDir = "/usr/lib/cni"

// takeLock waits for the machine-wide lock: one cluster at a time.
func (c *Cluster) takeLock(ctx context.Context) error {
	f, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	err = wait.PollUntilContextCancel(ctx, time.Second, true, func(context.Context) (bool, error) {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		_ = f.Close()
		return fmt.Errorf("waiting for %s (another cluster on this machine): %w", lockPath, err)
	}
	c.lock = f
	return nil
}

// claimMachine refuses a kubeadm install or a containerd this package did
// not make, and clears what a crashed run of its own left.
func (c *Cluster) claimMachine() error {
	if _, err := os.Stat(KubeDir); err == nil {
		if _, err := os.Stat(filepath.Join(KubeDir, ownerMark)); err != nil {
			return fmt.Errorf("%s exists and was not made by this test: not touching this machine's Kubernetes", KubeDir)
		}
		c.opts.Logf("cluster: clearing what an earlier run left")
		c.cleanMachine()
	}
	if _, err := os.Stat(ContainerdSocket); err == nil {
		return fmt.Errorf("%s exists: a containerd is already running here", ContainerdSocket)
	}
	c.preexisting = map[string]bool{}
	for _, p := range machinePaths {
		if _, err := os.Stat(p); err == nil {
			c.preexisting[p] = true
		}
	}
	if err := os.MkdirAll(KubeDir, 0o755); err != nil {
		return err
	}
	c.undo = append(c.undo, func() error { return os.RemoveAll(KubeDir) })
	return os.WriteFile(filepath.Join(KubeDir, ownerMark), []byte("made by event-apiserver's internal/cluster; removed when it stops\n"), 0o644)
}

func (c *Cluster) logPath(name string) string { return filepath.Join(c.dir, "logs", name+".log") }

// run runs a command to completion, its output in the error.
func (c *Cluster) run(ctx context.Context, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = c.Env()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

func (c *Cluster) saveSysctls() {
	c.sysctls = map[string]string{}
	for _, k := range kubeletSysctls {
		if v, err := os.ReadFile(filepath.Join("/proc/sys", k)); err == nil {
			c.sysctls[k] = strings.TrimSpace(string(v))
		}
	}
}

func (c *Cluster) restoreSysctls() error {
	var errs []error
	keys := make([]string, 0, len(c.sysctls))
	for k := range c.sysctls {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		p := filepath.Join("/proc/sys", k)
		if cur, err := os.ReadFile(p); err == nil && strings.TrimSpace(string(cur)) == c.sysctls[k] {
			continue
		}
		if err := os.WriteFile(p, []byte(c.sysctls[k]+"\n"), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("restoring %s: %w", k, err))
		}
	}
	return errors.Join(errs...)
}

// setUpNetwork gives the node its address on an interface of its own, routes
// the Service range to that interface, where nothing is attached (kube-proxy
// rewrites a Service's address before the packet leaves; an address it has
// not programmed goes nowhere rather than to the default gateway) and lets
// the node route between pods and Services.
// cleanMachine removes the interface and the route.
func (c *Cluster) setUpNetwork(ctx context.Context) error {
	if _, err := c.run(ctx, "ip", "link", "add", nodeInterface, "type", "bridge"); err != nil {
		return err
	}
	for _, args := range [][]string{
		{"addr", "add", NodeIP + "/32", "dev", nodeInterface},
		{"link", "set", nodeInterface, "up"},
		// Not "unreachable": a host process's connect() is routed before
		// kube-proxy's OUTPUT DNAT and would fail at once (kube-apiserver
		// reaching an APIService's ClusterIP).
		{"route", "add", ServiceCIDR, "dev", nodeInterface},
	} {
		if _, err := c.run(ctx, "ip", args...); err != nil {
			return err
		}
	}
	// Pods reach Services and each other through the node.
	for k, v := range map[string]string{"net/ipv4/ip_forward": "1", "net/bridge/bridge-nf-call-iptables": "1"} {
		if err := os.WriteFile(filepath.Join("/proc/sys", k), []byte(v), 0o644); err != nil {
			return err
		}
	}
	// Pods' DNS: CoreDNS forwards what is not the cluster's to the
	// kubelet's resolvConf, which names the node itself, where nothing
	// listens on port 53, so nothing leaves the machine.
	if err := os.WriteFile(filepath.Join(c.dir, "resolv.conf"), []byte("nameserver "+NodeIP+"\n"), 0o644); err != nil {
		return err
	}
	conflist := fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "eacluster",
  "plugins": [
    {
      "type": "bridge",
      "bridge": %q,
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": %q}]],
        "routes": [{"dst": "0.0.0.0/0"}],
        "dataDir": %q
      }
    },
    {"type": "loopback"}
  ]
}
`, bridgeInterface, PodCIDR, filepath.Join(c.dir, "cni", "ipam"))
	return os.WriteFile(filepath.Join(c.dir, "cni", "net.d", "10-eacluster.conflist"), []byte(conflist), 0o644)
}

// containerdConfig: containerd 1.6's CRI plugin. restrict_oom_score_adj,
// because processes here lack CAP_SYS_RESOURCE and runc cannot lower a
// container's oom_score_adj; cgroupfs, because PID 1 is not systemd.
const containerdConfig = `version = 2
root = %[1]q
state = %[2]q
[grpc]
  address = %[3]q
[plugins."io.containerd.internal.v1.opt"]
  path = %[4]q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.10.2"
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %[5]q
    conf_dir = %[6]q
`

func (c *Cluster) startContainerd(ctx context.Context) error {
	dir := filepath.Join(c.dir, "containerd")
	config := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(containerdConfig,
		filepath.Join(dir, "root"), filepath.Join(dir, "state"), ContainerdSocket, filepath.Join(dir, "opt"),
		cniBinDir, filepath.Join(c.dir, "cni", "net.d"))), 0o644); err != nil {
		return err
	}
	path, _ := exec.LookPath("containerd")
	c.containerd = &testbed.Process{Name: "containerd", Path: path, Args: []string{"--config=" + config}, LogPath: c.logPath("containerd")}
	if err := c.containerd.Start(); err != nil {
		return err
	}
	return c.containerd.Poll(ctx, 200*time.Millisecond, func() error {
		_, err := c.run(ctx, "ctr", "--address="+ContainerdSocket, "version")
		return err
	})
}

func (c *Cluster) importImages(ctx context.Context) error {
	for _, img := range Images {
		if _, err := c.run(ctx, "ctr", "--address="+ContainerdSocket, "-n", "k8s.io", "images", "import", filepath.Join(c.opts.ImageDir, img)); err != nil {
			return err
		}
	}
	return nil
}

// kubeadmConfig is kubeadm's configuration: the node on NodeIP and the
// private containerd; no taints, since the one node runs every workload;
// the kubelet on cgroup v1 and cgroupfs with the private resolv.conf.
//
// Every control-plane listener is on NodeIP alone, none on a wildcard or
// loopback address: kube-apiserver would take *:6443 (kubeadm sets no
// --bind-address), the kubelet *:10250, and a wildcard listener makes
// every 127.0.0.x:6443 busy, which the kubelet-less integration tests bind
// for their pods while a cluster runs on the same machine. kubeadm points
// its probes and its wait for the control plane at these addresses (the
// components' --bind-address, etcd's first --listen-metrics-urls, the
// advertise address), and its etcd server certificate names NodeIP. What
// stays on loopback: the kubelet's healthz (127.0.0.1:10248, which kubeadm
// waits on) and kube-proxy's healthz and metrics.
const kubeadmConfig = `apiVersion: kubeadm.k8s.io/v1beta4
kind: InitConfiguration
localAPIEndpoint:
  advertiseAddress: %[1]s
  bindPort: 6443
nodeRegistration:
  name: %[2]s
  criSocket: unix://%[3]s
  taints: []
  kubeletExtraArgs:
  - name: node-ip
    value: %[1]s
skipPhases:
- preflight
- addon/kube-proxy
---
apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
kubernetesVersion: %[4]s
clusterName: eacluster
networking:
  podSubnet: %[5]s
  serviceSubnet: %[6]s
  dnsDomain: cluster.local
apiServer:
  extraArgs:
  - name: bind-address
    value: %[1]s
  - name: etcd-servers
    value: https://%[1]s:2379
controllerManager:
  extraArgs:
  - name: bind-address
    value: %[1]s
scheduler:
  extraArgs:
  - name: bind-address
    value: %[1]s
etcd:
  local:
    dataDir: %[7]s
    extraArgs:
    - name: listen-client-urls
      value: https://%[1]s:2379
    - name: listen-metrics-urls
      value: http://%[1]s:2381
dns:
  imageTag: v1.15.0
---
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %[1]s
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
resolvConf: %[8]s
containerRuntimeEndpoint: unix://%[3]s
# The node's disk is the machine's, whose free space other users of the
# host set (seen at 15%% free): the default thresholds would taint the node
# with DiskPressure (imagefs.available<15%%) and leave every new pod
# Pending, and image garbage collection (from 85%% used) would delete the
# locally imported images, which no registry can give back. kind sets its
# nodes up the same way.
evictionHard:
  nodefs.available: "0%%"
  nodefs.inodesFree: "0%%"
  imagefs.available: "0%%"
imageGCHighThresholdPercent: 100
`

// kubeadmInit runs kubeadm init (all but preflight, whose checks this
// machine fails for reasons that do not matter here, and the kube-proxy
// DaemonSet, whose image would need iptables) and starts the kubelet as
// kubeadm's systemd drop-in would, as soon as kubeadm has written its
// configuration.
func (c *Cluster) kubeadmInit(ctx context.Context) error {
	config := filepath.Join(c.dir, "kubeadm.yaml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(kubeadmConfig, NodeIP, c.nodeName, ContainerdSocket,
		KubernetesVer, PodCIDR, ServiceCIDR, filepath.Join(c.dir, "etcd"), filepath.Join(c.dir, "resolv.conf"))), 0o644); err != nil {
		return err
	}
	kubeadm := &testbed.Process{Name: "kubeadm", Path: filepath.Join(c.opts.BinDir, "kubeadm"),
		Args: []string{"init", "--config=" + config, "--v=1"}, LogPath: c.logPath("kubeadm")}
	if err := kubeadm.Start(); err != nil {
		return err
	}
	defer func() { _ = kubeadm.Kill() }()
	flagsFile := filepath.Join(kubeletDir, "kubeadm-flags.env")
	err := kubeadm.Poll(ctx, 200*time.Millisecond, func() error {
		if _, err := os.Stat(filepath.Join(kubeletDir, "config.yaml")); err != nil {
			return err
		}
		_, err := os.Stat(flagsFile)
		return err
	})
	if err != nil && !strings.Contains(kubeadm.Exited(), "status 0") {
		return fmt.Errorf("kubeadm did not write the kubelet's configuration: %w\n%s", err, kubeadm.Tail(30))
	}
	kubeletFlags, err := readKubeadmFlags(flagsFile)
	if err != nil {
		return err
	}
	args := append([]string{
		"--bootstrap-kubeconfig=" + KubeDir + "/bootstrap-kubelet.conf",
		"--kubeconfig=" + KubeDir + "/kubelet.conf",
		"--config=" + kubeletDir + "/config.yaml",
	}, kubeletFlags...)
	c.kubelet = &testbed.Process{Name: "kubelet", Path: filepath.Join(c.opts.BinDir, "kubelet"), Args: args, LogPath: c.logPath("kubelet")}
	if err := c.kubelet.Start(); err != nil {
		return err
	}
	// kubeadm waits for the kubelet and the static pods, then writes its
	// RBAC, the bootstrap tokens and the CoreDNS Deployment.
	err = wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(context.Context) (bool, error) {
		if !c.kubelet.Running() {
			return false, fmt.Errorf("kubelet %s", c.kubelet.Exited())
		}
		if kubeadm.Running() {
			return false, nil
		}
		if e := kubeadm.Exited(); e != "exited with status 0" {
			return false, fmt.Errorf("kubeadm init %s", e)
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("%w\n%s", err, kubeadm.Tail(40))
	}
	return nil
}

// readKubeadmFlags reads KUBELET_KUBEADM_ARGS from kubeadm's flags file,
// which kubeadm's systemd drop-in passes to the kubelet.
func readKubeadmFlags(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "KUBELET_KUBEADM_ARGS=")
		if ok {
			return strings.Fields(strings.Trim(v, `"`)), nil
		}
	}
	return nil, sc.Err()
}

// kubeProxyConfig: iptables mode; no conntrack or route_localnet sysctls
// (localhostNodePorts off), which a shared machine should keep.
const kubeProxyConfig = `apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clusterCIDR: %[1]s
bindAddress: %[2]s
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
hostnameOverride: %[3]s
clientConnection:
  kubeconfig: %[4]s
iptables:
  localhostNodePorts: false
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`

// startKubeProxy runs kube-proxy on the host, where the iptables it
// programs are, with the admin kubeconfig (kubeadm's kube-proxy
// ServiceAccount would need its DaemonSet).
func (c *Cluster) startKubeProxy(ctx context.Context) error {
	config := filepath.Join(c.dir, "kube-proxy", "config.yaml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(kubeProxyConfig, PodCIDR, NodeIP, c.nodeName, AdminKubeconfig)), 0o644); err != nil {
		return err
	}
	c.kubeProxy = &testbed.Process{Name: "kube-proxy", Path: filepath.Join(c.opts.BinDir, "kube-proxy"),
		Args: []string{"--config=" + config, "--v=1"}, LogPath: c.logPath("kube-proxy")}
	if err := c.kubeProxy.Start(); err != nil {
		return err
	}
	return c.kubeProxy.Poll(ctx, 500*time.Millisecond, func() error {
		_, err := c.run(ctx, "iptables", "-t", "nat", "-S", "KUBE-SERVICES")
		return err
	})
}

func (c *Cluster) waitReady(ctx context.Context) error {
	if _, err := c.run(ctx, c.kubectl, "wait", "--for=condition=Ready", "node/"+c.nodeName, "--timeout=3m"); err != nil {
		return err
	}
	_, err := c.run(ctx, c.kubectl, "-n", "kube-system", "rollout", "status", "deployment/coredns", "--timeout=3m")
	return err
}

// tails is the end of every host process's log, for a failure's message.
func (c *Cluster) tails() string {
	var b strings.Builder
	for _, p := range c.Processes() {
		if p != nil {
			b.WriteString(p.Tail(25))
			b.WriteString("\n")
		}
	}
	return b.String()
}

// Stop removes the cluster: every pod sandbox (through the CRI, so that CNI
// releases the addresses and network namespaces), the kubelet, kube-proxy
// and containerd, what the kubelet mounted, the bridge and the iptables
// chains, the sysctls, kubeadm's files and the private directory. It goes
// on past errors and returns them all.
func (c *Cluster) Stop() error {
	var errs []error
	if c.kubelet != nil {
		errs = append(errs, c.kubelet.Stop())
	}
	if c.containerd != nil && c.containerd.Running() {
		errs = append(errs, removePods(ContainerdSocket))
	}
	if c.kubeProxy != nil {
		errs = append(errs, c.kubeProxy.Stop())
	}
	if c.containerd != nil {
		errs = append(errs, c.containerd.Stop())
	}
	c.cleanMachine()
	for i := len(c.undo) - 1; i >= 0; i-- {
		errs = append(errs, c.undo[i]())
	}
	c.undo = nil
	if c.sysctls != nil {
		errs = append(errs, c.restoreSysctls())
	}
	if c.dir != "" && !c.opts.KeepDir {
		errs = append(errs, os.RemoveAll(c.dir))
	}
	if c.lock != nil {
		errs = append(errs, c.lock.Close())
		c.lock = nil
	}
	return errors.Join(errs...)
}
