package framework

// Helpers that run the reference kube-apiserver v1.36.3 (_output/bin/
// kube-apiserver, built by hack/build-kube.sh) as a separate process on
// loopback: for the compatibility tests (same requests to both servers on the
// same etcd) and the aggregation tests (our server behind kube-apiserver).

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/eventapiserver/event-apiserver/internal/proc"
)

const (
	// KubeVersion is the version of the reference kube-apiserver and kubectl.
	KubeVersion = "v1.36.3"

	// DefaultKubeAPIServerStartTimeout bounds the wait for /readyz.
	DefaultKubeAPIServerStartTimeout = 2 * time.Minute

	// FrontProxyClientName is the CN of the front-proxy client certificate
	// kube-apiserver presents to aggregated servers, and the only name in
	// --requestheader-allowed-names.
	FrontProxyClientName = "front-proxy-client"

	// KubeServiceAccountIssuer is --service-account-issuer.
	KubeServiceAccountIssuer = "https://kubernetes.default.svc.cluster.local"

	kubeAPIServerMissing = "kube-apiserver " + KubeVersion + " not built: run hack/build-kube.sh"
	kubectlMissing       = "kubectl " + KubeVersion + " not built: run hack/build-kube.sh"
)

// KubeAPIServerOptions configures StartKubeAPIServer.
type KubeAPIServerOptions struct {
	// EtcdServers is --etcd-servers (comma-separated URLs). Empty: a fresh
	// single-member etcd is started for this server (see KubeAPIServer.Etcd).
	EtcdServers string
	// EtcdServersOverrides is --etcd-servers-overrides, e.g.
	// "/events#http://127.0.0.1:2379" to keep core/v1 Events in another etcd.
	EtcdServersOverrides string
	// AuthorizationMode is --authorization-mode; default "RBAC"
	// (e.g. "Node,RBAC").
	AuthorizationMode string
	// ExtraFlags are appended after the framework's flags; for single-valued
	// flags the last occurrence wins, so they can override defaults
	// (e.g. "--runtime-config=events.k8s.io/v1=false", "--event-ttl=5m").
	ExtraFlags []string
	// StartTimeout bounds the wait for /readyz on start and restart;
	// default DefaultKubeAPIServerStartTimeout.
	StartTimeout time.Duration
	// HostsFile, when set, replaces /etc/hosts for kube-apiserver alone (a
	// private mount namespace; needs root), so that it resolves the names
	// a test gives pods (see WriteHostsFile).
	HostsFile string
}

// KubeAPIServer is a running kube-apiserver. Its port, certificates, keys and
// flags stay the same across Stop/Kill and Restart. Methods are safe to call
// from any goroutine; a failing method reports with t.Errorf (never t.Fatal)
// and returns the error.
type KubeAPIServer struct {
	// URL is https://127.0.0.1:<port>.
	URL string
	// Port is the --secure-port.
	Port int
	// AdminToken is a static bearer token (--token-auth-file) for user
	// "admin" in group system:masters.
	AdminToken string
	// KubeconfigPath is a kubeconfig (server URL, serving CA, admin token)
	// for kubectl and for delegated authentication/authorization
	// (--authentication-kubeconfig, --authorization-kubeconfig).
	KubeconfigPath string
	// Dir is the server's directory under t.TempDir() (certificates, keys,
	// token file, kubeconfig, log).
	Dir string
	// CertDir is --cert-dir.
	CertDir string

	// CAFile and CAData: the CA that signed the serving certificate
	// (SANs localhost, 127.0.0.1, ::1, kubernetes.default.svc...).
	CAFile string
	CAData []byte
	// ServingCertFile and ServingKeyFile are --tls-cert-file and
	// --tls-private-key-file.
	ServingCertFile, ServingKeyFile string

	// ClientCAFile is --client-ca-file; AdminClientCertFile/KeyFile is a
	// client certificate it signed for CN=admin, O=system:masters.
	ClientCAFile                            string
	AdminClientCertFile, AdminClientKeyFile string

	// FrontProxyCAFile is --requestheader-client-ca-file (kube-apiserver also
	// publishes it in kube-system/extension-apiserver-authentication);
	// FrontProxyClientCertFile/KeyFile (CN=front-proxy-client) are
	// --proxy-client-cert-file/--proxy-client-key-file, presented to
	// aggregated API servers.
	FrontProxyCAFile                                  string
	FrontProxyClientCertFile, FrontProxyClientKeyFile string

	// ServiceAccountKeyFile (public) and ServiceAccountSigningKeyFile
	// (private, RSA 2048) with issuer KubeServiceAccountIssuer.
	ServiceAccountKeyFile, ServiceAccountSigningKeyFile string

	// EtcdServers is the --etcd-servers value in use.
	EtcdServers string
	// Etcd is the etcd started for this server when
	// KubeAPIServerOptions.EtcdServers was empty; nil otherwise.
	Etcd *Etcd

	// Args are the command-line flags kube-apiserver runs with.
	Args []string

	t            testing.TB
	config       *rest.Config
	startTimeout time.Duration
	proc         *proc.Process
}

