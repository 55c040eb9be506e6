package framework

// Helpers that run etcd v3.6 as separate processes (_output/bin/etcd, built
// by hack/build-etcd.sh from the version the root go.mod pins) for tests that
// stop, kill, pause and restart etcd, or need a multi-member cluster.
//
// All processes listen on 127.0.0.1 only, keep their data and logs under the
// test's t.TempDir(), are stopped by t.Cleanup, and are killed by the kernel
// if the test binary dies (parent-death signal on Linux). When a test fails,
// the tail of every child's log is printed.

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/eventapiserver/event-apiserver/internal/proc"
)

const (
	// DefaultEtcdProgressNotifyInterval is the --watch-progress-notify-interval
	// test etcds run with unless WithEtcdProgressNotifyInterval says otherwise:
	// short, so that watch caches see bookmarks quickly.
	DefaultEtcdProgressNotifyInterval = time.Second

	// DefaultEtcdStartTimeout bounds the wait for an etcd (or a cluster) to
	// report healthy after a start or restart.
	DefaultEtcdStartTimeout = 60 * time.Second

	// logTailLines is how many lines of a child's log are printed on failure.
	logTailLines = 60
)

// EtcdOption configures StartEtcd and StartEtcdCluster.
type EtcdOption func(*etcdSettings)

type etcdSettings struct {
	progressNotifyInterval time.Duration
	fsync                  bool
	startTimeout           time.Duration
	extraFlags             []string
}

// WithEtcdProgressNotifyInterval sets --watch-progress-notify-interval
// (default DefaultEtcdProgressNotifyInterval). Zero or negative leaves etcd's
// own default (10m), i.e. effectively no progress notifications.
func WithEtcdProgressNotifyInterval(d time.Duration) EtcdOption {
	return func(s *etcdSettings) { s.progressNotifyInterval = d }
}

// WithEtcdFsync turns fsync back on. By default test etcds run with
// --unsafe-no-fsync: killing the process (not the machine) loses nothing,
// because written data is already in the page cache, and tests run much
// faster on slow disks.
func WithEtcdFsync() EtcdOption {
	return func(s *etcdSettings) { s.fsync = true }
}

// WithEtcdStartTimeout bounds the wait for health after start and restart
// (default DefaultEtcdStartTimeout).
func WithEtcdStartTimeout(d time.Duration) EtcdOption {
	return func(s *etcdSettings) { s.startTimeout = d }
}

// WithEtcdFlags appends raw etcd flags (e.g. "--log-level=debug",
// "--auto-compaction-retention=1m") after the ones the framework sets; for
// etcd, a repeated flag's last value wins.
func WithEtcdFlags(flags ...string) EtcdOption {
	return func(s *etcdSettings) { s.extraFlags = append(s.extraFlags, flags...) }
}

// Etcd is one etcd process. Its data directory and ports stay the same across
// Stop/Kill and Restart/Start. Methods are safe to call from any goroutine;
// a failing method reports with t.Errorf (never t.Fatal) and returns the error.
type Etcd struct {
	t            testing.TB
	name         string
	dataDir      string
	clientURL    string
	peerURL      string
	startTimeout time.Duration
	proc         *proc.Process
}

// ClientURL is the http://127.0.0.1:<port> URL clients (and --etcd-servers)
// use.
func (e *Etcd) ClientURL() string { return e.clientURL }

// PeerURL is the member's http://127.0.0.1:<port> raft peer URL.
func (e *Etcd) PeerURL() string { return e.peerURL }

// Name is the member name (--name).
func (e *Etcd) Name() string { return e.name }

// DataDir is the member's --data-dir.
func (e *Etcd) DataDir() string { return e.dataDir }

// LogPath is the file the process's stdout and stderr go to (appended to
// across restarts).
func (e *Etcd) LogPath() string { return e.proc.LogPath }

// Running reports whether the process is alive (including paused).
func (e *Etcd) Running() bool { return e.proc.Running() }

