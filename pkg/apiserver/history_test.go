package apiserver

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestWaitForCache(t *testing.T) {
	notReady := errors.New("not ready")
	cases := []struct {
		name string
		// readyAfter is how many checks fail before one passes; -1: never.
		readyAfter int
		limit      time.Duration
		cancelled  bool
		want       bool
		// minWait is the least time waitFor must take.
		minWait time.Duration
	}{
		{name: "ready at once", readyAfter: 0, limit: time.Minute, want: true},
		{name: "ready after a few checks", readyAfter: 3, limit: time.Minute, want: true, minWait: 300 * time.Millisecond},
		{name: "never ready: starts at the limit", readyAfter: -1, limit: 500 * time.Millisecond, want: true, minWait: 500 * time.Millisecond},
		{name: "stopped while waiting", readyAfter: -1, limit: time.Minute, cancelled: true, want: false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.cancelled {
				time.AfterFunc(200*time.Millisecond, cancel)
			}
			checks := 0
			ready := func() error {
				checks++
				if tc.readyAfter < 0 || checks <= tc.readyAfter {
					return notReady
				}
				return nil
			}
			start := time.Now()
			if got := waitFor(ctx, ready, tc.limit); got != tc.want {
				t.Errorf("waitFor = %v, want %v", got, tc.want)
			}
			if took := time.Since(start); took < tc.minWait || took > tc.minWait+10*time.Second {
				t.Errorf("waitFor took %v, want at least %v", took, tc.minWait)
			}
		})
	}
}
