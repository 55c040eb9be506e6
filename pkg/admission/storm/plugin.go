package storm

import (
	"context"
	"fmt"
	"math"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/eventapiserver/event-apiserver/pkg/apis/core"
)

// eventResources are the two faces of the one Event store.
var eventResources = map[schema.GroupResource]bool{
	{Group: "", Resource: "events"}:              true,
	{Group: "events.k8s.io", Resource: "events"}: true,
}

// Plugin is a validating admission plugin for Event creates and updates.
type Plugin struct {
	*admission.Handler
	limiter       *limiter
	classes       *classes
	maxEventBytes int64
}

var _ admission.ValidationInterface = &Plugin{}

// Config is what a Plugin enforces; Options builds it from flags.
type Config struct {
	// Create and Update are each reporter's budgets.
	Create, Update Limit
	// Global is the budget of all Event writes together.
	Global Limit
	// ReporterBytes and GlobalBytes are budgets of bytes written (stored
	// size), per reporter and all together.
	ReporterBytes, GlobalBytes Limit
	// User is each authenticated user's budget of writes, all its
	// reporters together.
	User Limit
	// MaxReporters bounds the reporters remembered at once.
	MaxReporters int
	// MaxEventBytes bounds an Event's stored size; zero or less: no bound.
	MaxEventBytes int64
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// New returns the plugin with its limits, as the admission chain gets it
// from Register and an Initializer. It registers its metrics with the legacy
// registry served on /metrics.
func New(c Config) *Plugin {
	p := newUnconfigured()
	p.configure(c)
	return p
}

// newUnconfigured is the plugin before an Initializer gives it its limits.
func newUnconfigured() *Plugin {
	return &Plugin{Handler: admission.NewHandler(admission.Create, admission.Update)}
}

func (p *Plugin) configure(c Config) {
	registerMetrics()
	now := c.Now
	if now == nil {
		now = time.Now
	}
	p.limiter = newLimiter(limiterConfig{
		Reporter:      [numOperations]Limit{opCreate: c.Create, opUpdate: c.Update},
		Global:        c.Global,
		ReporterBytes: c.ReporterBytes,
		GlobalBytes:   c.GlobalBytes,
		User:          c.User,
		MaxReporters:  c.MaxReporters,
	}, now)
	current.Store(p.limiter)
	p.classes = newClasses(now, forgetClass)
	p.maxEventBytes = c.MaxEventBytes
}

var _ admission.MutationInterface = &Plugin{}

// event is the Event a write of the plugin's concern carries, and its
// operation.
func eventOf(a admission.Attributes) (*core.Event, operation, bool) {
	if !eventResources[a.GetResource().GroupResource()] || a.GetSubresource() != "" {
		return nil, 0, false
	}
	event, ok := a.GetObject().(*core.Event)
	if !ok {
		return nil, 0, false
	}
	if a.GetOperation() == admission.Update {
		return event, opUpdate, true
	}
	return event, opCreate, true
}

// Admit runs first in the admission chain, in its mutating phase, so that
// a throttled write is refused before any webhook is called: a storm must
// not become a storm of webhook calls. It spends the reporter's and the
// global tokens for the write, or refuses it with 429 and Retry-After. The
// decision is taken once per request (see WithChargeMemo): an update
// retried on a conflict runs admission again, and is not charged again.
// An oversize Event is not charged: Validate refuses it, after the
// strategy's validation, so that an Event kube-apiserver finds invalid
// gets kube-apiserver's 422 first, and the size it reports is that of
// the Event as it would be stored. Dry runs never reach etcd, so they are
// not charged either.
func (p *Plugin) Admit(ctx context.Context, a admission.Attributes, o admission.ObjectInterfaces) error {
	event, op, ok := eventOf(a)
	if !ok || a.IsDryRun() || reinvoked(a) {
		return nil
	}
	size, err := storedSize(event)
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	if p.maxEventBytes > 0 && int64(size) > p.maxEventBytes {
		return nil
	}
	memo, _ := ctx.Value(memoKey{}).(*chargeMemo)
	if memo == nil {
		return p.charge(event, op, size, a)
	}
	memo.mu.Lock()
	defer memo.mu.Unlock()
	if !memo.decided {
		memo.err, memo.decided = p.charge(event, op, size, a), true
	}
	return memo.err
}

// reinvoked reports whether this is the admission chain's second mutating
// pass, which runs every in-tree plugin again when a mutating webhook with
// reinvocationPolicy IfNeeded changed the object: the write was charged in
// the first pass, and a refusal would have ended the chain there.
func reinvoked(a admission.Attributes) bool {
	rc := a.GetReinvocationContext()
	return rc != nil && rc.IsReinvoke()
}

// Validate refuses an Event bigger than the limit with 413. It runs in the
// validating phase, after the strategy's validation and the mutating
// webhooks, which may have grown the Event.
func (p *Plugin) Validate(ctx context.Context, a admission.Attributes, o admission.ObjectInterfaces) error {
	event, op, ok := eventOf(a)
	if !ok {
		return nil
	}
	if _, err := checkSize(event, p.maxEventBytes); err != nil {
		oversizeTotal.WithLabelValues(op.String()).Inc()
		return err
	}
	return nil
}

// charge spends the write's tokens, or says why not.
func (p *Plugin) charge(event *core.Event, op operation, size int, a admission.Attributes) error {
	r := reporterOf(event, a.GetUserInfo())
	return p.answer(p.limiter.allow(r.userKey, r.key, op, size), r, op, a.GetUserInfo())
}

// answer counts the limiter's verdict for the write of op by r and turns a
// refusal into the 429 the writer gets.
func (p *Plugin) answer(v verdict, r reporter, op operation, who user.Info) error {
	class := p.classes.of(r.controller)
	if v.allowed {
		acceptedTotal.WithLabelValues(op.String(), class).Inc()
		return nil
	}
	userName := ""
	if who != nil {
		userName = who.GetName()
	}
	seconds := retryAfterSeconds(v.retryAfter)
	switch {
	case v.user:
		throttledTotal.WithLabelValues(op.String(), class, "user").Inc()
		return apierrors.NewTooManyRequests(fmt.Sprintf(
			"user %q is over its budget of %g Event writes a second (burst %d), whatever the reporter, retry after %ds",
			userName, p.limiter.config.User.QPS, p.limiter.config.User.Burst, seconds), seconds)
	case v.global && v.bytes:
		throttledTotal.WithLabelValues(op.String(), class, "global_bytes").Inc()
		return apierrors.NewTooManyRequests(fmt.Sprintf(
			"Event writes are over the server's budget of %g bytes a second, retry after %ds",
			p.limiter.config.GlobalBytes.QPS, seconds), seconds)
	case v.bytes:
		throttledTotal.WithLabelValues(op.String(), class, "reporter_bytes").Inc()
		limit := p.limiter.config.ReporterBytes
		return apierrors.NewTooManyRequests(fmt.Sprintf(
			"reporter %q is over its budget of %g bytes of Events a second (burst %d), retry after %ds",
			r, limit.QPS, limit.Burst, seconds), seconds)
	case v.global:
		throttledTotal.WithLabelValues(op.String(), class, "global").Inc()
		return apierrors.NewTooManyRequests(fmt.Sprintf(
			"Event writes are over the server's budget of %g a second, retry after %ds",
			p.limiter.config.Global.QPS, seconds), seconds)
	}
	throttledTotal.WithLabelValues(op.String(), class, "reporter").Inc()
	limit := p.limiter.config.Reporter[op]
	return apierrors.NewTooManyRequests(fmt.Sprintf(
		"reporter %q is over its budget of %g Event %ss a second (burst %d), retry after %ds",
		r, limit.QPS, op, limit.Burst, seconds), seconds)
}

// retryAfterSeconds rounds up: a client that comes back early is refused
// again. Retry-After counts whole seconds, so the least is one.
func retryAfterSeconds(d time.Duration) int {
	return max(1, int(math.Ceil(d.Seconds())))
}
