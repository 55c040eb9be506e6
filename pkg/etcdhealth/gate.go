package etcdhealth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/klog/v2"

	"github.com/eventapiserver/event-apiserver/pkg/etcdclient"
)

const (
	// probeInterval is how often etcd's health is checked, the rate the
	// generic server's own etcd check allows itself.
	probeInterval = time.Second
	// failuresToClose is how many probes in a row must fail before requests
	// are refused: one slow answer is not an outage.
	failuresToClose = 2
	// RetryAfterSeconds is the Retry-After of requests refused while etcd is
	// down. client-go's REST client retries a 503 with Retry-After up to 10
	// times, so a recorder rides out an outage of about this times 10
	// seconds without losing the Event.
	RetryAfterSeconds = 5
)

// Gate knows whether etcd answers, and refuses at once what needs etcd while
// it does not. Without it a request during an outage waits for the request
// timeout (60 s by default) in the etcd client, whose reads retry until their
// context ends, and ends in a 504, holding an in-flight slot all that time.
type Gate struct {
	// open is the current open period: a context that ends, with a
	// downError as its cause, when the gate closes. A closed gate's is
	// ended; opening again starts a new one. Requests read it without a
	// lock; only the probe writes it.
	open atomic.Pointer[openPeriod]

	// nospace is whether etcd's NOSPACE alarm is raised, as the probe
	// last saw it.
	nospace atomic.Bool
	// watchSpace is whether to follow the NOSPACE alarm: only for the
	// etcd-space check, set once SpaceCheck is asked for.
	watchSpace atomic.Bool
	// answeredOnce is whether etcd has answered a probe since the start:
	// until then nothing says a write would succeed.
	answeredOnce atomic.Bool

	// The rest belongs to the probe, and to the size monitor.
	mu        sync.Mutex
	failures  int
	answered  bool
	client    *clientv3.Client
	endpoints []string
	// stores are the etcd3 stores the gate guards, probed as well: a
	// store's client redials with gRPC's backoff, up to two minutes apart,
	// and until it has, requests through it would wait, not fail fast.
	stores []storage.Interface
}

type openPeriod struct {
	ctx context.Context
	end context.CancelCauseFunc
}

func newOpenPeriod() *openPeriod {
	ctx, end := context.WithCancelCause(context.Background())
	return &openPeriod{ctx: ctx, end: end}
}

// downError is why the gate closed: the probe's last error.
type downError struct{ probe error }

func (e downError) Error() string {
	return fmt.Sprintf("etcd is not answering (health probe: %v)", e.probe)
}

// NewGate returns an open gate; Run starts probing.
func NewGate() *Gate {
	registerMetrics()
	g := &Gate{}
	g.open.Store(newOpenPeriod())
	return g
}

// Unavailable is the error for a request that needs etcd while etcd is down,
// or nil.
func (g *Gate) Unavailable() error {
	return closedError(g.open.Load().ctx)
}

// closedError is the 503 for a request refused in a closed period, or nil
// while the period is open.
func closedError(period context.Context) error {
	var down downError
	if !errors.As(context.Cause(period), &down) {
		return nil
	}
	return unavailableError(down.Error())
}

// unavailableError is a 503 with Retry-After: the client should come back,
// and reads that tolerate stale data can be served now from the cache.
func unavailableError(why string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure,
		Code:   http.StatusServiceUnavailable,
		Reason: metav1.StatusReasonServiceUnavailable,
		Message: fmt.Sprintf("%s: this request needs etcd, retry after %ds; lists and watches with "+
			"resourceVersion=0, and watches already open, are served from the watch cache meanwhile",
			why, RetryAfterSeconds),
		Details: &metav1.StatusDetails{RetryAfterSeconds: RetryAfterSeconds},
	}}
}

// whileOpen returns ctx, ended also when the gate closes, so that a request
// waiting on etcd ends with the outage, or the 503 if the gate is closed
// already; stop releases ctx.
func (g *Gate) whileOpen(ctx context.Context) (context.Context, func(), error) {
	period := g.open.Load().ctx
	if err := closedError(period); err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	// AfterFunc on a cancelable context registers a callback, no goroutine:
	// cheap enough for every call that reaches etcd.
	stop := context.AfterFunc(period, func() { cancel(context.Cause(period)) })
	return ctx, func() {
		stop()
		cancel(context.Canceled)
	}, nil
}

