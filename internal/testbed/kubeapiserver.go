package testbed

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"k8s.io/client-go/rest"

	"github.com/eventapiserver/event-apiserver/pkg/servingcert"
	"github.com/eventapiserver/event-apiserver/pkg/standalone"
)

const (
	// KubeVersion is the version of the reference kube-apiserver and
	// kubectl (hack/build-kube.sh).
	KubeVersion = "v1.36.3"

	// DefaultKubeAPIServerStartTimeout bounds the wait for readiness.
	DefaultKubeAPIServerStartTimeout = 2 * time.Minute

	// FrontProxyClientName is the CN of the front-proxy client certificate
	// kube-apiserver presents to aggregated servers, and the only name in
	// --requestheader-allowed-names.
	FrontProxyClientName = "front-proxy-client"

	// KubeServiceAccountIssuer is --service-account-issuer.
	KubeServiceAccountIssuer = "https://kubernetes.default.svc.cluster.local"

	// pkiValidity is the lifetime of the test CAs and certificates: longer
	// than any test or benchmark.
	pkiValidity = 10 * 365 * 24 * time.Hour
)

// KubeAPIServerOptions configures StartKubeAPIServer.
type KubeAPIServerOptions struct {
	// Binary is kube-apiserver KubeVersion (KubeBinary).
	Binary string
	// Dir holds the certificates, keys, token file, kubeconfig and log; it
	// is created.
	Dir string
	// EtcdServers is --etcd-servers (comma-separated URLs).
	EtcdServers string
	// EtcdServersOverrides is --etcd-servers-overrides, e.g.
	// "/events#http://127.0.0.1:2379" to keep core/v1 Events in another etcd.
	EtcdServersOverrides string
	// AuthorizationMode is --authorization-mode; default "RBAC".
	AuthorizationMode string
	// EventTTL is --event-ttl when non-zero.
	EventTTL time.Duration
	// Profiling is --profiling (pprof endpoints).
	Profiling bool
	// EventsWatchCache turns the Events watch cache on with
	// --watch-cache-sizes=events#1000. kube-apiserver's
	// DefaultWatchCacheSizes sets events (and events.events.k8s.io) to 0;
	// completion merges the flag over those defaults, and the storage
	// factory looks up the core "events" resource for both API groups, so
	// this one entry gives each group its own cacher. Any size above zero
	// means "cache on": the size itself is ignored (the cache is dynamic).
	EventsWatchCache bool
	// ExtraFlags are appended; for single-valued flags the last occurrence
	// wins, so they can override the defaults (e.g.
	// "--runtime-config=events.k8s.io/v1=false").
	ExtraFlags []string
	// StartTimeout bounds the wait for readiness on start and Restart;
	// default DefaultKubeAPIServerStartTimeout.
	StartTimeout time.Duration
	// HostsFile, when set, replaces /etc/hosts for kube-apiserver alone (a
	// private mount namespace; needs root), so that it resolves the names
	// a test gives pods.
	HostsFile string
}