// RestConfig returns a copy of a rest.Config for the admin user (bearer
// token, serving CA; QPS 100, burst 200).
func (s *KubeAPIServer) RestConfig() *rest.Config { return rest.CopyConfig(s.config) }

// Client returns a clientset for the admin user.
func (s *KubeAPIServer) Client(t testing.TB) *kubernetes.Clientset {
	t.Helper()
	c, err := kubernetes.NewForConfig(s.RestConfig())
	if err != nil {
		t.Fatalf("kube-apiserver client: %v", err)
	}
	return c
}

// LogPath is the file the process's output goes to (appended to across
// restarts).
func (s *KubeAPIServer) LogPath() string { return s.proc.LogPath }

// Running reports whether the process is alive.
func (s *KubeAPIServer) Running() bool { return s.proc.Running() }

// Stop sends SIGTERM and waits for exit (SIGKILL after 30s). No-op when
// stopped.
func (s *KubeAPIServer) Stop() error { return s.report("stop", s.proc.Stop()) }

// Kill sends SIGKILL and waits for exit. No-op when stopped.
func (s *KubeAPIServer) Kill() error { return s.report("kill", s.proc.Kill()) }

// Restart stops the server if it runs, starts it again with the same port,
// certificates and flags, and waits for /readyz.
func (s *KubeAPIServer) Restart() error {
	if err := s.proc.Stop(); err != nil {
		return s.report("restart", err)
	}
	if err := s.proc.Start(); err != nil {
		return s.report("restart", err)
	}
	return s.report("restart", s.WaitReady(s.startTimeout))
}

// WaitReady waits until GET /readyz answers 200 and the "default" namespace
// exists (the bootstrap controller creates it shortly after readiness).
func (s *KubeAPIServer) WaitReady(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	client, err := httpClientFor(s.config)
	if err != nil {
		return err
	}
	ready := func(path string) func() error {
		return func() error {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+path, nil)
			if err != nil {
				return err
			}
			resp, err := client.Do(req)
			if err != nil {
				return err
			}
			defer func() { _ = resp.Body.Close() }()
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<10))
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("GET %s: %d %s", path, resp.StatusCode, strings.TrimSpace(string(body)))
			}
			return nil
		}
	}
	if err := s.proc.Poll(ctx, 200*time.Millisecond, ready("/readyz?verbose")); err != nil {
		return fmt.Errorf("waiting for /readyz: %w", err)
	}
	if err := s.proc.Poll(ctx, 100*time.Millisecond, ready("/api/v1/namespaces/default")); err != nil {
		return fmt.Errorf("waiting for namespace default: %w", err)
	}
	return nil
}

func (s *KubeAPIServer) report(op string, err error) error {
	if err != nil {
		err = fmt.Errorf("kube-apiserver: %s: %w", op, err)
		s.t.Errorf("%v\n%s", err, s.proc.Tail(logTailLines))
	}
	return err
}

