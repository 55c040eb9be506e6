package storm

import (
	"errors"
	"net/http"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

func TestStorageGate(t *testing.T) {
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
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var g storageGate
			for _, err := range tc.probes {
				g.observe(err)
			}
			err := g.unavailable()
			if (err != nil) != tc.wantClosed {
				t.Fatalf("unavailable() = %v, want closed %v", err, tc.wantClosed)
			}
			if err != nil {
				status := err.(apierrors.APIStatus).Status()
				if status.Code != http.StatusServiceUnavailable || status.Details.RetryAfterSeconds != storageRetryAfterSeconds {
					t.Errorf("status %+v", status)
				}
			}
		})
	}
}