// KubeAPIServer is a running kube-apiserver. Its port, certificates, keys
// and flags stay the same across Stop/Kill and Restart.
type KubeAPIServer struct {
	// URL is https://127.0.0.1:<port>.
	URL string
	// Port is the --secure-port.
	Port int
	// AdminToken is a static bearer token (--token-auth-file) for user
	// "admin" in group system:masters.
	AdminToken string
	// KubeconfigPath is a kubeconfig (server URL, serving CA, admin token)
	// for kubectl and for delegated authentication/authorization.
	KubeconfigPath string
	// Dir is KubeAPIServerOptions.Dir; CertDir is --cert-dir under it.
	Dir, CertDir string

	// CAFile and CAData: the CA that signed the serving certificate
	// (SANs localhost, 127.0.0.1, ::1, kubernetes.default.svc...).
	CAFile string
	CAData []byte
	// ServingCertFile and ServingKeyFile are --tls-cert-file and
	// --tls-private-key-file.
	ServingCertFile, ServingKeyFile string

	// ClientCAFile is --client-ca-file; AdminClientCertFile/KeyFile is a
	// client certificate it signed for CN=admin, O=system:masters.
	// ClientCAKeyFile is the CA's key, for tests that sign other clients'
	// certificates (kubelets, a front door).
	ClientCAFile, ClientCAKeyFile           string
	AdminClientCertFile, AdminClientKeyFile string

	// FrontProxyCAFile is --requestheader-client-ca-file (kube-apiserver
	// also publishes it in kube-system/extension-apiserver-authentication);
	// FrontProxyClientCertFile/KeyFile (CN=front-proxy-client) are
	// --proxy-client-cert-file/--proxy-client-key-file, presented to
	// aggregated API servers. FrontProxyCAKeyFile is the CA's key, for
	// tests that sign another front proxy's certificate.
	FrontProxyCAFile, FrontProxyCAKeyFile             string
	FrontProxyClientCertFile, FrontProxyClientKeyFile string

	// ServiceAccountKeyFile (public) and ServiceAccountSigningKeyFile
	// (private, RSA 2048) with issuer KubeServiceAccountIssuer.
	ServiceAccountKeyFile, ServiceAccountSigningKeyFile string

	// EtcdServers is the --etcd-servers value in use.
	EtcdServers string
	// Args are the command-line flags kube-apiserver runs with.
	Args []string

	config       *rest.Config
	startTimeout time.Duration
	proc         *Process
	startup      time.Duration
}

// RestConfig is a copy of an admin rest.Config (bearer token, serving CA;
// QPS 100, burst 200).
func (s *KubeAPIServer) RestConfig() *rest.Config { return rest.CopyConfig(s.config) }

// Process is the server's process: stop, kill, its PID and log.
func (s *KubeAPIServer) Process() *Process { return s.proc }

// LogPath is the file the process's output goes to (appended to across
// restarts).
func (s *KubeAPIServer) LogPath() string { return s.proc.LogPath }

// Running reports whether the process is alive.
func (s *KubeAPIServer) Running() bool { return s.proc.Running() }

// Startup is the time from the latest start to the first /readyz 200.
func (s *KubeAPIServer) Startup() time.Duration { return s.startup }

// Restart stops the server if it runs, starts it again with the same port,
// certificates and flags, and waits until it is ready.
func (s *KubeAPIServer) Restart(ctx context.Context) error {
	if err := s.proc.Stop(); err != nil {
		return err
	}
	if err := s.proc.Start(); err != nil {
		return err
	}
	return s.WaitReady(ctx)
}

// WaitReady waits, at most the start timeout, until /readyz answers 200
// and the "default" namespace exists (the bootstrap controller creates it
// shortly after readiness; tests and workloads create objects in it).
func (s *KubeAPIServer) WaitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.startTimeout)
	defer cancel()
	startup, err := WaitReadyz(ctx, s.proc, func() (*rest.Config, error) { return s.config, nil })
	if err != nil {
		return err
	}
	s.startup = startup
	client, err := httpClientFor(s.config)
	if err != nil {
		return err
	}
	if err := s.proc.Poll(ctx, readyInterval, func() error {
		return getOK(ctx, client, s.URL+"/api/v1/namespaces/default")
	}); err != nil {
		return fmt.Errorf("waiting for namespace default: %w\n%s", err, s.proc.Tail(logTailLines))
	}
	return nil
}

