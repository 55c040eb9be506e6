package storm

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"path"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/klog/v2"
)

const (
	// storageProbeInterval is how often etcd's health is checked, the
	// rate the generic server's own etcd check allows itself.
	storageProbeInterval = time.Second
	// storageFailuresToClose is how many probes in a row must fail before
	// writes are refused: one slow answer is not an outage.
	storageFailuresToClose = 2
	// storageRetryAfterSeconds is the Retry-After of writes refused while
	// etcd is down. client-go's REST client retries a 503 with Retry-After
	// up to 10 times, so a recorder rides out an outage of this times 10
	// seconds without losing the Event; a 504 after the request timeout,
	// what it would get otherwise, makes it drop the Event at once.
	storageRetryAfterSeconds = 5
)

// storageGate remembers whether etcd answers. Without it a write during an
// outage waits for the request timeout (60s by default) in the etcd client
// and ends in 504, holding a mutating in-flight slot all that time.
type storageGate struct {
	// down holds the last probe error while etcd is considered down.
	down atomic.Pointer[error]
	// failures and answered belong to the probing goroutine.
	failures int
	answered bool
}

// unavailable is the error for a write while etcd is down, or nil.
func (g *storageGate) unavailable() error {
	cause := g.down.Load()
	if cause == nil {
		return nil
	}
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure,
		Code:   http.StatusServiceUnavailable,
		Reason: metav1.StatusReasonServiceUnavailable,
		Message: fmt.Sprintf("etcd is not answering (%v), Events cannot be written now, retry after %ds",
			*cause, storageRetryAfterSeconds),
		Details: &metav1.StatusDetails{RetryAfterSeconds: storageRetryAfterSeconds},
	}}
}

// run probes until ctx ends.
func (g *storageGate) run(ctx context.Context, check func() error, interval time.Duration) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		g.observe(check())
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// observe takes one probe's result. The gate opens at a successful probe and
// closes after storageFailuresToClose failed ones in a row; it never closes
// before etcd has answered once, so a slow start does not refuse writes (the
// server is not ready then anyway). Only run calls it.
func (g *storageGate) observe(err error) {
	switch {
	case err == nil:
		if g.down.Swap(nil) != nil {
			klog.InfoS("etcd answers again, accepting Event writes")
		}
		g.failures, g.answered = 0, true
	case g.answered:
		g.failures++
		if g.failures >= storageFailuresToClose && g.down.Swap(&err) == nil {
			klog.ErrorS(err, "etcd is not answering, refusing Event writes with 503 until it does")
		}
	}
}

// WatchStorage makes the plugin refuse writes quickly with 503 and
// Retry-After while etcd does not answer, until ctx ends. It probes as the
// server's /healthz etcd check does (a quorum read under the prefix), on a
// client of its own that redials within a second: the storage client backs
// off for up to two minutes between dials, and the gate must not stay
// closed longer than etcd is away.
func (p *Plugin) WatchStorage(ctx context.Context, config storagebackend.Config) error {
	client, err := newProbeClient(config.Transport)
	if err != nil {
		return err
	}
	key := path.Join("/", config.Prefix, "health")
	timeout := config.HealthcheckTimeout
	if timeout <= 0 {
		timeout = storagebackend.DefaultHealthcheckTimeout
	}
	check := func() error {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		_, err := client.Get(ctx, key)
		if err == nil || errors.Is(err, rpctypes.ErrPermissionDenied) {
			// Denied is an answer: etcd is up, as /healthz sees it.
			return nil
		}
		return err
	}
	go func() {
		defer func() { _ = client.Close() }()
		p.storage.run(ctx, check, storageProbeInterval)
	}()
	return nil
}

// newProbeClient dials etcd with the storage transport's endpoints and TLS
// files, and redials quickly after a loss.
func newProbeClient(c storagebackend.TransportConfig) (*clientv3.Client, error) {
	var tlsConfig *tls.Config
	if c.CertFile != "" || c.KeyFile != "" || c.TrustedCAFile != "" {
		var err error
		info := transport.TLSInfo{CertFile: c.CertFile, KeyFile: c.KeyFile, TrustedCAFile: c.TrustedCAFile}
		if tlsConfig, err = info.ClientConfig(); err != nil {
			return nil, err
		}
	}
	return clientv3.New(clientv3.Config{
		Endpoints:   c.ServerList,
		TLS:         tlsConfig,
		DialTimeout: storageProbeInterval,
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: storageProbeInterval},
			MinConnectTimeout: storageProbeInterval,
		})},
		// Failures are logged once, by the gate, not by every retry.
		Logger: zap.NewNop(),
	})
}
