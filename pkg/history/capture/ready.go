package capture

import (
	"errors"
	"fmt"
	"net/http"
	"sync"
)

// readiness tracks whether capture holds the state it started from: the
// revision it resumed from, or the end of its first relist, stored, and the
// last write to the store succeeded.
type readiness struct {
	sync.Mutex
	// started says from is known: the position capture first started
	// after (the first Start, and the relist it asked for, returned).
	started bool
	from    int64
	stored  int64
	lastErr error
}

func (c *Capture) startedFrom(rev int64) {
	c.ready.Lock()
	defer c.ready.Unlock()
	if !c.ready.started {
		c.ready.started = true
		c.ready.from = rev
	}
}

func (c *Capture) storedUpTo(rev int64) {
	c.ready.Lock()
	defer c.ready.Unlock()
	c.ready.stored = max(c.ready.stored, rev)
	c.ready.lastErr = nil
}

func (r *readiness) failed(err error) {
	r.Lock()
	defer r.Unlock()
	r.lastErr = err
}

// Ready reports nil once capture has stored the state it started from
// and its last write to the store succeeded. A capture that later loses
// its source stays ready: history it holds is still served, and the lag
// metrics say how far behind it is.
func (c *Capture) Ready() error {
	c.ready.Lock()
	defer c.ready.Unlock()
	switch {
	case c.ready.lastErr != nil:
		return fmt.Errorf("history store: %w", c.ready.lastErr)
	case !c.ready.started || c.ready.stored < c.ready.from:
		return errors.New("history capture has not stored its starting point yet")
	}
	return nil
}

// ReadyzCheck is the captures' Ready as one /readyz check named
// event-history-capture: ready once every capture is. With several, an
// error names the sources that are not.
func ReadyzCheck(captures ...*Capture) readyzCheck { return readyzCheck(captures) }

type readyzCheck []*Capture

func (readyzCheck) Name() string { return "event-history-capture" }

func (r readyzCheck) Check(_ *http.Request) error {
	if len(r) == 1 {
		return r[0].Ready()
	}
	var errs []error
	for _, c := range r {
		if err := c.Ready(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", c.source.Name(), err))
		}
	}
	return errors.Join(errs...)
}
