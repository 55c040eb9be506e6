package capture

import (
	"errors"
	"fmt"
	"net/http"
	"sync"
)

// readiness tracks whether capture holds the state it started from: the
// resourceVersion it resumed from, or the end of its first relist, stored,
// and the last write to the store succeeded.
type readiness struct {
	sync.Mutex
	// from is the revision capture started from; 0 until it knows it.
	from    int64
	stored  int64
	lastErr error
}

func (c *Capture) startedFrom(rev int64) {
	c.ready.Lock()
	defer c.ready.Unlock()
	if c.ready.from == 0 {
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
// kube-apiserver stays ready: history it holds is still served, and the
// lag metrics say how far behind it is.
func (c *Capture) Ready() error {
	c.ready.Lock()
	defer c.ready.Unlock()
	switch {
	case c.ready.lastErr != nil:
		return fmt.Errorf("history store: %w", c.ready.lastErr)
	case c.ready.from == 0 || c.ready.stored < c.ready.from:
		return errors.New("history capture has not stored its starting point yet")
	}
	return nil
}

// ReadyzCheck is Ready as a /readyz check named event-history-capture.
func (c *Capture) ReadyzCheck() readyzCheck { return readyzCheck{c} }

type readyzCheck struct{ c *Capture }

func (readyzCheck) Name() string                  { return "event-history-capture" }
func (r readyzCheck) Check(_ *http.Request) error { return r.c.Ready() }