// StartKubeAPIServer runs kube-apiserver v1.36.3 on a free loopback port with
// generated certificates and keys, static admin token, RBAC and front-proxy
// (request header) settings, waits for /readyz, and stops it when the test
// ends. It skips the test when _output/bin/kube-apiserver has not been built.
func StartKubeAPIServer(t testing.TB, opts KubeAPIServerOptions) *KubeAPIServer {
	t.Helper()
	bin := kubeBinary(t, "kube-apiserver")
	if opts.AuthorizationMode == "" {
		opts.AuthorizationMode = "RBAC"
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = DefaultKubeAPIServerStartTimeout
	}
	s := &KubeAPIServer{t: t, startTimeout: opts.StartTimeout, EtcdServers: opts.EtcdServers}
	if s.EtcdServers == "" {
		s.Etcd = StartEtcd(t)
		s.EtcdServers = s.Etcd.ClientURL()
	}

	kubeSeq.Lock()
	kubeSeq.n++
	s.Dir = filepath.Join(t.TempDir(), fmt.Sprintf("kube-apiserver-%d", kubeSeq.n))
	kubeSeq.Unlock()
	s.CertDir = filepath.Join(s.Dir, "certs")
	if err := os.MkdirAll(s.CertDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := s.writeCredentials(); err != nil {
		t.Fatalf("kube-apiserver credentials: %v", err)
	}

	var lastErr error
	for attempt := 1; attempt <= 3; attempt++ {
		lastErr = s.tryStart(bin, opts, attempt)
		if lastErr == nil {
			return s
		}
		if !errors.Is(lastErr, errAddrInUse) {
			break
		}
		t.Logf("kube-apiserver: port taken, retrying on a new port: %v", lastErr)
	}
	t.Fatalf("starting kube-apiserver: %v", lastErr)
	return nil
}

var kubeSeq struct {
	sync.Mutex
	n int
}

func (s *KubeAPIServer) tryStart(bin string, opts KubeAPIServerOptions, attempt int) error {
	ports, err := proc.FreePorts(1)
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
	if err := s.writeKubeconfig(); err != nil {
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
		"--authorization-mode=" + opts.AuthorizationMode,
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
		"--profiling=false",
	}
	if opts.EtcdServersOverrides != "" {
		s.Args = append(s.Args, "--etcd-servers-overrides="+opts.EtcdServersOverrides)
	}
	s.Args = append(s.Args, opts.ExtraFlags...)

	logPath := filepath.Join(s.Dir, fmt.Sprintf("kube-apiserver-try%d.log", attempt))
	if opts.HostsFile != "" {
		s.proc = newChildProcess(s.t, "kube-apiserver", "unshare", append([]string{
			"--mount", "--propagation", "private", "sh", "-c", `mount --bind "$0" /etc/hosts && exec "$@"`,
			opts.HostsFile, bin}, s.Args...), logPath)
	} else {
		s.proc = newChildProcess(s.t, "kube-apiserver", bin, s.Args, logPath)
	}
	if err := s.proc.Start(); err != nil {
		return err
	}
	if err := s.WaitReady(s.startTimeout); err != nil {
		_ = s.proc.Kill()
		if s.proc.LogContains("address already in use") {
			return fmt.Errorf("%w: %v", errAddrInUse, err)
		}
		return fmt.Errorf("%v\n%s", err, s.proc.Tail(logTailLines))
	}
	return nil
}

// writeCredentials generates the CAs, certificates, keys and the token file.
func (s *KubeAPIServer) writeCredentials() error {
	d := s.CertDir
	// Serving.
	servingCA, err := newTestCA("kube-apiserver-serving-ca")
	if err != nil {
		return err
	}
	s.CAFile = filepath.Join(d, "serving-ca.crt")
	s.CAData = servingCA.certPEM
	s.ServingCertFile = filepath.Join(d, "serving.crt")
	s.ServingKeyFile = filepath.Join(d, "serving.key")
	if err := servingCA.issue(s.ServingCertFile, s.ServingKeyFile, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc.cluster.local"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.IPv6loopback, net.ParseIP("10.96.0.1")},
	}); err != nil {
		return err
	}
	// Client certificates.
	clientCA, err := newTestCA("kube-apiserver-client-ca")
	if err != nil {
		return err
	}
	s.ClientCAFile = filepath.Join(d, "client-ca.crt")
	s.AdminClientCertFile = filepath.Join(d, "admin.crt")
	s.AdminClientKeyFile = filepath.Join(d, "admin.key")
	if err := clientCA.issue(s.AdminClientCertFile, s.AdminClientKeyFile, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "admin", Organization: []string{"system:masters"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}); err != nil {
		return err
	}
	// Front proxy (aggregation).
	frontProxyCA, err := newTestCA("front-proxy-ca")
	if err != nil {
		return err
	}
	s.FrontProxyCAFile = filepath.Join(d, "front-proxy-ca.crt")
	s.FrontProxyClientCertFile = filepath.Join(d, "front-proxy-client.crt")
	s.FrontProxyClientKeyFile = filepath.Join(d, "front-proxy-client.key")
	if err := frontProxyCA.issue(s.FrontProxyClientCertFile, s.FrontProxyClientKeyFile, &x509.Certificate{
		Subject:     pkix.Name{CommonName: FrontProxyClientName},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}); err != nil {
		return err
	}
	for path, data := range map[string][]byte{
		s.CAFile:           servingCA.certPEM,
		s.ClientCAFile:     clientCA.certPEM,
		s.FrontProxyCAFile: frontProxyCA.certPEM,
	} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return err
		}
	}
	// Service account keys.
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
	if err := writePEM(s.ServiceAccountKeyFile, "PUBLIC KEY", pub); err != nil {
		return err
	}
	if err := writePEM(s.ServiceAccountSigningKeyFile, "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(saKey)); err != nil {
		return err
	}
	// Static admin token.
	tok := make([]byte, 24)
	if _, err := rand.Read(tok); err != nil {
		return err
	}
	s.AdminToken = hex.EncodeToString(tok)
	return os.WriteFile(filepath.Join(s.Dir, "tokens.csv"),
		[]byte(s.AdminToken+`,admin,admin-uid,"system:masters"`+"\n"), 0o600)
}

