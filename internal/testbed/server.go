package testbed

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// DefaultServerStartTimeout bounds the wait for event-apiserver's /readyz.
const DefaultServerStartTimeout = 90 * time.Second

// ServerOptions configures StartServer. Beyond Binary and Dir, the zero
// value runs the server as a newcomer would: embedded etcd, default TTL.
type ServerOptions struct {
	// Binary is event-apiserver (ServerBinary, or one taken out of the
	// image).
	Binary string
	// Dir holds the log, and the data directory unless DataDir is set; it
	// is created.
	Dir string
	// DataDir is --data-dir; default Dir/data. Pass the same directory to a
	// second server to see the first one's data.
	DataDir string
	// EtcdServers, when set, points the server at an external etcd instead
	// of its embedded one.
	EtcdServers string
	// EmbeddedEtcdPort, when set, fixes the embedded etcd's client port so
	// that a caller can read etcd directly.
	EmbeddedEtcdPort int
	// EmbeddedEtcdProgressNotifyInterval is
	// --embedded-etcd-progress-notify-interval when non-zero and the etcd
	// is embedded (the server refuses it with EtcdServers).
	EmbeddedEtcdProgressNotifyInterval time.Duration
	// EventTTL is --event-ttl when non-zero.
	EventTTL time.Duration
	// Profiling passes --profiling=true.
	Profiling bool
	// ExtraArgs are appended (the last occurrence of a flag wins).
	ExtraArgs []string
	// StartTimeout bounds the wait for readiness on start; default
	// DefaultServerStartTimeout.
	StartTimeout time.Duration
	// AggregatedKubeconfig, when set, runs the server with --aggregated
	// behind the kube-apiserver this kubeconfig reaches. Such a server
	// writes no admin kubeconfig; readiness is checked anonymously.
	AggregatedKubeconfig string
	// ServingCertFile and ServingKeyFile are --tls-cert-file and
	// --tls-private-key-file; the certificate file must hold its CA too,
	// since clients trust it as the CA bundle.
	ServingCertFile string
	ServingKeyFile  string
}

// Server is a running event-apiserver. Its port, data directory and flags
// stay the same across Stop/Kill and Start/Restart.
type Server struct {
	// URL is https://127.0.0.1:<port>.
	URL  string
	Port int
	// DataDir is --data-dir.
	DataDir string
	// Kubeconfig is the admin kubeconfig the server writes into DataDir;
	// empty for an aggregated server, which writes none.
	Kubeconfig string
	// EtcdURL is the embedded etcd's client URL, when EmbeddedEtcdPort was
	// set.
	EtcdURL string

	proc         *Process
	startTimeout time.Duration
	caCertFile   string
	startup      time.Duration
}

// StartServer starts event-apiserver on a free loopback port and waits
// until it is ready and, standalone, has printed its kubeconfig line.
func StartServer(ctx context.Context, o ServerOptions) (*Server, error) {
	if o.DataDir == "" {
		o.DataDir = filepath.Join(o.Dir, "data")
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = DefaultServerStartTimeout
	}
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, err
	}
	var s *Server
	err := retryOnPortClash("event-apiserver", func(attempt int) ([]*Process, error) {
		var err error
		if s, err = newServer(o, attempt); err != nil {
			return nil, err
		}
		if err = s.Start(ctx); err != nil {
			_ = s.proc.Kill()
		}
		return []*Process{s.proc}, err
	})
	if err != nil {
		return nil, fmt.Errorf("starting event-apiserver: %w", err)
	}
	return s, nil
}

