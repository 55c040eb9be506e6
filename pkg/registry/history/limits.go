package history

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	store "github.com/eventapiserver/event-apiserver/pkg/history"
)

// Limits bound what one eventrecords query may cost the store, as datum's
// Activity bounds its ClickHouse queries (look-back caps, row limits,
// max_execution_time) after 30-day queries pushed its p99 to seconds.
// Zero values take the defaults; the server's flags set them
// (--history-max-query-window, --history-max-query-rows,
// --history-query-timeout).
type Limits struct {
	// MaxWindow is the longest window (since to until) a text search may
	// span, a list's or a watch's initial state's. A plain list needs
	// none: it reads its page newest first from an index and stops
	// (maxPage, scanFactor).
	MaxWindow time.Duration
	// MaxRows is the most versions a text search may select in its
	// window; the store counts them before reading any (store.Query.MaxRows).
	MaxRows int
	// Timeout bounds the store queries of a list (all its pages
	// together), of each page of a watch and of a count: both stores
	// cancel a statement with its context (SQLite interrupts it, pgx asks
	// the server to cancel it), and the client gets kube-apiserver's 504
	// naming the flag (query).
	Timeout time.Duration
}

const (
	// DefaultMaxQueryWindow is the default retention: by default any
	// window the store still holds may be searched.
	DefaultMaxQueryWindow = 14 * 24 * time.Hour
	// DefaultMaxQueryRows lets a search for any but the commonest words
	// through; sorting this many rows newest first costs the stores about
	// a tenth of a second.
	DefaultMaxQueryRows = 100000
	// DefaultQueryTimeout is half of kube-apiserver's default
	// --request-timeout (1m): the 504 names the limit before the
	// server's own timeout answers without saying why.
	DefaultQueryTimeout = 30 * time.Second
)

func (l Limits) withDefaults() Limits {
	if l.MaxWindow <= 0 {
		l.MaxWindow = DefaultMaxQueryWindow
	}
	if l.MaxRows <= 0 {
		l.MaxRows = DefaultMaxQueryRows
	}
	if l.Timeout <= 0 {
		l.Timeout = DefaultQueryTimeout
	}
	return l
}

// WithLimits sets the limits of r's queries and returns r.
func (r *REST) WithLimits(l Limits) *REST {
	r.limits = l.withDefaults()
	return r
}

// CheckWindow refuses a window longer than MaxWindow, or an open one (no
// since: all the store holds), naming the flag.
func (l Limits) CheckWindow(since, until, now time.Time) error {
	if since.IsZero() {
		return apierrors.NewBadRequest(fmt.Sprintf("a text search needs a window: add since= to the field selector, at most %s (--history-max-query-window)", l.MaxWindow))
	}
	if until.IsZero() {
		until = now
	}
	if span := until.Sub(since); span > l.MaxWindow {
		return apierrors.NewBadRequest(fmt.Sprintf("the field selector's window spans %s, longer than a text search may span: %s (--history-max-query-window)",
			span.Round(time.Second), l.MaxWindow))
	}
	return nil
}

// errQueryTimeout is the cause of a context Timeout ended: it tells the
// limit's 504 from the end of the request's own deadline (a client's
// ?timeout= shorter than ours), which storeError answers.
var errQueryTimeout = errors.New("--history-query-timeout")

// within bounds ctx by Timeout, for a request that runs several store
// queries (a list's pages): all of them together, not each, get Timeout.
func (l Limits) within(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, l.Timeout, errQueryTimeout)
}

// query runs one store query under Timeout (within a ctx that within
// bounds already, the earlier deadline holds), and says which limit an
// error is: the timeout as kube-apiserver's 504 (its timeout filter's
// apierrors.NewTimeoutError, with no Retry-After: client-go retries a 5xx
// that has one up to ten times, and each retry would run the query that
// just ran out of time again), the rows as a 400.
func query[T any](ctx context.Context, l Limits, run func(context.Context) (T, error)) (T, error) {
	ctx, cancel := l.within(ctx)
	defer cancel()
	out, err := run(ctx)
	switch {
	case err == nil:
		return out, nil
	case errors.Is(context.Cause(ctx), errQueryTimeout):
		return out, apierrors.NewTimeoutError(fmt.Sprintf("the history query did not finish within %s (--history-query-timeout)", l.Timeout), 0)
	case errors.Is(err, store.ErrTooManyRows):
		return out, apierrors.NewBadRequest(fmt.Sprintf("the text search selects more than %d versions, the most one query may read (--history-max-query-rows): "+
			"narrow its window or term, or add a selector", l.MaxRows))
	}
	return out, storeError(err)
}
