package testbed

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// DefaultEtcdStartTimeout bounds the wait for an etcd (or a cluster) to
// report healthy after a start or restart.
const DefaultEtcdStartTimeout = 60 * time.Second

// EtcdOptions configures StartEtcd.
type EtcdOptions struct {
	// Binary is the etcd executable (EtcdBinary).
	Binary string
	// Dir holds the members' data directories and logs; it is created.
	Dir string
	// Members is the cluster size; zero means one member, named "default".
	Members int
	// ProgressNotifyInterval is --watch-progress-notify-interval; zero or
	// negative leaves etcd's own default (10m).
	ProgressNotifyInterval time.Duration
	// UnsafeNoFsync passes --unsafe-no-fsync: killing the process (not the
	// machine) loses nothing, and tests run much faster on slow disks.
	UnsafeNoFsync bool
	// StartTimeout bounds the wait for health on start and Restart;
	// default DefaultEtcdStartTimeout.
	StartTimeout time.Duration
	// ExtraFlags are appended; for etcd a repeated flag's last value wins.
	ExtraFlags []string
	// NoLeaseCheckpoints leaves etcd's lease checkpoints off, its default;
	// every etcd the test bed starts has them on otherwise
	// (LeaseCheckpointFlag), as the embedded etcd and the manifests do. The
	// benchmark turns them off to price them.
	NoLeaseCheckpoints bool
	// PeerProxies puts a Proxy in front of each member's peer port and
	// advertises it as the member's peer URL, so that all raft traffic to
	// a member goes through its proxy and a member can be partitioned from
	// its peers (Partition).
	PeerProxies bool
}

// LeaseCheckpointFlag turns etcd v3.6's lease checkpoints on: without them a
// leader change or a restart renews every lease to its full TTL. It is
// pkg/etcd's LeaseCheckpointFeatureGates as a flag (TestLeaseCheckpointFlag
// pins the two together; the package does not import pkg/etcd, so that the
// load tool does not link the etcd server).
const LeaseCheckpointFlag = "--feature-gates=LeaseCheckpoint=true,LeaseCheckpointPersist=true"

// Etcd is one etcd member. Its data directory, ports and flags stay the
// same across Stop/Kill and Start/Restart. Its methods are safe to call from
// any goroutine.
type Etcd struct {
	name         string
	dataDir      string
	clientURL    string
	peerURL      string
	startTimeout time.Duration
	proc         *Process
	// peerProxy is in front of the peer port when EtcdOptions.PeerProxies;
	// cluster is every member, for Partition.
	peerProxy *Proxy
	cluster   []*Etcd
}

// ClientURL is the http://127.0.0.1:<port> URL clients (and
// --etcd-servers) use.
func (e *Etcd) ClientURL() string { return e.clientURL }

// PeerURL is the member's http://127.0.0.1:<port> raft peer URL (the
// proxy's, with EtcdOptions.PeerProxies).
func (e *Etcd) PeerURL() string {
	if e.peerProxy != nil {
		return e.peerProxy.URL()
	}
	return e.peerURL
}

// Partition cuts the member off from its peers, both ways, until Heal:
// nothing reaches it through its peer proxy, and what it dialed through
// theirs is dropped. It needs EtcdOptions.PeerProxies.
func (e *Etcd) Partition() error {
	if e.peerProxy == nil {
		return fmt.Errorf("etcd %s: partitions need EtcdOptions.PeerProxies", e.name)
	}
	e.peerProxy.Blackhole()
	pid := e.proc.PID()
	for _, m := range e.cluster {
		if m != e && pid != 0 {
			m.peerProxy.BlackholeFrom(pid)
		}
	}
	return nil
}

// Heal ends Partition.
func (e *Etcd) Heal() {
	for _, m := range e.cluster {
		if m.peerProxy != nil {
			m.peerProxy.Heal()
		}
	}
}

// Close closes the member's peer proxy; the process is stopped with
// Process().Stop or Kill.
func (e *Etcd) Close() {
	if e.peerProxy != nil {
		_ = e.peerProxy.Close()
	}
}

// Name is the member name (--name).
func (e *Etcd) Name() string { return e.name }

// DataDir is the member's --data-dir.
func (e *Etcd) DataDir() string { return e.dataDir }

// Process is the member's process: stop, kill, pause, its PID and log.
func (e *Etcd) Process() *Process { return e.proc }

// LogPath is the file the process's stdout and stderr go to (appended to
// across restarts).
func (e *Etcd) LogPath() string { return e.proc.LogPath }

// Running reports whether the process is alive (paused included).
func (e *Etcd) Running() bool { return e.proc.Running() }

// Restart stops the process if it runs (SIGTERM), starts it again and waits
// until it is healthy. A member of a cluster needs a quorum of running
// members for that.
func (e *Etcd) Restart(ctx context.Context) error {
	if err := e.proc.Stop(); err != nil {
		return err
	}
	if err := e.proc.Start(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, e.startTimeout)
	defer cancel()
	return WaitEtcdHealthy(ctx, e)
}

