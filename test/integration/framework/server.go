package framework

// StartServer runs the real event-apiserver binary, built from this checkout
// once per test binary, through internal/testbed.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/eventapiserver/event-apiserver/internal/testbed"
)

// ServerOptions configures StartServer. The zero value runs the server as a
// newcomer would: embedded etcd, default TTL. Dir defaults to a fresh
// directory under t.TempDir(), DataDir to Dir/data, Binary to the one built
// from the checkout; the embedded etcd's progress-notify interval to 1s,
// since tests want bookmarks and progress quickly.
type ServerOptions = testbed.ServerOptions

// Server is a running event-apiserver (testbed.Server: URL, Port, DataDir,
// Kubeconfig, EtcdURL, CACertFile, LogPath, LogContains, Running).
type Server struct {
	*testbed.Server
}

// ServerBinary builds cmd/event-apiserver into _output/bin once per test
// binary.
func ServerBinary(t testing.TB) string {
	t.Helper()
	path, err := testbed.ServerBinary(RaceEnabled())
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// RaceEnabled reports whether the server is built with the race detector
// (EVENT_APISERVER_RACE=1), in which case a race it reports fails the test.
func RaceEnabled() bool { return os.Getenv("EVENT_APISERVER_RACE") == "1" }

// raceReport is what the race detector prints on stderr for each race.
const raceReport = "WARNING: DATA RACE"

var serverSeq struct {
	sync.Mutex
	n int
}

// StartServer starts event-apiserver and waits until it is ready and has
// printed its kubeconfig line. It is stopped when the test ends.
func StartServer(t testing.TB, opts ServerOptions) *Server {
	t.Helper()
	if opts.Binary == "" {
		opts.Binary = ServerBinary(t)
	}
	if opts.Dir == "" {
		serverSeq.Lock()
		serverSeq.n++
		opts.Dir = filepath.Join(t.TempDir(), fmt.Sprintf("event-apiserver-%d", serverSeq.n))
		serverSeq.Unlock()
	}
	if opts.EmbeddedEtcdProgressNotifyInterval == 0 {
		opts.EmbeddedEtcdProgressNotifyInterval = DefaultEtcdProgressNotifyInterval
	}
	s, err := testbed.StartServer(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	p := s.Process()
	stopAtCleanup(t, p)
	if RaceEnabled() {
		// Registered after stopAtCleanup, so it runs first: the log is
		// complete once the server has stopped.
		t.Cleanup(func() {
			_ = p.Stop()
			if p.LogContains(raceReport) {
				t.Errorf("event-apiserver reported a data race (log %s):\n%s", p.LogPath, p.Tail(logTailLines))
			}
		})
	}
	return &Server{Server: s}
}

// RepoRoot is the checkout's root directory.
func RepoRoot() (string, error) { return testbed.RepoRoot() }

// FreePort returns a loopback port that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	ports, err := testbed.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	return ports[0]
}

// Start starts a stopped server and waits until it is ready.
func (s *Server) Start() error { return s.Server.Start(context.Background()) }

// WaitReady waits for /readyz and, standalone, for the kubeconfig line.
func (s *Server) WaitReady() error { return s.Server.WaitReady(context.Background()) }

// Stop sends SIGTERM and waits for a clean exit.
func (s *Server) Stop() error { return s.Process().Stop() }

// Kill sends SIGKILL.
func (s *Server) Kill() error { return s.Process().Kill() }

// Restart stops the server and starts it again on the same port and data.
func (s *Server) Restart() error { return s.Server.Restart(context.Background()) }

// Config is an admin client configuration, read from the server's kubeconfig.
func (s *Server) Config(t testing.TB) *rest.Config {
	t.Helper()
	config, err := s.RestConfig()
	if err != nil {
		t.Fatal(err)
	}
	return config
}

// Client is an admin clientset.
func (s *Server) Client(t testing.TB) kubernetes.Interface {
	t.Helper()
	client, err := kubernetes.NewForConfig(s.Config(t))
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// FindServerPID finds the event-apiserver process started with dataDir.
func FindServerPID(dataDir string) (int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	want := "--data-dir=" + dataDir
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(cmdline), "\x00")
		if len(args) == 0 || filepath.Base(args[0]) != "event-apiserver" {
			continue
		}
		for _, a := range args[1:] {
			if a == want {
				return pid, nil
			}
		}
	}
	return 0, fmt.Errorf("no event-apiserver process with %s", want)
}
