package servingcert

import (
	"crypto/x509"
	"strings"
	"testing"
	"time"
)

var testPolicy = Policy{
	DNSNames:      []string{"event-apiserver.event-apiserver.svc", "event-apiserver.event-apiserver.svc.cluster.local"},
	CAValidity:    300 * time.Hour,
	Validity:      30 * time.Hour,
	RenewFraction: 2.0 / 3,
}

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func mustDecide(t *testing.T, now time.Time, data map[string][]byte, p Policy) (map[string][]byte, string) {
	t.Helper()
	next, reason, err := decide(now, data, p)
	if err != nil {
		t.Fatal(err)
	}
	return next, reason
}

func certOf(t *testing.T, data map[string][]byte, key string) *x509.Certificate {
	t.Helper()
	certs, err := parseCerts(data[key])
	if err != nil || len(certs) == 0 {
		t.Fatalf("%s: %v (%d certificates)", key, err, len(certs))
	}
	return certs[0]
}

func bundleOf(t *testing.T, data map[string][]byte) []*x509.Certificate {
	t.Helper()
	certs, err := parseCerts(data[KeyCABundle])
	if err != nil {
		t.Fatal(err)
	}
	return certs
}

func TestDecide(t *testing.T) {
	initial, _ := mustDecide(t, t0, nil, testPolicy)
	withData := func(mutate func(map[string][]byte)) map[string][]byte {
		d := map[string][]byte{}
		for k, v := range initial {
			d[k] = v
		}
		mutate(d)
		return d
	}
	// The CA renewed once: the old one stays trusted, the leaf stays.
	caRenewedAt := t0.Add(201 * time.Hour)
	caRenewed, _ := mustDecide(t, caRenewedAt, withData(func(d map[string][]byte) {
		// A leaf issued just before, not due yet.
		leafOnly, _ := mustDecide(t, caRenewedAt.Add(-time.Hour), d, Policy{DNSNames: testPolicy.DNSNames, CAValidity: testPolicy.CAValidity, Validity: testPolicy.Validity, RenewFraction: testPolicy.RenewFraction})
		d[KeyTLSCert], d[KeyTLSKey] = leafOnly[KeyTLSCert], leafOnly[KeyTLSKey]
	}), testPolicy)

	// Lifetimes shorter than the backdating: renewal still at two thirds
	// of the time since issue.
	short := Policy{DNSNames: testPolicy.DNSNames, CAValidity: 10 * time.Minute, Validity: 90 * time.Second, RenewFraction: 2.0 / 3}
	shortInitial, _ := mustDecide(t, t0, nil, short)

	otherService := testPolicy
	otherService.DNSNames = []string{"events.other.svc"}

	cases := []struct {
		name       string
		now        time.Time
		data       map[string][]byte
		policy     Policy
		wantReason string // substring; empty: nothing to change
		newCA      bool
		newLeaf    bool
		bundleLen  int
	}{
		{name: "nothing stored", now: t0, data: nil, wantReason: "no usable CA", newCA: true, newLeaf: true, bundleLen: 1},
		{name: "garbage stored", now: t0, data: map[string][]byte{KeyCACert: []byte("x"), KeyTLSCert: []byte("y")}, wantReason: "no usable CA", newCA: true, newLeaf: true, bundleLen: 1},
		{name: "fresh", now: t0.Add(time.Hour), data: initial, bundleLen: 1},
		{name: "just before the leaf's renewal point", now: t0.Add(19 * time.Hour), data: initial, bundleLen: 1},
		{name: "leaf due", now: t0.Add(21 * time.Hour), data: initial, wantReason: "serving certificate expires", newLeaf: true, bundleLen: 1},
		{name: "leaf expired", now: t0.Add(31 * time.Hour), data: initial, wantReason: "no usable serving certificate", newLeaf: true, bundleLen: 1},
		{name: "leaf key swapped", now: t0, data: withData(func(d map[string][]byte) { d[KeyTLSKey] = d[KeyCAKey] }), wantReason: "does not match", newLeaf: true, bundleLen: 1},
		{name: "leaf for another service", now: t0, data: initial, policy: otherService, wantReason: "no usable serving certificate", newLeaf: true, bundleLen: 1},
		{name: "leaf signed by an untrusted CA", now: t0, data: withData(func(d map[string][]byte) {
			other, _ := mustDecide(t, t0, nil, testPolicy)
			d[KeyTLSCert], d[KeyTLSKey] = other[KeyTLSCert], other[KeyTLSKey]
		}), wantReason: "no usable serving certificate", newLeaf: true, bundleLen: 1},
		{name: "short leaf not due at 50s", now: t0.Add(50 * time.Second), data: shortInitial, policy: short, bundleLen: 1},
		{name: "short leaf due at 61s", now: t0.Add(61 * time.Second), data: shortInitial, policy: short, wantReason: "serving certificate expires", newLeaf: true, bundleLen: 1},
		{name: "CA due keeps the old CA trusted and the leaf", now: caRenewedAt, data: caRenewed, bundleLen: 2},
		{name: "old CA dropped once expired", now: t0.Add(301 * time.Hour), data: caRenewed, wantReason: "no usable serving certificate", newLeaf: true, bundleLen: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.policy
			if p.DNSNames == nil {
				p = testPolicy
			}
			next, reason := mustDecide(t, tc.now, tc.data, p)
			if (reason == "") != (tc.wantReason == "") || !strings.Contains(reason, tc.wantReason) {
				t.Fatalf("reason %q, want %q", reason, tc.wantReason)
			}
			if got := string(next[KeyCACert]) != string(tc.data[KeyCACert]); got != tc.newCA {
				t.Errorf("new CA: %v, want %v", got, tc.newCA)
			}
			if got := string(next[KeyTLSCert]) != string(tc.data[KeyTLSCert]); got != tc.newLeaf {
				t.Errorf("new leaf: %v, want %v", got, tc.newLeaf)
			}
			bundle := bundleOf(t, next)
			if len(bundle) != tc.bundleLen {
				t.Errorf("bundle holds %d CAs, want %d", len(bundle), tc.bundleLen)
			}
			if !bundle[0].Equal(certOf(t, next, KeyCACert)) {
				t.Errorf("the bundle does not start with the current CA")
			}
			leaf, err := ParseKeyPair(next[KeyTLSCert], next[KeyTLSKey])
			if err != nil {
				t.Fatal(err)
			}
			if err := p.usable(leaf.Cert, bundle, tc.now); err != nil {
				t.Errorf("stored leaf cannot serve: %v", err)
			}
			if p.due(leaf.Cert, tc.now) {
				t.Errorf("stored leaf is already due")
			}
			// Deciding again on the result changes nothing: replicas agree.
			if _, again := mustDecide(t, tc.now, next, p); again != "" {
				t.Errorf("second decision wants a change: %s", again)
			}
		})
	}
}

// TestCARotation walks a CA through its renewal: the new CA signs the next
// leaf while the old one stays trusted until it expires.
func TestCARotation(t *testing.T) {
	data, _ := mustDecide(t, t0, nil, testPolicy)
	firstCA := certOf(t, data, KeyCACert)
	var sawTwo bool
	for now := t0; now.Before(t0.Add(700 * time.Hour)); now = now.Add(time.Hour) {
		var reason string
		data, reason = mustDecide(t, now, data, testPolicy)
		bundle := bundleOf(t, data)
		leaf := certOf(t, data, KeyTLSCert)
		if err := testPolicy.usable(leaf, bundle, now); err != nil {
			t.Fatalf("%v after %q: leaf cannot serve: %v", now.Sub(t0), reason, err)
		}
		for _, ca := range bundle {
			if now.After(ca.NotAfter) {
				t.Fatalf("%v: expired CA still in the bundle", now.Sub(t0))
			}
		}
		if len(bundle) == 2 {
			sawTwo = true
		}
	}
	if !sawTwo {
		t.Errorf("never two CAs in the bundle during a rotation")
	}
	if certOf(t, data, KeyCACert).Equal(firstCA) {
		t.Errorf("the CA was never renewed")
	}
}