// Endpoints is the members' client URLs joined with commas, the form
// --etcd-servers takes.
func Endpoints(members []*Etcd) string {
	urls := make([]string, len(members))
	for i, m := range members {
		urls[i] = m.clientURL
	}
	return strings.Join(urls, ",")
}

// StartEtcd starts a fresh etcd of o.Members members on free loopback
// ports and waits until every member is healthy.
func StartEtcd(ctx context.Context, o EtcdOptions) ([]*Etcd, error) {
	if o.Members <= 0 {
		o.Members = 1
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = DefaultEtcdStartTimeout
	}
	var members []*Etcd
	err := retryOnPortClash("etcd", func(attempt int) ([]*Process, error) {
		var err error
		members, err = tryStartEtcd(ctx, o, filepath.Join(o.Dir, fmt.Sprintf("try-%d", attempt)))
		procs := make([]*Process, len(members))
		for i, m := range members {
			procs[i] = m.proc
		}
		return procs, err
	})
	if err != nil {
		return nil, fmt.Errorf("starting a %d-member etcd: %w", o.Members, err)
	}
	return members, nil
}

// tryStartEtcd returns the members it made even when it fails (all killed
// then), so that their logs can be read.
func tryStartEtcd(ctx context.Context, o EtcdOptions, dir string) ([]*Etcd, error) {
	ports, err := FreePorts(2 * o.Members)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	members := make([]*Etcd, o.Members)
	initialCluster := make([]string, o.Members)
	for i := range members {
		name := fmt.Sprintf("member%d", i)
		if o.Members == 1 {
			name = "default"
		}
		members[i] = &Etcd{
			name:         name,
			dataDir:      filepath.Join(dir, name+".data"),
			clientURL:    "http://127.0.0.1:" + strconv.Itoa(ports[2*i]),
			peerURL:      "http://127.0.0.1:" + strconv.Itoa(ports[2*i+1]),
			startTimeout: o.StartTimeout,
		}
		initialCluster[i] = name + "=" + members[i].peerURL
	}
	pids := func() []int {
		var pids []int
		for _, m := range members {
			if m.proc != nil {
				pids = append(pids, m.proc.PID())
			}
		}
		return pids
	}
	if o.PeerProxies {
		for i, m := range members {
			if m.peerProxy, err = NewProxy(strings.TrimPrefix(m.peerURL, "http://")); err != nil {
				closeProxies(members)
				return nil, err
			}
			m.cluster = members
			initialCluster[i] = m.name + "=" + m.PeerURL()
		}
	}
	token := fmt.Sprintf("testbed-%d-%d", os.Getpid(), time.Now().UnixNano())
	for _, m := range members {
		args := []string{
			"--name=" + m.name,
			"--data-dir=" + m.dataDir,
			"--listen-client-urls=" + m.clientURL,
			"--advertise-client-urls=" + m.clientURL,
			"--listen-peer-urls=" + m.peerURL,
			"--initial-advertise-peer-urls=" + m.PeerURL(),
			"--initial-cluster=" + strings.Join(initialCluster, ","),
			"--initial-cluster-state=new",
			"--initial-cluster-token=" + token,
		}
		if o.ProgressNotifyInterval > 0 {
			args = append(args, "--watch-progress-notify-interval="+o.ProgressNotifyInterval.String())
		}
		if o.UnsafeNoFsync {
			args = append(args, "--unsafe-no-fsync")
		}
		if !o.NoLeaseCheckpoints {
			args = append(args, LeaseCheckpointFlag)
		}
		args = append(args, o.ExtraFlags...)
		m.proc = &Process{Name: "etcd " + m.name, Path: o.Binary, Args: args, LogPath: filepath.Join(dir, m.name+".log")}
	}
	if o.PeerProxies {
		// After every m.proc is set: the proxies read them under their lock.
		for _, m := range members {
			m.peerProxy.IdentifyDialers(pids)
		}
	}
	killAll := func() {
		for _, m := range members {
			_ = m.proc.Kill()
		}
		closeProxies(members)
	}
	for _, m := range members {
		if err := m.proc.Start(); err != nil {
			killAll()
			return members, err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, o.StartTimeout)
	defer cancel()
	if err := WaitEtcdHealthy(ctx, members...); err != nil {
		killAll()
		var tails strings.Builder
		for _, m := range members {
			tails.WriteString("\n" + m.proc.Tail(logTailLines))
		}
		return members, fmt.Errorf("%w%s", err, tails.String())
	}
	return members, nil
}

func closeProxies(members []*Etcd) {
	for _, m := range members {
		m.Close()
	}
}

// WaitEtcdHealthy polls GET /health on every member until all are healthy
// (EtcdHealth), one of them exits, or ctx ends.
func WaitEtcdHealthy(ctx context.Context, members ...*Etcd) error {
	client := &http.Client{Timeout: 3 * time.Second}
	for _, m := range members {
		err := m.proc.Poll(ctx, 100*time.Millisecond, func() error { return EtcdHealth(client, m.clientURL) })
		if err != nil {
			return fmt.Errorf("etcd %s not healthy: %w", m.name, err)
		}
	}
	return nil
}
