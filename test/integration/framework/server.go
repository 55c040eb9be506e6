package framework

// StartServer runs the real event-apiserver binary, built from this checkout
// once per test binary, as a child process on loopback.

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/eventapiserver/event-apiserver/internal/proc"
)

// ServerOptions configures StartServer. The zero value runs the server as a
// newcomer would: embedded etcd, default TTL.
type ServerOptions struct {
	// DataDir defaults to a fresh directory under t.TempDir(). Pass the same
	// directory to a second server to see the first one's data.
	DataDir string
	// EtcdServers, when set, points the server at an external etcd instead
	// of its embedded one.
	EtcdServers string
	// EmbeddedEtcdPort, when set, fixes the embedded etcd's client port so a
	// test can read etcd directly; by default a free port is picked.
	EmbeddedEtcdPort int
	// EventTTL is passed as --event-ttl when non-zero.
	EventTTL time.Duration
	// ExtraArgs are appended to the command line.
	ExtraArgs []string
	// StartTimeout bounds the wait for /readyz; default 90s.
	StartTimeout time.Duration
	// AggregatedKubeconfig, when set, runs the server with --aggregated
	// behind the kube-apiserver this kubeconfig reaches. Such a server
	// writes no admin kubeconfig; readiness is checked anonymously.
	AggregatedKubeconfig string
	// Binary runs this event-apiserver binary instead of the one built from
	// the checkout, e.g. the one taken out of the image.
	Binary string
	// ServingCertFile and ServingKeyFile are passed as --tls-cert-file and
	// --tls-private-key-file; the certificate file must hold its CA too,
	// since clients trust it as the CA bundle.
	ServingCertFile string
	ServingKeyFile  string
}

// Server is a running event-apiserver.
type Server struct {
	URL        string
	Port       int
	DataDir    string
	Kubeconfig string
	// EtcdURL is the embedded etcd's client URL, when EmbeddedEtcdPort was set.
	EtcdURL string

	proc       *proc.Process
	timeout    time.Duration
	caCertFile string
}

var serverBuild struct {
	once sync.Once
	path string
	err  error
}

// ServerBinary builds cmd/event-apiserver into _output/bin (_output/bin/race
// with the race detector) once per test binary.
func ServerBinary(t testing.TB) string {
	t.Helper()
	serverBuild.once.Do(func() {
		root, err := proc.RepoRoot()
		if err != nil {
			serverBuild.err = err
			return
		}
		serverBuild.path = filepath.Join(root, "_output", "bin", "event-apiserver")
		args := []string{"build", "-o", serverBuild.path}
		if RaceEnabled() {
			// The server's own races, not only the test's: hack/test.sh's
			// race tier sets EVENT_APISERVER_RACE=1. Its own directory (the
			// same base name, which tests look processes up by), so that it
			// can run beside the tier that uses the plain build.
			serverBuild.path = filepath.Join(root, "_output", "bin", "race", "event-apiserver")
			args = []string{"build", "-race", "-o", serverBuild.path}
		}
		cmd := exec.Command("go", append(args, "./cmd/event-apiserver")...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			serverBuild.err = fmt.Errorf("building event-apiserver: %v\n%s", err, out)
		}
	})
	if serverBuild.err != nil {
		t.Fatal(serverBuild.err)
	}
	return serverBuild.path
}

// RaceEnabled reports whether the server is built with the race detector
// (EVENT_APISERVER_RACE=1), in which case a race it reports fails the test.
func RaceEnabled() bool { return os.Getenv("EVENT_APISERVER_RACE") == "1" }

// raceReport is what the race detector prints on stderr for each race.
const raceReport = "WARNING: DATA RACE"