// Stop sends SIGTERM and waits for the process to exit (SIGKILL after 30s).
// Stopping a stopped etcd is a no-op.
func (e *Etcd) Stop() error { return e.report("stop", e.proc.Stop()) }

// Kill sends SIGKILL and waits for the process to exit. Killing a stopped
// etcd is a no-op.
func (e *Etcd) Kill() error { return e.report("kill", e.proc.Kill()) }

// Pause freezes the process with SIGSTOP, and waits until every thread has
// stopped: its ports stay open but it answers nothing, like a hung etcd.
// Resume undoes it.
func (e *Etcd) Pause() error { return e.report("pause", e.proc.Pause()) }

// Resume continues a paused process with SIGCONT.
func (e *Etcd) Resume() error { return e.report("resume", e.proc.Resume()) }

// Start starts a stopped or killed etcd again with the same data directory,
// ports and flags, without waiting for it to become healthy (a lone member of
// a cluster cannot be healthy until a quorum is back; see WaitHealthy).
func (e *Etcd) Start() error { return e.report("start", e.proc.Start()) }

// Restart stops the process if it is still running (SIGTERM), starts it again
// with the same data directory, ports and flags, and waits until it is
// healthy. For a member of a cluster this needs a quorum of running members.
func (e *Etcd) Restart() error {
	if err := e.proc.Stop(); err != nil {
		return e.report("restart", err)
	}
	if err := e.proc.Start(); err != nil {
		return e.report("restart", err)
	}
	return e.report("restart", e.WaitHealthy(e.startTimeout))
}

// WaitHealthy waits until the member answers GET /health with
// {"health":"true"} (it has a leader and can serve a linearizable read) or
// the timeout expires.
func (e *Etcd) WaitHealthy(timeout time.Duration) error {
	return waitEtcdHealthy(timeout, e)
}

// Client returns a clientv3 client for this member, closed at the end of the
// test.
func (e *Etcd) Client(t testing.TB) *clientv3.Client {
	return newEtcdClient(t, e.clientURL)
}

func (e *Etcd) report(op string, err error) error {
	if err != nil {
		err = fmt.Errorf("etcd %s: %s: %w", e.name, op, err)
		e.t.Errorf("%v\n%s", err, e.proc.Tail(logTailLines))
	}
	return err
}

// EtcdCluster is a multi-member etcd cluster on loopback.
type EtcdCluster struct {
	Members []*Etcd
}

// ClientURLs are the members' client URLs, in member order.
func (c *EtcdCluster) ClientURLs() []string {
	urls := make([]string, len(c.Members))
	for i, m := range c.Members {
		urls[i] = m.clientURL
	}
	return urls
}

// Endpoints is ClientURLs joined with commas, the form --etcd-servers takes.
func (c *EtcdCluster) Endpoints() string { return strings.Join(c.ClientURLs(), ",") }

// WaitHealthy waits until every running member reports healthy.
func (c *EtcdCluster) WaitHealthy(timeout time.Duration) error {
	var running []*Etcd
	for _, m := range c.Members {
		if m.Running() {
			running = append(running, m)
		}
	}
	return waitEtcdHealthy(timeout, running...)
}

// Client returns a clientv3 client over all members' endpoints, closed at
// the end of the test.
func (c *EtcdCluster) Client(t testing.TB) *clientv3.Client {
	return newEtcdClient(t, c.ClientURLs()...)
}

// StartEtcd starts a single-member etcd on free loopback ports with its data
// under t.TempDir(), waits until it is healthy, and stops it when the test
// ends. If _output/bin/etcd is missing or stale it is built first with
// hack/build-etcd.sh.
func StartEtcd(t testing.TB, opts ...EtcdOption) *Etcd {
	t.Helper()
	return startEtcdMembers(t, 1, opts)[0]
}