func (s *KubeAPIServer) writeKubeconfig() error {
	s.KubeconfigPath = filepath.Join(s.Dir, "kubeconfig")
	kubeconfig := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: kube-apiserver
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: admin
  user:
    token: %s
contexts:
- name: admin
  context:
    cluster: kube-apiserver
    user: admin
current-context: admin
`, s.URL, base64.StdEncoding.EncodeToString(s.CAData), s.AdminToken)
	return os.WriteFile(s.KubeconfigPath, []byte(kubeconfig), 0o600)
}

// KubectlBinary returns the path of _output/bin/kubectl v1.36.3, skipping the
// test when it has not been built.
func KubectlBinary(t testing.TB) string {
	t.Helper()
	return kubeBinary(t, "kubectl")
}

var kubeBinaries struct {
	sync.Mutex
	checked map[string]error // name -> version check result
}

// kubeBinary returns _output/bin/<name>, skipping the test when it is missing
// and failing it when it does not report KubeVersion (a stale build).
func kubeBinary(t testing.TB, name string) string {
	t.Helper()
	path, err := outputBinary(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		if name == "kubectl" {
			t.Skip(kubectlMissing)
		}
		t.Skip(kubeAPIServerMissing)
	}
	kubeBinaries.Lock()
	defer kubeBinaries.Unlock()
	if kubeBinaries.checked == nil {
		kubeBinaries.checked = map[string]error{}
	}
	verr, done := kubeBinaries.checked[name]
	if !done {
		verr = checkKubeBinaryVersion(name, path)
		kubeBinaries.checked[name] = verr
	}
	if verr != nil {
		t.Fatalf("%v: run hack/build-kube.sh", verr)
	}
	return path
}

func checkKubeBinaryVersion(name, path string) error {
	var cmd *exec.Cmd
	var want string
	if name == "kubectl" {
		cmd, want = exec.Command(path, "version", "--client"), "Client Version: "+KubeVersion
	} else {
		cmd, want = exec.Command(path, "--version"), "Kubernetes "+KubeVersion
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %v: %s", strings.Join(cmd.Args, " "), err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.TrimSpace(line) == want {
			return nil
		}
	}
	return fmt.Errorf("%s reports %q, want %q", strings.Join(cmd.Args, " "), strings.TrimSpace(string(out)), want)
}

// httpClientFor is a plain HTTP client with the rest.Config's TLS settings
// and credentials.
func httpClientFor(config *rest.Config) (*http.Client, error) {
	rt, err := rest.TransportFor(config)
	if err != nil {
		return nil, err
	}
	return &http.Client{Transport: rt, Timeout: 5 * time.Second}, nil
}

// ---------------------------------------------------------------------------
// Test PKI.

type testCA struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
}

func newTestCA(cn string) (*testCA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          randomSerial(),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &testCA{cert: cert, key: key, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// issue signs a leaf certificate from tmpl (subject, SANs, ExtKeyUsage) with
// a new P-256 key and writes the certificate and key as PEM.
func (ca *testCA) issue(certFile, keyFile string, tmpl *x509.Certificate) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl.SerialNumber = randomSerial()
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(10 * 365 * 24 * time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment
	tmpl.BasicConstraintsValid = true
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	if err := writePEM(certFile, "CERTIFICATE", der); err != nil {
		return err
	}
	return writePEM(keyFile, "PRIVATE KEY", keyDER)
}

func randomSerial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err)
	}
	return n
}

func writePEM(path, blockType string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: blockType, Bytes: der}), 0o600)
}
