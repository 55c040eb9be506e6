package servingcert

import (
	"context"
	"crypto/x509"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// TestEtcdCertsIdempotent: the first run makes four Secrets whose
// certificates chain to the CA and name the members; a second run changes
// none of them.
func TestEtcdCertsIdempotent(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	e := EtcdCerts{Namespace: "event-apiserver", Service: "events-etcd", ClientService: "events-etcd-client",
		Prefix: "events-etcd", ExtraSANs: []string{"10.96.0.20"}, CAValidity: 10 * time.Hour, Validity: 5 * time.Hour}
	if err := e.Ensure(ctx, client, t0); err != nil {
		t.Fatal(err)
	}
	get := func(name string) map[string][]byte {
		t.Helper()
		s, err := client.CoreV1().Secrets(e.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return s.Data
	}
	first := map[string]map[string][]byte{}
	for _, name := range []string{e.CASecret(), e.ServerSecret(), e.PeerSecret(), e.ClientSecret()} {
		first[name] = get(name)
	}
	ca, err := ParseKeyPair(first[e.CASecret()][KeyCACert], first[e.CASecret()][KeyCAKey])
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	cases := []struct {
		name   string
		secret string
		host   string
		usage  x509.ExtKeyUsage
	}{
		{name: "server for a member", secret: e.ServerSecret(), host: "events-etcd-1.events-etcd.event-apiserver.svc", usage: x509.ExtKeyUsageServerAuth},
		{name: "server for the client Service", secret: e.ServerSecret(), host: "events-etcd-client.event-apiserver.svc", usage: x509.ExtKeyUsageServerAuth},
		{name: "server for an extra IP", secret: e.ServerSecret(), host: "10.96.0.20", usage: x509.ExtKeyUsageServerAuth},
		{name: "peer as server", secret: e.PeerSecret(), host: "events-etcd-2.events-etcd.event-apiserver.svc.cluster.local", usage: x509.ExtKeyUsageServerAuth},
		{name: "peer as client", secret: e.PeerSecret(), usage: x509.ExtKeyUsageClientAuth},
		{name: "client", secret: e.ClientSecret(), usage: x509.ExtKeyUsageClientAuth},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			kp, err := ParseKeyPair(first[tc.secret][KeyTLSCert], first[tc.secret][KeyTLSKey])
			if err != nil {
				t.Fatal(err)
			}
			if string(first[tc.secret][KeyCACert]) != string(ca.CertPEM) {
				t.Errorf("ca.crt is not the CA")
			}
			if _, err := kp.Cert.Verify(x509.VerifyOptions{DNSName: tc.host, Roots: roots, CurrentTime: t0,
				KeyUsages: []x509.ExtKeyUsage{tc.usage}}); err != nil {
				t.Error(err)
			}
		})
	}
	if err := e.Ensure(ctx, client, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	for name, data := range first {
		if string(get(name)[KeyTLSCert]) != string(data[KeyTLSCert]) || string(get(name)[KeyCACert]) != string(data[KeyCACert]) {
			t.Errorf("second run changed %s", name)
		}
	}
}