// StartServer starts event-apiserver and waits until it is ready and has
// printed its kubeconfig line. It is stopped when the test ends.
func StartServer(t testing.TB, opts ServerOptions) *Server {
	t.Helper()
	bin := opts.Binary
	if bin == "" {
		bin = ServerBinary(t)
	}
	if opts.DataDir == "" {
		opts.DataDir = filepath.Join(t.TempDir(), "data")
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 90 * time.Second
	}
	ports, err := proc.FreePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	args := []string{
		"--data-dir=" + opts.DataDir,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(ports[0]),
		// Tests want bookmarks and progress quickly.
		"--embedded-etcd-progress-notify-interval=1s",
	}
	s := &Server{
		URL:        fmt.Sprintf("https://127.0.0.1:%d", ports[0]),
		Port:       ports[0],
		DataDir:    opts.DataDir,
		Kubeconfig: filepath.Join(opts.DataDir, "kubeconfig"),
		timeout:    opts.StartTimeout,
		caCertFile: filepath.Join(opts.DataDir, "certs", "apiserver.crt"),
	}
	if opts.ServingCertFile != "" {
		s.caCertFile = opts.ServingCertFile
		args = append(args, "--tls-cert-file="+opts.ServingCertFile, "--tls-private-key-file="+opts.ServingKeyFile)
	}
	if opts.EtcdServers != "" {
		args = append(args, "--etcd-servers="+opts.EtcdServers)
	} else if opts.EmbeddedEtcdPort != 0 {
		s.EtcdURL = fmt.Sprintf("http://127.0.0.1:%d", opts.EmbeddedEtcdPort)
		args = append(args, fmt.Sprintf("--embedded-etcd-client-address=127.0.0.1:%d", opts.EmbeddedEtcdPort))
	}
	if opts.AggregatedKubeconfig != "" {
		s.Kubeconfig = ""
		args = append(args, "--aggregated", "--kubeconfig="+opts.AggregatedKubeconfig)
	}
	if opts.EventTTL != 0 {
		args = append(args, "--event-ttl="+opts.EventTTL.String())
	}
	args = append(args, opts.ExtraArgs...)

	logPath := filepath.Join(t.TempDir(), fmt.Sprintf("event-apiserver-%d.log", ports[0]))
	s.proc = newChildProcess(t, "event-apiserver", bin, args, logPath)
	if RaceEnabled() {
		// Registered after newChildProcess's cleanup, so it runs first:
		// the log is complete once the server has stopped.
		t.Cleanup(func() {
			_ = s.proc.Stop()
			if s.proc.LogContains(raceReport) {
				t.Errorf("event-apiserver reported a data race (log %s):\n%s", logPath, s.proc.Tail(logTailLines))
			}
		})
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	return s
}

// RepoRoot is the checkout's root directory.
func RepoRoot() (string, error) { return proc.RepoRoot() }

// FreePort returns a loopback port that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	ports, err := proc.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	return ports[0]
}

// Start starts a stopped server and waits until it is ready.
func (s *Server) Start() error {
	if err := s.proc.Start(); err != nil {
		return err
	}
	return s.WaitReady()
}

// CACertFile is the serving certificate bundle (leaf and self-signed CA),
// what an APIService's caBundle or a client's CA must hold.
func (s *Server) CACertFile() string { return s.caCertFile }

// LogPath is the file holding the server's stdout and stderr.
func (s *Server) LogPath() string { return s.proc.LogPath }

// WaitReady waits for /readyz and, standalone, for the kubeconfig line.
func (s *Server) WaitReady() error {
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	err := s.proc.Poll(ctx, 100*time.Millisecond, func() error {
		var config *rest.Config
		if s.Kubeconfig == "" {
			// Aggregated: /readyz is always allowed, even anonymously.
			config = &rest.Config{Host: s.URL, TLSClientConfig: rest.TLSClientConfig{CAFile: s.CACertFile()}}
		} else {
			if !s.proc.LogContains("export KUBECONFIG=" + s.Kubeconfig) {
				return fmt.Errorf("no kubeconfig line yet")
			}
			var err error
			if config, err = s.loadConfig(); err != nil {
				return err
			}
		}
		client, err := rest.UnversionedRESTClientFor(withoutGroup(config))
		if err != nil {
			return err
		}
		var status int
		client.Get().AbsPath("/readyz").Do(ctx).StatusCode(&status)
		if status != http.StatusOK {
			return fmt.Errorf("/readyz answered %d", status)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("event-apiserver not ready: %w\n%s", err, s.proc.Tail(logTailLines))
	}
	return nil
}

// Stop sends SIGTERM and waits for a clean exit.
func (s *Server) Stop() error { return s.proc.Stop() }

// Kill sends SIGKILL.
func (s *Server) Kill() error { return s.proc.Kill() }

// Restart stops the server and starts it again on the same port and data.
func (s *Server) Restart() error {
	if err := s.Stop(); err != nil {
		return err
	}
	return s.Start()
}

// Running reports whether the process is alive.
func (s *Server) Running() bool { return s.proc.Running() }

// LogContains reports whether the server's output contains text.
func (s *Server) LogContains(text string) bool { return s.proc.LogContains(text) }

// Config is an admin client configuration, read from the server's kubeconfig.
func (s *Server) Config(t testing.TB) *rest.Config {
	t.Helper()
	config, err := s.loadConfig()
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

func (s *Server) loadConfig() (*rest.Config, error) {
	return clientcmd.BuildConfigFromFlags("", s.Kubeconfig)
}

func withoutGroup(c *rest.Config) *rest.Config {
	c = rest.CopyConfig(c)
	c.GroupVersion = nil
	c.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	return c
}
