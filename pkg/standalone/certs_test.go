package standalone

import (
	"crypto/x509"
	"net"
	"testing"
	"time"
)

// TestServingCertRenewal drives the self-signed certificate through its
// life on a fake clock: written once, kept while young, renewed past two
// thirds of its validity and when its names change, always signed by the
// same CA, which is what a client's kubeconfig trusts.
func TestServingCertRenewal(t *testing.T) {
	// The real time to start: the CA (client-go) is dated by the real clock.
	now := time.Now()
	c := ServingCert{Dir: t.TempDir(), Host: "localhost", IPs: []net.IP{net.ParseIP("127.0.0.1")},
		Validity: 30 * time.Hour, Now: func() time.Time { return now }}
	steps := []struct {
		name        string
		advance     time.Duration
		dnsNames    []string
		wantRenewed bool
	}{
		{name: "first start writes", wantRenewed: true},
		{name: "restart keeps a young certificate", advance: time.Hour},
		{name: "just before two thirds", advance: 18 * time.Hour},
		{name: "past two thirds renews", advance: 2 * time.Hour, wantRenewed: true},
		{name: "kept again", advance: time.Hour},
		{name: "new DNS names renew", dnsNames: []string{"events.example.svc"}, wantRenewed: true},
		{name: "same names kept", dnsNames: []string{"events.example.svc"}},
		{name: "long after expiry renews", advance: 1000 * time.Hour, dnsNames: []string{"events.example.svc"}, wantRenewed: true},
	}
	var ca *x509.Certificate
	for _, s := range steps {
		now = now.Add(s.advance)
		c.DNSNames = s.dnsNames
		renewed, err := c.Ensure()
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if renewed != s.wantRenewed {
			t.Errorf("%s: renewed %v, want %v", s.name, renewed, s.wantRenewed)
		}
		gotCA, err := loadCert(c.CAFile())
		if err != nil {
			t.Fatal(err)
		}
		if ca == nil {
			ca = gotCA
		} else if !gotCA.Equal(ca) {
			t.Errorf("%s: the CA changed; kubeconfigs trusting it would break", s.name)
		}
		leaf, err := loadCert(c.CertFile())
		if err != nil {
			t.Fatal(err)
		}
		pool := x509.NewCertPool()
		pool.AddCert(ca)
		for _, name := range append([]string{"localhost"}, s.dnsNames...) {
			if _, err := leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: pool, CurrentTime: now}); err != nil {
				t.Errorf("%s: the leaf does not verify for %s against the CA: %v", s.name, name, err)
			}
		}
	}
	if years := ca.NotAfter.Sub(ca.NotBefore).Hours() / 24 / 365; years < 9.9 {
		t.Errorf("the CA lives %.1f years, want 10", years)
	}
}