// run probes until ctx ends.
func (g *Gate) run(ctx context.Context, check func() error, interval time.Duration) {
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
// closes after failuresToClose failed ones in a row; it never closes before
// etcd has answered once, so a slow start refuses nothing (the server is not
// ready then anyway). Only run calls it.
func (g *Gate) observe(err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	period := g.open.Load()
	closed := period.ctx.Err() != nil
	switch {
	case err == nil:
		if closed {
			klog.InfoS("etcd answers again, serving requests that need it")
			g.open.Store(newOpenPeriod())
		}
		if closed || !g.answered {
			availableGauge.Set(1)
		}
		g.failures, g.answered = 0, true
		g.answeredOnce.Store(true)
	case g.answered:
		g.failures++
		if g.failures >= failuresToClose && !closed {
			klog.ErrorS(err, "etcd is not answering, refusing requests that need it with 503 until it does")
			period.end(downError{probe: err})
			availableGauge.Set(0)
		}
	}
	g.setWritesGauge()
}

// Run makes the gate follow etcd's health until ctx ends. It probes as the
// server's /healthz etcd check does (a quorum read under the prefix), on a
// client of its own that redials within a second, so that an outage is seen
// whatever the stores are doing; and it asks each guarded store for the
// current revision, so that the gate opens only once the stores' own
// clients are back.
func (g *Gate) Run(ctx context.Context, config storagebackend.Config) error {
	client, err := newProbeClient(config.Transport)
	if err != nil {
		return err
	}
	g.mu.Lock()
	g.client, g.endpoints = client, config.Transport.ServerList
	g.mu.Unlock()
	key := path.Join("/", config.Prefix, "health")
	timeout := config.HealthcheckTimeout
	if timeout <= 0 {
		timeout = storagebackend.DefaultHealthcheckTimeout
	}
	check := func() error {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		_, err := client.Get(ctx, key)
		if err != nil && !errors.Is(err, rpctypes.ErrPermissionDenied) {
			// Denied is an answer: etcd is up, as /healthz sees it.
			return err
		}
		g.mu.Lock()
		stores := g.stores
		g.mu.Unlock()
		for _, s := range stores {
			if _, err := s.GetCurrentResourceVersion(ctx); err != nil {
				return fmt.Errorf("the storage's etcd client: %w", err)
			}
		}
		return nil
	}
	go func() {
		defer func() { _ = client.Close() }()
		g.run(ctx, func() error {
			err := check()
			if err == nil && g.watchSpace.Load() {
				// Not part of the health answer: a slow alarm list is no outage.
				ctx, cancel := context.WithTimeout(ctx, timeout)
				defer cancel()
				g.observeSpace(ctx, client)
			}
			return err
		}, probeInterval)
	}()
	return nil
}

// newProbeClient dials etcd as the storage does, but gives up a dial
// within a probe interval and redials quickly after a loss, so that the
// gate follows etcd's state within a probe or two.
func newProbeClient(c storagebackend.TransportConfig) (*clientv3.Client, error) {
	return etcdclient.New(c, etcdclient.WithDialTimeout(probeInterval),
		etcdclient.WithDialOptions(grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: probeInterval},
			MinConnectTimeout: probeInterval,
		})))
}

// noSpaceAdvice is what an operator of an external etcd must do once it is
// full: etcd does not take writes again by itself.
const noSpaceAdvice = "etcd's NOSPACE alarm is raised (database over --quota-backend-bytes): Event writes are " +
	"refused with 503. Once Events have expired, compact (etcdctl compact <current revision>), defragment " +
	"(etcdctl defrag) and disarm (etcdctl alarm disarm); raise --quota-backend-bytes or lower the byte " +
	"budgets (--event-rate-limit-global-bytes-qps) if it recurs"

// observeSpace follows etcd's NOSPACE alarm, logging when it is raised and
// cleared. An etcd that does not let us list alarms (auth) is taken as
// without alarm: writes then still answer 503 when refused.
func (g *Gate) observeSpace(ctx context.Context, client *clientv3.Client) {
	alarms, err := client.AlarmList(ctx)
	if err != nil {
		return
	}
	raised := false
	for _, a := range alarms.Alarms {
		raised = raised || a.Alarm == etcdserverpb.AlarmType_NOSPACE
	}
	switch was := g.nospace.Swap(raised); {
	case raised && !was:
		klog.ErrorS(nil, noSpaceAdvice, "endpoints", client.Endpoints())
	case !raised && was:
		klog.InfoS("etcd's NOSPACE alarm is cleared, Event writes accepted again")
	}
	g.setWritesGauge()
}

// WritesCheckName is the /readyz check that says whether this replica can
// serve what needs etcd: writes, GETs and consistent LISTs.
const WritesCheckName = "etcd-writes"

// ReadinessGroup is the group of every /readyz check about etcd
// (k8s.io/apiserver's own "etcd-readiness" and "etcd-override-readiness-N"
// are in it too), so that a probe excludes them all with one
// ?exclude=etcd-readiness, as ?exclude=etcd excludes the "etcd" check and
// kube-apiserver's "etcd-override-N".
const ReadinessGroup = "etcd-readiness"

// writesError is why writes cannot be served now, or nil.
func (g *Gate) writesError() error {
	switch {
	case !g.answeredOnce.Load():
		return errors.New("etcd has not answered since the server started")
	case g.nospace.Load():
		return errors.New(noSpaceAdvice)
	}
	return g.Unavailable()
}

func (g *Gate) setWritesGauge() {
	if g.writesError() == nil {
		writesAvailableGauge.Set(1)
	} else {
		writesAvailableGauge.Set(0)
	}
}

// WritesCheck is the /readyz check "etcd-writes" (also served alone at
// /readyz/etcd-writes, and as the gauge event_apiserver_etcd_writes_available):
// it fails while what needs etcd is refused with 503, i.e. while the gate is
// closed, before etcd first answers, and while the NOSPACE alarm is raised.
// It is in the group "etcd-readiness": a readiness probe that excludes that
// group keeps a replica in its Service through an etcd outage, where it still
// serves lists and watches at resourceVersion=0 from the watch cache, open
// watches, and history.
func (g *Gate) WritesCheck() healthz.HealthChecker {
	return healthz.NamedGroupedCheck(WritesCheckName, ReadinessGroup, func(*http.Request) error {
		return g.writesError()
	})
}

// SpaceCheck is the /readyz check "etcd-space": it fails while etcd's
// NOSPACE alarm is raised, saying what the operator must do. For an
// external etcd only: the server clears an embedded etcd's alarm itself.
// In the group "etcd-readiness", as WritesCheck.
func (g *Gate) SpaceCheck() healthz.HealthChecker {
	g.watchSpace.Store(true)
	return healthz.NamedGroupedCheck("etcd-space", ReadinessGroup, func(*http.Request) error {
		if g.nospace.Load() {
			return errors.New(noSpaceAdvice)
		}
		return nil
	})
}
