package framework

// Test wrappers over internal/testbed's kube-apiserver v1.36.3
// (_output/bin/kube-apiserver, built by hack/build-kube.sh): for the
// compatibility tests (same requests to both servers on the same etcd) and
// the aggregation tests (our server behind kube-apiserver).

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/eventapiserver/event-apiserver/internal/testbed"
)

const (
	// KubeVersion is the version of the reference kube-apiserver and kubectl.
	KubeVersion = testbed.KubeVersion

	// DefaultKubeAPIServerStartTimeout bounds the wait for /readyz.
	DefaultKubeAPIServerStartTimeout = testbed.DefaultKubeAPIServerStartTimeout

	// FrontProxyClientName is the CN of the front-proxy client certificate
	// kube-apiserver presents to aggregated servers.
	FrontProxyClientName = testbed.FrontProxyClientName

	// KubeServiceAccountIssuer is --service-account-issuer.
	KubeServiceAccountIssuer = testbed.KubeServiceAccountIssuer
)

// KubeAPIServerOptions configures StartKubeAPIServer. Binary and Dir are
// filled in by the framework; an empty EtcdServers starts a fresh
// single-member etcd for this server (see KubeAPIServer.Etcd).
type KubeAPIServerOptions = testbed.KubeAPIServerOptions

// KubeAPIServer is a running kube-apiserver (testbed.KubeAPIServer: URL,
// certificates, keys, RestConfig...). Methods are safe to call from any
// goroutine; a failing method reports with t.Errorf (never t.Fatal) and
// returns the error.
type KubeAPIServer struct {
	*testbed.KubeAPIServer
	// Etcd is the etcd started for this server when
	// KubeAPIServerOptions.EtcdServers was empty; nil otherwise.
	Etcd *Etcd

	t testing.TB
}

// Client returns a clientset for the admin user.
func (s *KubeAPIServer) Client(t testing.TB) *kubernetes.Clientset {
	t.Helper()
	c, err := kubernetes.NewForConfig(s.RestConfig())
	if err != nil {
		t.Fatalf("kube-apiserver client: %v", err)
	}
	return c
}

// Stop sends SIGTERM and waits for exit (SIGKILL after 30s). No-op when
// stopped.
func (s *KubeAPIServer) Stop() error { return s.report("stop", s.Process().Stop()) }

// Kill sends SIGKILL and waits for exit. No-op when stopped.
func (s *KubeAPIServer) Kill() error { return s.report("kill", s.Process().Kill()) }

// Restart stops the server if it runs, starts it again with the same port,
// certificates and flags, and waits for /readyz.
func (s *KubeAPIServer) Restart() error {
	return s.report("restart", s.KubeAPIServer.Restart(context.Background()))
}

func (s *KubeAPIServer) report(op string, err error) error {
	if err != nil {
		err = fmt.Errorf("kube-apiserver: %s: %w", op, err)
		s.t.Errorf("%s", withLogTail(err, s.Process()))
	}
	return err
}

var kubeSeq struct {
	sync.Mutex
	n int
}

// StartKubeAPIServer runs kube-apiserver v1.36.3 on a free loopback port with
// generated certificates and keys, static admin token, RBAC and front-proxy
// (request header) settings, waits for /readyz, and stops it when the test
// ends. It skips the test when _output/bin/kube-apiserver has not been built.
func StartKubeAPIServer(t testing.TB, opts KubeAPIServerOptions) *KubeAPIServer {
	t.Helper()
	opts.Binary = kubeBinary(t, "kube-apiserver")
	s := &KubeAPIServer{t: t}
	if opts.EtcdServers == "" {
		s.Etcd = StartEtcd(t)
		opts.EtcdServers = s.Etcd.ClientURL()
	}
	kubeSeq.Lock()
	kubeSeq.n++
	opts.Dir = filepath.Join(t.TempDir(), fmt.Sprintf("kube-apiserver-%d", kubeSeq.n))
	kubeSeq.Unlock()
	var err error
	if s.KubeAPIServer, err = testbed.StartKubeAPIServer(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	stopAtCleanup(t, s.Process())
	return s
}

// WaitReady waits until GET /readyz answers 200 and the "default" namespace
// exists (the bootstrap controller creates it shortly after readiness).
func (s *KubeAPIServer) WaitReady(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return s.KubeAPIServer.WaitReady(ctx)
}

// KubectlBinary returns the path of _output/bin/kubectl v1.36.3, skipping the
// test when it has not been built.
func KubectlBinary(t testing.TB) string {
	t.Helper()
	return kubeBinary(t, "kubectl")
}

// KubeSchedulerBinary returns the path of _output/bin/kube-scheduler v1.36.3,
// skipping the test when it has not been built.
func KubeSchedulerBinary(t testing.TB) string {
	t.Helper()
	return kubeBinary(t, "kube-scheduler")
}

// kubeBinary returns _output/bin/<name>, skipping the test when it is missing
// and failing it when it does not report KubeVersion (a stale build).
func kubeBinary(t testing.TB, name string) string {
	t.Helper()
	path, err := testbed.KubeBinary(name)
	if errors.Is(err, testbed.ErrNotBuilt) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return path
}