// StartKubeAPIServer runs kube-apiserver on a free loopback port with a
// generated PKI (serving, client and front-proxy CAs), a static admin
// token, service-account keys and request-header (aggregation) settings,
// and waits until it is ready.
func StartKubeAPIServer(ctx context.Context, o KubeAPIServerOptions) (*KubeAPIServer, error) {
	if o.AuthorizationMode == "" {
		o.AuthorizationMode = "RBAC"
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = DefaultKubeAPIServerStartTimeout
	}
	s := &KubeAPIServer{Dir: o.Dir, CertDir: filepath.Join(o.Dir, "certs"), EtcdServers: o.EtcdServers, startTimeout: o.StartTimeout}
	if err := os.MkdirAll(s.CertDir, 0o700); err != nil {
		return nil, err
	}
	if err := s.writeCredentials(); err != nil {
		return nil, fmt.Errorf("kube-apiserver credentials: %w", err)
	}
	err := retryOnPortClash("kube-apiserver", func(attempt int) ([]*Process, error) {
		err := s.tryStart(ctx, o, attempt)
		return []*Process{s.proc}, err
	})
	if err != nil {
		return nil, fmt.Errorf("starting kube-apiserver: %w", err)
	}
	return s, nil
}

func (s *KubeAPIServer) tryStart(ctx context.Context, o KubeAPIServerOptions, attempt int) error {
	ports, err := FreePorts(1)
	if err != nil {
		return err
	}
	s.Port = ports[0]
	s.URL = "https://127.0.0.1:" + strconv.Itoa(s.Port)
	s.config = &rest.Config{
		Host:            s.URL,
		BearerToken:     s.AdminToken,
		TLSClientConfig: rest.TLSClientConfig{CAData: s.CAData},
		QPS:             100,
		Burst:           200,
	}
	s.KubeconfigPath = filepath.Join(s.Dir, "kubeconfig")
	if err := standalone.WriteKubeconfig(s.KubeconfigPath, s.URL, s.CAData, s.AdminToken); err != nil {
		return err
	}
	s.Args = []string{
		"--etcd-servers=" + s.EtcdServers,
		"--secure-port=" + strconv.Itoa(s.Port),
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		// The endpoints of Service "kubernetes" may not be loopback
		// addresses; with the default lease reconciler every sync fails.
		"--endpoint-reconciler-type=none",
		"--cert-dir=" + s.CertDir,
		"--tls-cert-file=" + s.ServingCertFile,
		"--tls-private-key-file=" + s.ServingKeyFile,
		"--client-ca-file=" + s.ClientCAFile,
		"--token-auth-file=" + filepath.Join(s.Dir, "tokens.csv"),
		"--authorization-mode=" + o.AuthorizationMode,
		"--service-account-issuer=" + KubeServiceAccountIssuer,
		"--service-account-key-file=" + s.ServiceAccountKeyFile,
		"--service-account-signing-key-file=" + s.ServiceAccountSigningKeyFile,
		"--service-cluster-ip-range=10.96.0.0/16",
		"--requestheader-client-ca-file=" + s.FrontProxyCAFile,
		"--proxy-client-cert-file=" + s.FrontProxyClientCertFile,
		"--proxy-client-key-file=" + s.FrontProxyClientKeyFile,
		"--requestheader-allowed-names=" + FrontProxyClientName,
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--enable-aggregator-routing=false",
		"--profiling=" + strconv.FormatBool(o.Profiling),
	}
	if o.EventTTL != 0 {
		s.Args = append(s.Args, "--event-ttl="+o.EventTTL.String())
	}
	if o.EventsWatchCache {
		s.Args = append(s.Args, "--watch-cache-sizes=events#1000")
	}
	if o.EtcdServersOverrides != "" {
		s.Args = append(s.Args, "--etcd-servers-overrides="+o.EtcdServersOverrides)
	}
	s.Args = append(s.Args, o.ExtraFlags...)

	logPath := filepath.Join(s.Dir, fmt.Sprintf("kube-apiserver-try%d.log", attempt))
	if o.HostsFile != "" {
		s.proc = &Process{Name: "kube-apiserver", Path: "unshare", LogPath: logPath, Args: append([]string{
			"--mount", "--propagation", "private", "sh", "-c", `mount --bind "$0" /etc/hosts && exec "$@"`,
			o.HostsFile, o.Binary}, s.Args...)}
	} else {
		s.proc = &Process{Name: "kube-apiserver", Path: o.Binary, Args: s.Args, LogPath: logPath}
	}
	if err := s.proc.Start(); err != nil {
		return err
	}
	if err := s.WaitReady(ctx); err != nil {
		_ = s.proc.Kill()
		return err
	}
	return nil
}

