package testbed

import (
	"context"
	"crypto/x509"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	certutil "k8s.io/client-go/util/cert"

	"github.com/eventapiserver/event-apiserver/pkg/etcd"
)

func TestRetryOnPortClash(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip(err)
	}
	tests := []struct {
		name         string
		logs         []string // what the process of each attempt prints; "" succeeds
		wantAttempts int
		wantErr      bool
	}{
		{name: "first attempt", logs: []string{""}, wantAttempts: 1},
		{name: "port taken once", logs: []string{"listen tcp 127.0.0.1:1: bind: address already in use", ""}, wantAttempts: 2},
		{name: "other failure is not retried", logs: []string{"no such flag", ""}, wantAttempts: 1, wantErr: true},
		{name: "gives up", logs: []string{addrInUse, addrInUse, addrInUse, ""}, wantAttempts: portAttempts, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			attempts := 0
			err := retryOnPortClash("sh", func(attempt int) ([]*Process, error) {
				attempts = attempt
				msg := tc.logs[attempt-1]
				if msg == "" {
					return nil, nil
				}
				p := &Process{Name: "sh", Path: "sh", Args: []string{"-c", "echo '" + msg + "'"},
					LogPath: filepath.Join(dir, "sh.log"+string(rune('0'+attempt)))}
				if err := p.Start(); err != nil {
					t.Fatal(err)
				}
				// Wait for the exit, so that the log is complete.
				_ = p.Poll(context.Background(), 10*time.Millisecond, func() error { return errors.New("running") })
				return []*Process{p}, errors.New("failed: " + msg)
			})
			if attempts != tc.wantAttempts || (err != nil) != tc.wantErr {
				t.Fatalf("attempts %d, err %v; want %d attempts, error %v", attempts, err, tc.wantAttempts, tc.wantErr)
			}
		})
	}
}

// TestKubeCredentials checks the PKI kube-apiserver is started with: a
// serving certificate for loopback, an admin client certificate and a
// front-proxy client certificate, each chaining to the CA the flags name,
// and a kubeconfig with the admin token.
func TestKubeCredentials(t *testing.T) {
	s := &KubeAPIServer{Dir: t.TempDir()}
	s.CertDir = filepath.Join(s.Dir, "certs")
	if err := os.MkdirAll(s.CertDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := s.writeCredentials(); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, caFile, certFile, dnsName string
		usage                           x509.ExtKeyUsage
		wantCN                          string
	}{
		{name: "serving", caFile: s.CAFile, certFile: s.ServingCertFile, dnsName: "127.0.0.1", usage: x509.ExtKeyUsageServerAuth, wantCN: "kube-apiserver"},
		{name: "admin", caFile: s.ClientCAFile, certFile: s.AdminClientCertFile, usage: x509.ExtKeyUsageClientAuth, wantCN: "admin"},
		{name: "front proxy", caFile: s.FrontProxyCAFile, certFile: s.FrontProxyClientCertFile, usage: x509.ExtKeyUsageClientAuth, wantCN: FrontProxyClientName},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pool, err := certutil.NewPool(tc.caFile)
			if err != nil {
				t.Fatal(err)
			}
			certs, err := certutil.CertsFromFile(tc.certFile)
			if err != nil {
				t.Fatal(err)
			}
			if certs[0].Subject.CommonName != tc.wantCN {
				t.Errorf("CN %q, want %q", certs[0].Subject.CommonName, tc.wantCN)
			}
			if _, err := certs[0].Verify(x509.VerifyOptions{Roots: pool, DNSName: tc.dnsName, KeyUsages: []x509.ExtKeyUsage{tc.usage}}); err != nil {
				t.Fatal(err)
			}
		})
	}
	tokens, err := os.ReadFile(filepath.Join(s.Dir, "tokens.csv"))
	if err != nil || !strings.HasPrefix(string(tokens), s.AdminToken+",admin,") {
		t.Fatalf("tokens.csv %q (%v) does not give token %q to admin", tokens, err, s.AdminToken)
	}
	for _, f := range []string{s.ServiceAccountKeyFile, s.ServiceAccountSigningKeyFile} {
		if _, err := os.Stat(f); err != nil {
			t.Error(err)
		}
	}
}

// TestLeaseCheckpointFlag pins the test bed's etcd flag to the embedded
// etcd's feature gates: every etcd the project runs checkpoints leases the
// same way.
func TestLeaseCheckpointFlag(t *testing.T) {
	if want := "--feature-gates=" + etcd.LeaseCheckpointFeatureGates; LeaseCheckpointFlag != want {
		t.Errorf("LeaseCheckpointFlag = %q, want %q", LeaseCheckpointFlag, want)
	}
}
