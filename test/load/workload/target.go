package workload

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/eventapiserver/event-apiserver/internal/testbed"
)

// EventTTL is the servers' --event-ttl in a benchmark (kube-apiserver's
// default), and the lease of the Events written straight to etcd.
const EventTTL = time.Hour

// Content types a client can speak.
const (
	Protobuf = "protobuf"
	JSON     = "json"
)

// Target is the API server under load.
type Target struct {
	// Config is an admin client configuration.
	Config *rest.Config
	// ServerPID and EtcdPID, when known (non-zero), let workloads read
	// CPU time and memory from /proc.
	ServerPID, EtcdPID int
	// NeedsNamespaces is set for kube-apiserver, whose NamespaceLifecycle
	// admission refuses creates in a namespace that does not exist.
	// event-apiserver standalone has no Namespaces.
	NeedsNamespaces bool
	// SetSelectors is set for event-apiserver, which reads set-based field
	// selectors (`in`, `notin`); kube-apiserver refuses them.
	SetSelectors bool
}

// requests counts a client's writes (POST, PATCH) and their answers.
type requests struct {
	posts, patches, ok, failed, notFound atomic.Int64
}

type countingTransport struct {
	rt http.RoundTripper
	c  *requests
}

// RoundTrip counts a request once its answer has been read: a response
// whose headers have arrived may still lose its body to a cancelled
// context, and a recorder would then retry it.
func (t countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	switch req.Method {
	case http.MethodPost:
		t.c.posts.Add(1)
	case http.MethodPatch:
		t.c.patches.Add(1)
	default:
		return t.rt.RoundTrip(req) // only writes count
	}
	resp, err := t.rt.RoundTrip(req)
	if err != nil {
		t.c.failed.Add(1)
		return resp, err
	}
	status := resp.StatusCode
	resp.Body = &countOnClose{ReadCloser: resp.Body, count: func() {
		switch {
		case status < 300:
			t.c.ok.Add(1)
		case status == http.StatusNotFound:
			t.c.notFound.Add(1)
		default:
			t.c.failed.Add(1)
		}
	}}
	return resp, nil
}

// countOnClose calls count once, when the body is closed.
type countOnClose struct {
	io.ReadCloser
	once  sync.Once
	count func()
}

func (c *countOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.once.Do(c.count)
	return err
}

// client returns a clientset with its own connection (not shared with
// other clients, as separate kubelets or controllers would have), no
// client-side rate limit, speaking contentType, and the counter of its
// responses.
func (t Target) client(contentType string) (*kubernetes.Clientset, *requests, error) {
	return t.clientWithTimeout(contentType, requestTimeout)
}

// requestTimeout bounds every request of a client but a watcher's.
const requestTimeout = 2 * time.Minute

// clientWithTimeout is client with another bound on requests; 0 for
// watchers, which run as long as their context.
func (t Target) clientWithTimeout(contentType string, timeout time.Duration) (*kubernetes.Clientset, *requests, error) {
	c := rest.CopyConfig(t.Config)
	c.QPS, c.Burst = -1, 0 // negative QPS: no client-side rate limiter
	c.Timeout = timeout
	switch contentType {
	case Protobuf:
		c.ContentType = "application/vnd.kubernetes.protobuf"
		c.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	case JSON, "":
		c.ContentType = "application/json"
		c.AcceptContentTypes = "application/json"
	default:
		return nil, nil, fmt.Errorf("unknown content type %q (want %s or %s)", contentType, Protobuf, JSON)
	}
	// A Dial function keeps client-go from sharing one cached transport
	// (and so one HTTP/2 connection) between clients.
	dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	c.Dial = dialer.DialContext
	counter := &requests{}
	c.Wrap(func(rt http.RoundTripper) http.RoundTripper { return countingTransport{rt: rt, c: counter} })
	cs, err := kubernetes.NewForConfig(c)
	if err != nil {
		return nil, nil, err
	}
	// Open the connection now: requests sent at once on a client without
	// one each dial and shake hands, a storm no long-running client sees.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cs.Discovery().RESTClient().Get().AbsPath("/version").Do(ctx).Error(); err != nil {
		return nil, nil, fmt.Errorf("GET /version: %w", err)
	}
	return cs, counter, nil
}

// EnsureNamespaces creates the namespaces when the target needs them.
func (t Target) EnsureNamespaces(ctx context.Context, names ...string) error {
	if !t.NeedsNamespaces {
		return nil
	}
	cs, _, err := t.client(Protobuf)
	if err != nil {
		return err
	}
	for _, name := range names {
		_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating namespace %s: %w", name, err)
		}
	}
	return nil
}

// cpuMeter reads the CPU time the server and etcd used between two points.
type cpuMeter struct {
	server, etcd processCPU
}

// processCPU is one process's CPU time since a start: pid 0 is unknown, and
// measured says whether the start could be read.
type processCPU struct {
	pid      int
	start    time.Duration
	measured bool
}

func (t Target) startCPU() *cpuMeter {
	return &cpuMeter{server: startProcessCPU(t.ServerPID), etcd: startProcessCPU(t.EtcdPID)}
}

func startProcessCPU(pid int) processCPU {
	if pid == 0 {
		return processCPU{}
	}
	d, err := testbed.CPUTime(pid)
	return processCPU{pid: pid, start: d, measured: err == nil}
}

// used is the CPU time since the start, and whether it could be measured.
func (p processCPU) used() (time.Duration, bool) {
	if !p.measured {
		return 0, false
	}
	d, err := testbed.CPUTime(p.pid)
	if err != nil {
		return 0, false
	}
	return d - p.start, true
}

// used is the CPU time the server and etcd used since startCPU (either
// alone when the other is unknown), and whether any could be measured.
func (m *cpuMeter) used() (time.Duration, bool) {
	s, sok := m.server.used()
	e, eok := m.etcd.used()
	return s + e, sok || eok
}

// serverUsed and etcdUsed are the parts of used.
func (m *cpuMeter) serverUsed() (time.Duration, bool) { return m.server.used() }
func (m *cpuMeter) etcdUsed() (time.Duration, bool)   { return m.etcd.used() }