// StartEtcdCluster starts a cluster of size members (3 for a cluster that
// survives the loss of one) and waits until every member is healthy. Each
// member can be stopped, killed and restarted on its own.
func StartEtcdCluster(t testing.TB, size int, opts ...EtcdOption) *EtcdCluster {
	t.Helper()
	if size < 1 {
		t.Fatalf("StartEtcdCluster: size must be at least 1, got %d", size)
	}
	return &EtcdCluster{Members: startEtcdMembers(t, size, opts)}
}

var etcdClusterSeq struct {
	sync.Mutex
	n int
}

func startEtcdMembers(t testing.TB, size int, opts []EtcdOption) []*Etcd {
	t.Helper()
	s := etcdSettings{
		progressNotifyInterval: DefaultEtcdProgressNotifyInterval,
		startTimeout:           DefaultEtcdStartTimeout,
	}
	for _, o := range opts {
		o(&s)
	}
	bin := etcdBinary(t)

	etcdClusterSeq.Lock()
	etcdClusterSeq.n++
	seq := etcdClusterSeq.n
	etcdClusterSeq.Unlock()
	base := filepath.Join(t.TempDir(), fmt.Sprintf("etcd-%d", seq))

	// A port picked as free can be taken by someone else before etcd binds
	// it; start over on fresh ports when that happens.
	var lastErr error
	for attempt := 1; attempt <= 3; attempt++ {
		members, err := tryStartEtcdMembers(t, bin, filepath.Join(base, fmt.Sprintf("try-%d", attempt)), size, s)
		if err == nil {
			return members
		}
		lastErr = err
		if !errors.Is(err, errAddrInUse) {
			break
		}
		t.Logf("etcd: ports taken, retrying on new ports: %v", err)
	}
	t.Fatalf("starting %d-member etcd: %v", size, lastErr)
	return nil
}

func tryStartEtcdMembers(t testing.TB, bin, base string, size int, s etcdSettings) ([]*Etcd, error) {
	ports, err := proc.FreePorts(2 * size)
	if err != nil {
		return nil, err
	}
	members := make([]*Etcd, size)
	var initialCluster []string
	for i := range members {
		name := fmt.Sprintf("member%d", i)
		if size == 1 {
			name = "default"
		}
		members[i] = &Etcd{
			t:            t,
			name:         name,
			dataDir:      filepath.Join(base, name+".data"),
			clientURL:    "http://127.0.0.1:" + strconv.Itoa(ports[2*i]),
			peerURL:      "http://127.0.0.1:" + strconv.Itoa(ports[2*i+1]),
			startTimeout: s.startTimeout,
		}
		initialCluster = append(initialCluster, name+"="+members[i].peerURL)
	}
	if err := os.MkdirAll(base, 0o700); err != nil {
		return nil, err
	}
	token := fmt.Sprintf("test-%d-%d", os.Getpid(), time.Now().UnixNano())
	for _, m := range members {
		args := []string{
			"--name=" + m.name,
			"--data-dir=" + m.dataDir,
			"--listen-client-urls=" + m.clientURL,
			"--advertise-client-urls=" + m.clientURL,
			"--listen-peer-urls=" + m.peerURL,
			"--initial-advertise-peer-urls=" + m.peerURL,
			"--initial-cluster=" + strings.Join(initialCluster, ","),
			"--initial-cluster-state=new",
			"--initial-cluster-token=" + token,
		}
		if s.progressNotifyInterval > 0 {
			args = append(args, "--watch-progress-notify-interval="+s.progressNotifyInterval.String())
		}
		if !s.fsync {
			args = append(args, "--unsafe-no-fsync")
		}
		args = append(args, s.extraFlags...)
		m.proc = newChildProcess(t, "etcd "+m.name, bin, args, filepath.Join(base, m.name+".log"))
	}
	for _, m := range members {
		if err := m.proc.Start(); err != nil {
			stopAll(members)
			return nil, fmt.Errorf("%s: %w", m.name, err)
		}
	}
	if err := waitEtcdHealthy(s.startTimeout, members...); err != nil {
		stopAll(members)
		for _, m := range members {
			if m.proc.LogContains("address already in use") {
				return nil, fmt.Errorf("%w: %v", errAddrInUse, err)
			}
		}
		var tails strings.Builder
		for _, m := range members {
			tails.WriteString(m.proc.Tail(logTailLines))
		}
		return nil, fmt.Errorf("%v\n%s", err, tails.String())
	}
	return members, nil
}

