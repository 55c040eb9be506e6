package process

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/eventapiserver/event-apiserver/internal/proc"
)

// Kinds of API server.
const (
	KubeAPIServer  = "kube-apiserver"
	EventAPIServer = "event-apiserver"
)

// EventTTL is --event-ttl for both servers (kube-apiserver's default).
const EventTTL = time.Hour

// startTimeout bounds the wait for /readyz.
const startTimeout = 3 * time.Minute

// APIServer is a running kube-apiserver or event-apiserver.
type APIServer struct {
	*proc.Process
	// Kind is KubeAPIServer or EventAPIServer.
	Kind string
	// URL is https://127.0.0.1:<port>.
	URL string
	// EtcdURL is the etcd the server stores Events in.
	EtcdURL string

	config      func() (*rest.Config, error)
	lastStartup time.Duration
}

// Config is an admin client configuration (bearer token, serving CA); the
// caller may change the copy it gets.
func (s *APIServer) Config() (*rest.Config, error) {
	c, err := s.config()
	if err != nil {
		return nil, err
	}
	return rest.CopyConfig(c), nil
}

// KubeAPIServerOptions configures StartKubeAPIServer.
type KubeAPIServerOptions struct {
	// Binary is kube-apiserver v1.36.3 (hack/build-kube.sh).
	Binary string
	// Dir holds the certificates, keys, token file and log; it is created.
	Dir     string
	EtcdURL string
	// EventsWatchCache turns the Events watch cache on with
	// --watch-cache-sizes=events#1000. kube-apiserver's
	// DefaultWatchCacheSizes sets events (and events.events.k8s.io) to 0;
	// completion merges the flag over those defaults, and the storage
	// factory looks up the core "events" resource for both API groups, so
	// this one entry gives each group its own cacher. Any size above zero
	// means "cache on": the size itself is ignored (the cache is dynamic).
	EventsWatchCache bool
	ExtraArgs        []string
}

// StartKubeAPIServer starts kube-apiserver on a free loopback port with a
// static admin token, AlwaysAllow authorization and --event-ttl=1h, and
// waits for /readyz. The serving certificate is self-signed by
// kube-apiserver itself into --cert-dir.
func StartKubeAPIServer(ctx context.Context, o KubeAPIServerOptions) (*APIServer, error) {
	certDir := filepath.Join(o.Dir, "certs")
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		return nil, err
	}
	token, err := writeKubeCredentials(o.Dir)
	if err != nil {
		return nil, err
	}
	var lastErr error
	for attempt := 1; attempt <= 3; attempt++ {
		ports, err := proc.FreePorts(1)
		if err != nil {
			return nil, err
		}
		s := &APIServer{Kind: KubeAPIServer, URL: "https://127.0.0.1:" + strconv.Itoa(ports[0]), EtcdURL: o.EtcdURL}
		config := &rest.Config{
			Host:            s.URL,
			BearerToken:     token,
			TLSClientConfig: rest.TLSClientConfig{CAFile: filepath.Join(certDir, "apiserver.crt")},
		}
		s.config = func() (*rest.Config, error) {
			if _, err := os.Stat(config.CAFile); err != nil {
				return nil, err
			}
			return config, nil
		}
		args := []string{
			"--etcd-servers=" + o.EtcdURL,
			"--secure-port=" + strconv.Itoa(ports[0]),
			"--bind-address=127.0.0.1",
			"--advertise-address=127.0.0.1",
			// Service "kubernetes" may not have loopback endpoints: the
			// default lease reconciler would fail every sync.
			"--endpoint-reconciler-type=none",
			"--cert-dir=" + certDir,
			"--token-auth-file=" + filepath.Join(o.Dir, "tokens.csv"),
			"--authorization-mode=AlwaysAllow",
			"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
			"--service-account-key-file=" + filepath.Join(o.Dir, "sa.pub"),
			"--service-account-signing-key-file=" + filepath.Join(o.Dir, "sa.key"),
			"--service-cluster-ip-range=10.96.0.0/16",
			"--event-ttl=" + EventTTL.String(),
			"--profiling=true",
		}
		if o.EventsWatchCache {
			args = append(args, "--watch-cache-sizes=events#1000")
		}
		args = append(args, o.ExtraArgs...)
		s.Process = &proc.Process{
			Name: KubeAPIServer, Path: o.Binary, Args: args,
			LogPath: filepath.Join(o.Dir, fmt.Sprintf("kube-apiserver-%d.log", attempt)),
		}
		if lastErr = s.startAndWait(ctx); lastErr == nil {
			return s, nil
		}
		if !s.LogContains("address already in use") {
			break
		}
	}
	return nil, lastErr
}