func newServer(o ServerOptions, attempt int) (*Server, error) {
	ports, err := FreePorts(1)
	if err != nil {
		return nil, err
	}
	s := &Server{
		URL:          "https://127.0.0.1:" + strconv.Itoa(ports[0]),
		Port:         ports[0],
		DataDir:      o.DataDir,
		Kubeconfig:   filepath.Join(o.DataDir, "kubeconfig"),
		startTimeout: o.StartTimeout,
		caCertFile:   filepath.Join(o.DataDir, "certs", "apiserver.crt"),
	}
	args := []string{
		"--data-dir=" + o.DataDir,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(s.Port),
	}
	if o.EmbeddedEtcdProgressNotifyInterval != 0 && o.EtcdServers == "" {
		args = append(args, "--embedded-etcd-progress-notify-interval="+o.EmbeddedEtcdProgressNotifyInterval.String())
	}
	if o.ServingCertFile != "" {
		s.caCertFile = o.ServingCertFile
		args = append(args, "--tls-cert-file="+o.ServingCertFile, "--tls-private-key-file="+o.ServingKeyFile)
	}
	if o.EtcdServers != "" {
		args = append(args, "--etcd-servers="+o.EtcdServers)
	} else if o.EmbeddedEtcdPort != 0 {
		s.EtcdURL = fmt.Sprintf("http://127.0.0.1:%d", o.EmbeddedEtcdPort)
		args = append(args, fmt.Sprintf("--embedded-etcd-client-address=127.0.0.1:%d", o.EmbeddedEtcdPort))
	}
	if o.AggregatedKubeconfig != "" {
		s.Kubeconfig = ""
		args = append(args, "--aggregated", "--kubeconfig="+o.AggregatedKubeconfig)
	}
	if o.EventTTL != 0 {
		args = append(args, "--event-ttl="+o.EventTTL.String())
	}
	if o.Profiling {
		args = append(args, "--profiling=true")
	}
	args = append(args, o.ExtraArgs...)
	s.proc = &Process{Name: "event-apiserver", Path: o.Binary, Args: args,
		LogPath: filepath.Join(o.Dir, fmt.Sprintf("event-apiserver-%d-try%d.log", s.Port, attempt))}
	return s, nil
}

// Process is the server's process: stop, kill, pause, its PID and log.
func (s *Server) Process() *Process { return s.proc }

// Start starts a stopped server and waits until it is ready.
func (s *Server) Start(ctx context.Context) error {
	if err := s.proc.Start(); err != nil {
		return err
	}
	return s.WaitReady(ctx)
}

// Restart stops the server and starts it again on the same port and data.
func (s *Server) Restart(ctx context.Context) error {
	if err := s.proc.Stop(); err != nil {
		return err
	}
	return s.Start(ctx)
}

// Startup is the time from the latest start to the first /readyz 200.
func (s *Server) Startup() time.Duration { return s.startup }

// CACertFile is the serving certificate bundle (leaf and self-signed CA),
// what an APIService's caBundle or a client's CA must hold.
func (s *Server) CACertFile() string { return s.caCertFile }

// LogPath is the file holding the server's stdout and stderr.
func (s *Server) LogPath() string { return s.proc.LogPath }

// Running reports whether the process is alive.
func (s *Server) Running() bool { return s.proc.Running() }

// LogContains reports whether the server's output contains text.
func (s *Server) LogContains(text string) bool { return s.proc.LogContains(text) }

// WaitReady waits, at most the start timeout, for /readyz and, standalone,
// for the kubeconfig line.
func (s *Server) WaitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.startTimeout)
	defer cancel()
	startup, err := WaitReadyz(ctx, s.proc, func() (*rest.Config, error) {
		if s.Kubeconfig == "" {
			// Aggregated: /readyz is always allowed, even anonymously.
			return &rest.Config{Host: s.URL, TLSClientConfig: rest.TLSClientConfig{CAFile: s.caCertFile}}, nil
		}
		if !s.proc.LogContains("export KUBECONFIG=" + s.Kubeconfig) {
			return nil, fmt.Errorf("no kubeconfig line yet")
		}
		return s.RestConfig()
	})
	s.startup = startup
	return err
}

// RestConfig is an admin client configuration, read from the server's
// kubeconfig.
func (s *Server) RestConfig() (*rest.Config, error) {
	return clientcmd.BuildConfigFromFlags("", s.Kubeconfig)
}