func stopAll(members []*Etcd) {
	for _, m := range members {
		if m.proc != nil {
			_ = m.proc.Kill()
		}
	}
}

// waitEtcdHealthy polls GET /health on every member until all are healthy.
// It fails early when a member's process exits.
func waitEtcdHealthy(timeout time.Duration, members ...*Etcd) error {
	deadline := time.Now().Add(timeout)
	client := &http.Client{Timeout: 3 * time.Second}
	pending := append([]*Etcd(nil), members...)
	var lastErr error
	for {
		var still []*Etcd
		for _, m := range pending {
			if !m.proc.Running() {
				return fmt.Errorf("etcd %s is not running (%s)", m.name, m.proc.Exited())
			}
			if err := proc.EtcdHealth(client, m.clientURL); err != nil {
				lastErr = fmt.Errorf("etcd %s: %w", m.name, err)
				still = append(still, m)
			}
		}
		pending = still
		if len(pending) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not healthy after %v: %v", timeout, lastErr)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func newEtcdClient(t testing.TB, endpoints ...string) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: 10 * time.Second,
	})
	if err != nil {
		t.Fatalf("etcd client for %v: %v", endpoints, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// ---------------------------------------------------------------------------
// Binaries and child processes.

var errAddrInUse = errors.New("address already in use")

var etcdBuild struct {
	once sync.Once
	path string
	err  error
}

// etcdBinary returns _output/bin/etcd, running hack/build-etcd.sh once per
// test binary first: it is instant when the binary is up to date and builds
// it when it is missing or was built from another etcd version.
func etcdBinary(t testing.TB) string {
	t.Helper()
	etcdBuild.once.Do(func() {
		root, err := proc.RepoRoot()
		if err != nil {
			etcdBuild.err = err
			return
		}
		etcdBuild.path = filepath.Join(root, "_output", "bin", "etcd")
		cmd := exec.Command("bash", filepath.Join(root, "hack", "build-etcd.sh"))
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		if err != nil {
			if _, statErr := os.Stat(etcdBuild.path); statErr == nil {
				// Keep going with the binary we have; say why it may be stale.
				t.Logf("hack/build-etcd.sh failed, using existing %s: %v\n%s", etcdBuild.path, err, out)
				return
			}
			etcdBuild.err = fmt.Errorf("%s is missing and hack/build-etcd.sh failed: %v\n%s", etcdBuild.path, err, out)
		}
	})
	if etcdBuild.err != nil {
		t.Fatal(etcdBuild.err)
	}
	return etcdBuild.path
}

// outputBinary is _output/bin/<name> under the repository root.
func outputBinary(name string) (string, error) {
	root, err := proc.RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "_output", "bin", name), nil
}

// newChildProcess is a process that is stopped when the test ends, after
// the tail of its log is printed if the test failed.
func newChildProcess(t testing.TB, name, path string, args []string, logPath string) *proc.Process {
	p := &proc.Process{Name: name, Path: path, Args: args, LogPath: logPath}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s", p.Tail(logTailLines))
		}
		if err := p.Stop(); err != nil {
			t.Logf("%s: stopping at cleanup: %v", name, err)
		}
	})
	return p
}

// EtcdBinary is _output/bin/etcd (built first if missing or stale), for
// tests that run etcd from rendered manifests.
func EtcdBinary(t testing.TB) string {
	t.Helper()
	return etcdBinary(t)
}