// writeKubeCredentials writes the token file and the service account key
// pair kube-apiserver insists on, and returns the admin token.
func writeKubeCredentials(dir string) (string, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return "", err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "sa.pub"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o600); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "sa.key"), pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600); err != nil {
		return "", err
	}
	tok := make([]byte, 24)
	if _, err := rand.Read(tok); err != nil {
		return "", err
	}
	token := hex.EncodeToString(tok)
	return token, os.WriteFile(filepath.Join(dir, "tokens.csv"), []byte(token+`,admin,admin-uid,"system:masters"`+"\n"), 0o600)
}

// EventAPIServerOptions configures StartEventAPIServer.
type EventAPIServerOptions struct {
	// Binary is event-apiserver built from this checkout.
	Binary string
	// Dir holds --data-dir (certificates, admin token, kubeconfig) and the
	// log; it is created.
	Dir     string
	EtcdURL string
	// ExtraArgs are appended (the last occurrence of a flag wins).
	ExtraArgs []string
}

// StartEventAPIServer starts event-apiserver over the given etcd on a free
// loopback port with --event-ttl=1h and --profiling, and waits for /readyz.
func StartEventAPIServer(ctx context.Context, o EventAPIServerOptions) (*APIServer, error) {
	dataDir := filepath.Join(o.Dir, "data")
	var lastErr error
	for attempt := 1; attempt <= 3; attempt++ {
		ports, err := proc.FreePorts(1)
		if err != nil {
			return nil, err
		}
		s := &APIServer{Kind: EventAPIServer, URL: "https://127.0.0.1:" + strconv.Itoa(ports[0]), EtcdURL: o.EtcdURL}
		kubeconfig := filepath.Join(dataDir, "kubeconfig")
		s.config = func() (*rest.Config, error) {
			c, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
			if err == nil && c.Host != s.URL {
				// A kubeconfig from an attempt on another port.
				err = fmt.Errorf("%s names %s, not %s", kubeconfig, c.Host, s.URL)
			}
			return c, err
		}
		args := []string{
			"--etcd-servers=" + o.EtcdURL,
			"--data-dir=" + dataDir,
			"--bind-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(ports[0]),
			"--event-ttl=" + EventTTL.String(),
			"--profiling=true",
		}
		args = append(args, o.ExtraArgs...)
		s.Process = &proc.Process{
			Name: EventAPIServer, Path: o.Binary, Args: args,
			LogPath: filepath.Join(o.Dir, fmt.Sprintf("event-apiserver-%d.log", attempt)),
		}
		if err := os.MkdirAll(o.Dir, 0o700); err != nil {
			return nil, err
		}
		if lastErr = s.startAndWait(ctx); lastErr == nil {
			return s, nil
		}
		if !s.LogContains("address already in use") {
			break
		}
	}
	return nil, lastErr
}

// Launch starts p, an API server that config reaches, and waits until it
// answers /readyz; Startup then says how long that took.
func Launch(ctx context.Context, p *proc.Process, config *rest.Config) (*APIServer, error) {
	s := &APIServer{Process: p, URL: config.Host, config: func() (*rest.Config, error) { return config, nil }}
	return s, s.startAndWait(ctx)
}

// Restart stops the server, starts it again with the same flags and
// returns the time from process start to the first /readyz 200.
func (s *APIServer) Restart(ctx context.Context) (time.Duration, error) {
	if err := s.Stop(); err != nil {
		return 0, err
	}
	if err := s.startAndWait(ctx); err != nil {
		return 0, err
	}
	return s.lastStartup, nil
}

// Startup is the time from process start to the first /readyz 200 of the
// latest start.
func (s *APIServer) Startup() time.Duration { return s.lastStartup }

func (s *APIServer) startAndWait(ctx context.Context) error {
	if err := s.Start(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	var client *http.Client
	err := poll(ctx, 50*time.Millisecond, s.Process, func() error {
		if client == nil {
			config, err := s.config()
			if err != nil {
				return err
			}
			if client, err = rest.HTTPClientFor(config); err != nil {
				return err
			}
			client.Timeout = 5 * time.Second
		}
		resp, err := client.Get(s.URL + "/readyz")
		if err != nil {
			return err
		}
		defer func() { _ = resp.Body.Close() }()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/readyz: %d %s", resp.StatusCode, strings.TrimSpace(string(body)))
		}
		return nil
	})
	if err != nil {
		_ = s.Stop()
		return err
	}
	s.lastStartup = time.Since(s.StartedAt())
	return nil
}
