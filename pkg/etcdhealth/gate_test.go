package etcdhealth

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/component-base/metrics/testutil"
)

func TestGate(t *testing.T) {
	down := errors.New("etcd down")
	cases := []struct {
		name   string
		probes []error
		// wantClosed is the gate's state after all probes.
		wantClosed bool
	}{
		{name: "never answered: stays open", probes: []error{down, down, down}, wantClosed: false},
		{name: "one failure is not an outage", probes: []error{nil, down}, wantClosed: false},
		{name: "two failures close it", probes: []error{nil, down, down}, wantClosed: true},
		{name: "an answer opens it again", probes: []error{nil, down, down, down, nil}, wantClosed: false},
		{name: "a failure after an answer starts counting again", probes: []error{nil, down, down, nil, down}, wantClosed: false},
		{name: "it closes again after reopening", probes: []error{nil, down, down, nil, down, down}, wantClosed: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewGate()
			for _, err := range tc.probes {
				g.observe(err)
			}
			err := g.Unavailable()
			if (err != nil) != tc.wantClosed {
				t.Fatalf("Unavailable() = %v, want closed %v", err, tc.wantClosed)
			}
			if err != nil {
				status := err.(apierrors.APIStatus).Status()
				if status.Code != http.StatusServiceUnavailable || status.Details.RetryAfterSeconds != RetryAfterSeconds {
					t.Errorf("status %+v", status)
				}
			}
		})
	}
}

func TestGateEndsCallsInFlightWhenItCloses(t *testing.T) {
	g := NewGate()
	g.observe(nil)
	inFlight, stop := mustOpen(t, g)
	defer stop()
	finished, stopFinished := mustOpen(t, g)
	stopFinished()

	g.observe(errors.New("down"))
	if inFlight.Err() != nil {
		t.Fatalf("one failed probe ended a call in flight: %v", context.Cause(inFlight))
	}
	g.observe(errors.New("down"))
	// The end reaches the call from a goroutine of its own.
	select {
	case <-inFlight.Done():
	case <-time.After(wait.ForeverTestTimeout):
		t.Fatal("a call in flight went on after the gate closed")
	}
	var down downError
	if !errors.As(context.Cause(inFlight), &down) {
		t.Fatalf("call in flight when the gate closed: cause %v, want a downError", context.Cause(inFlight))
	}
	if errors.As(context.Cause(finished), &down) {
		t.Errorf("a call that had finished before the gate closed was ended by it")
	}
	if _, _, err := g.whileOpen(context.Background()); err == nil {
		t.Errorf("a call while the gate is closed was let through")
	}

	g.observe(nil)
	after, stopAfter := mustOpen(t, g)
	defer stopAfter()
	if after.Err() != nil {
		t.Errorf("a call after the gate opened again is ended: %v", context.Cause(after))
	}
}

func mustOpen(t *testing.T, g *Gate) (context.Context, func()) {
	t.Helper()
	ctx, stop, err := g.whileOpen(context.Background())
	if err != nil {
		t.Fatalf("gate closed: %v", err)
	}
	return ctx, stop
}

func TestWritesCheck(t *testing.T) {
	down := errors.New("etcd down")
	cases := []struct {
		name    string
		probes  []error
		nospace bool
		wantOK  bool
	}{
		{name: "etcd never answered", probes: []error{down}, wantOK: false},
		{name: "etcd answers", probes: []error{nil}, wantOK: true},
		{name: "one failure is not an outage", probes: []error{nil, down}, wantOK: true},
		{name: "gate closed", probes: []error{nil, down, down}, wantOK: false},
		{name: "gate open again", probes: []error{nil, down, down, nil}, wantOK: true},
		{name: "NOSPACE", probes: []error{nil}, nospace: true, wantOK: false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewGate()
			check := g.WritesCheck()
			if check.Name() != WritesCheckName {
				t.Fatalf("name %q", check.Name())
			}
			if grouped, ok := check.(interface{ GroupName() string }); !ok || grouped.GroupName() != ReadinessGroup {
				t.Fatalf("the check is not in the group %s, so ?exclude=%s would not exclude it", ReadinessGroup, ReadinessGroup)
			}
			g.nospace.Store(tc.nospace)
			for _, err := range tc.probes {
				g.observe(err)
			}
			err := check.Check(&http.Request{})
			if (err == nil) != tc.wantOK {
				t.Fatalf("Check() = %v, want ok %v", err, tc.wantOK)
			}
			want := 0.0
			if tc.wantOK {
				want = 1
			}
			if got, _ := testutil.GetGaugeMetricValue(writesAvailableGauge); got != want {
				t.Errorf("event_apiserver_etcd_writes_available = %v, want %v", got, want)
			}
		})
	}
}
