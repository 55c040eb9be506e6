package framework

// Test wrappers over internal/testbed's etcd: members stopped by
// t.Cleanup, failures reported with t.Errorf and the tail of the log.

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/eventapiserver/event-apiserver/internal/testbed"
)

const (
	// DefaultEtcdProgressNotifyInterval is the --watch-progress-notify-interval
	// test etcds run with unless WithEtcdProgressNotifyInterval says otherwise:
	// short, so that watch caches see bookmarks quickly.
	DefaultEtcdProgressNotifyInterval = time.Second

	// DefaultEtcdStartTimeout bounds the wait for an etcd (or a cluster) to
	// report healthy after a start or restart.
	DefaultEtcdStartTimeout = testbed.DefaultEtcdStartTimeout

	// logTailLines is how many lines of a child's log are printed on failure.
	logTailLines = 60
)

// EtcdOption configures StartEtcd and StartEtcdCluster.
type EtcdOption func(*testbed.EtcdOptions)

// WithEtcdProgressNotifyInterval sets --watch-progress-notify-interval
// (default DefaultEtcdProgressNotifyInterval). Zero or negative leaves etcd's
// own default (10m), i.e. effectively no progress notifications.
func WithEtcdProgressNotifyInterval(d time.Duration) EtcdOption {
	return func(o *testbed.EtcdOptions) { o.ProgressNotifyInterval = d }
}

// WithEtcdFsync turns fsync back on. By default test etcds run with
// --unsafe-no-fsync: killing the process (not the machine) loses nothing,
// because written data is already in the page cache, and tests run much
// faster on slow disks.
func WithEtcdFsync() EtcdOption {
	return func(o *testbed.EtcdOptions) { o.UnsafeNoFsync = false }
}

// WithEtcdPeerProxies puts a fault-injecting proxy in front of each
// member's peer port, so that a member can be partitioned from its peers
// (Etcd.Partition, Etcd.Heal).
func WithEtcdPeerProxies() EtcdOption {
	return func(o *testbed.EtcdOptions) { o.PeerProxies = true }
}

// WithEtcdStartTimeout bounds the wait for health after start and restart
// (default DefaultEtcdStartTimeout).
func WithEtcdStartTimeout(d time.Duration) EtcdOption {
	return func(o *testbed.EtcdOptions) { o.StartTimeout = d }
}

// WithEtcdFlags appends raw etcd flags (e.g. "--log-level=debug",
// "--auto-compaction-retention=1m") after the ones the framework sets; for
// etcd, a repeated flag's last value wins.
func WithEtcdFlags(flags ...string) EtcdOption {
	return func(o *testbed.EtcdOptions) { o.ExtraFlags = append(o.ExtraFlags, flags...) }
}

// Etcd is one etcd process (testbed.Etcd: ClientURL, PeerURL, Name,
// DataDir, LogPath, Running). Methods are safe to call from any goroutine;
// a failing method reports with t.Errorf (never t.Fatal) and returns the
// error.
type Etcd struct {
	*testbed.Etcd
	t testing.TB
}

// Stop sends SIGTERM and waits for the process to exit (SIGKILL after 30s).
// Stopping a stopped etcd is a no-op.
func (e *Etcd) Stop() error { return e.report("stop", e.Process().Stop()) }

// Kill sends SIGKILL and waits for the process to exit. Killing a stopped
// etcd is a no-op.
func (e *Etcd) Kill() error { return e.report("kill", e.Process().Kill()) }

// Pause freezes the process with SIGSTOP, and waits until every thread has
// stopped: its ports stay open but it answers nothing, like a hung etcd.
// Resume undoes it.
func (e *Etcd) Pause() error { return e.report("pause", e.Process().Pause()) }

// Resume continues a paused process with SIGCONT.
func (e *Etcd) Resume() error { return e.report("resume", e.Process().Resume()) }

// Start starts a stopped or killed etcd again with the same data directory,
// ports and flags, without waiting for it to become healthy (a lone member of
// a cluster cannot be healthy until a quorum is back; see WaitHealthy).
func (e *Etcd) Start() error { return e.report("start", e.Process().Start()) }

// Restart stops the process if it is still running (SIGTERM), starts it again
// with the same data directory, ports and flags, and waits until it is
// healthy. For a member of a cluster this needs a quorum of running members.
func (e *Etcd) Restart() error {
	return e.report("restart", e.Etcd.Restart(context.Background()))
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
	return newEtcdClient(t, e.ClientURL())
}

func (e *Etcd) report(op string, err error) error {
	if err != nil {
		err = fmt.Errorf("etcd %s: %s: %w", e.Name(), op, err)
		e.t.Errorf("%s", withLogTail(err, e.Process()))
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
		urls[i] = m.ClientURL()
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
	etcdClusterSeq.Lock()
	etcdClusterSeq.n++
	seq := etcdClusterSeq.n
	etcdClusterSeq.Unlock()
	o := testbed.EtcdOptions{
		Binary:                 EtcdBinary(t),
		Dir:                    filepath.Join(t.TempDir(), fmt.Sprintf("etcd-%d", seq)),
		Members:                size,
		ProgressNotifyInterval: DefaultEtcdProgressNotifyInterval,
		UnsafeNoFsync:          true,
		StartTimeout:           DefaultEtcdStartTimeout,
	}
	for _, opt := range opts {
		opt(&o)
	}
	started, err := testbed.StartEtcd(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	members := make([]*Etcd, len(started))
	for i, m := range started {
		members[i] = &Etcd{Etcd: m, t: t}
		t.Cleanup(m.Close)
		stopAtCleanup(t, m.Process())
	}
	return members
}

// waitEtcdHealthy waits until every member is healthy, failing early when a
// member's process exits.
func waitEtcdHealthy(timeout time.Duration, members ...*Etcd) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	bed := make([]*testbed.Etcd, len(members))
	for i, m := range members {
		bed[i] = m.Etcd
	}
	return testbed.WaitEtcdHealthy(ctx, bed...)
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

// withLogTail is err's message followed by the tail of p's log, unless the
// testbed's error carries it already.
func withLogTail(err error, p *testbed.Process) string {
	if strings.Contains(err.Error(), p.LogPath) {
		return err.Error()
	}
	return err.Error() + "\n" + p.Tail(logTailLines)
}

// stopAtCleanup stops p when the test ends, after printing the tail of its
// log if the test failed.
func stopAtCleanup(t testing.TB, p *testbed.Process) {
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s", p.Tail(logTailLines))
		}
		if err := p.Stop(); err != nil {
			t.Logf("%s: stopping at cleanup: %v", p.Name, err)
		}
	})
}

// EtcdBinary is _output/bin/etcd (built first if missing or stale).
func EtcdBinary(t testing.TB) string {
	t.Helper()
	path, err := testbed.EtcdBinary()
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// EtcdClient is a client of the etcd at url (a Server's EtcdURL: the
// embedded etcd), closed when the test ends.
func EtcdClient(t *testing.T, url string) *clientv3.Client {
	t.Helper()
	if url == "" {
		t.Fatal("server has no etcd URL: start it with EmbeddedEtcdPort")
	}
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{url}, DialTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// EtcdEventKey is the key of an Event in etcd, kube-apiserver's layout.
func EtcdEventKey(ns, name string) string { return EventsPrefix + ns + "/" + name }