// writeCredentials writes the PKI, the service-account key pair and the
// token file kube-apiserver runs with.
func (s *KubeAPIServer) writeCredentials() error {
	d := s.CertDir
	now := time.Now()
	issue := func(caName, certFile, keyFile string, leaf servingcert.Leaf) (*servingcert.KeyPair, error) {
		ca, err := servingcert.NewCA(caName, now, pkiValidity)
		if err != nil {
			return nil, err
		}
		kp, err := ca.Issue(leaf, now, pkiValidity)
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(certFile, kp.CertPEM, 0o600); err != nil {
			return nil, err
		}
		return ca, os.WriteFile(keyFile, kp.KeyPEM, 0o600)
	}
	files := func(name string) (string, string) {
		return filepath.Join(d, name+".crt"), filepath.Join(d, name+".key")
	}
	s.ServingCertFile, s.ServingKeyFile = files("serving")
	servingCA, err := issue("kube-apiserver-serving-ca", s.ServingCertFile, s.ServingKeyFile, servingcert.Leaf{
		CommonName: "kube-apiserver",
		Usages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc.cluster.local"},
		IPs: []net.IP{net.ParseIP("127.0.0.1"), net.IPv6loopback, net.ParseIP("10.96.0.1")},
	})
	if err != nil {
		return err
	}
	s.AdminClientCertFile, s.AdminClientKeyFile = files("admin")
	clientCA, err := issue("kube-apiserver-client-ca", s.AdminClientCertFile, s.AdminClientKeyFile, servingcert.Leaf{
		CommonName: "admin", Organization: []string{"system:masters"},
		Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return err
	}
	s.FrontProxyClientCertFile, s.FrontProxyClientKeyFile = files(FrontProxyClientName)
	frontProxyCA, err := issue("front-proxy-ca", s.FrontProxyClientCertFile, s.FrontProxyClientKeyFile, servingcert.Leaf{
		CommonName: FrontProxyClientName,
		Usages:     []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return err
	}
	s.CAFile, s.CAData = filepath.Join(d, "serving-ca.crt"), servingCA.CertPEM
	s.ClientCAFile, s.ClientCAKeyFile = filepath.Join(d, "client-ca.crt"), filepath.Join(d, "client-ca.key")
	s.FrontProxyCAFile, s.FrontProxyCAKeyFile = filepath.Join(d, "front-proxy-ca.crt"), filepath.Join(d, "front-proxy-ca.key")
	for path, data := range map[string][]byte{
		s.CAFile:              servingCA.CertPEM,
		s.ClientCAFile:        clientCA.CertPEM,
		s.ClientCAKeyFile:     clientCA.KeyPEM,
		s.FrontProxyCAFile:    frontProxyCA.CertPEM,
		s.FrontProxyCAKeyFile: frontProxyCA.KeyPEM,
	} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return err
		}
	}

	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return err
	}
	s.ServiceAccountKeyFile = filepath.Join(d, "sa.pub")
	s.ServiceAccountSigningKeyFile = filepath.Join(d, "sa.key")
	if err := os.WriteFile(s.ServiceAccountKeyFile, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(s.ServiceAccountSigningKeyFile, pem.EncodeToMemory(&pem.Block{
		Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(saKey)}), 0o600); err != nil {
		return err
	}

	tok := make([]byte, 24)
	if _, err := rand.Read(tok); err != nil {
		return err
	}
	s.AdminToken = hex.EncodeToString(tok)
	return os.WriteFile(filepath.Join(s.Dir, "tokens.csv"),
		[]byte(s.AdminToken+`,admin,admin-uid,"system:masters"`+"\n"), 0o600)
}
