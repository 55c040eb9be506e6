package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// TestSelfSignedCertRenewal runs the server with a one-minute self-signed
// certificate: it is renewed while the server runs (past two thirds of its
// life, about 40 s in), the server serves the new one without a restart,
// and a client built from the kubeconfig written at start-up keeps working
// before and after, because the kubeconfig trusts the long-lived CA.
func TestSelfSignedCertRenewal(t *testing.T) {
	t.Parallel()
	server := framework.StartServer(t, framework.ServerOptions{ExtraArgs: []string{"--self-signed-cert-validity=1m"}})
	client := server.Client(t)
	served := func() *x509.Certificate {
		conn, err := tls.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(server.Port)), &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			t.Fatalf("dialing: %v", err)
		}
		defer func() { _ = conn.Close() }()
		return conn.ConnectionState().PeerCertificates[0]
	}
	first := served()
	if life := first.NotAfter.Sub(first.NotBefore); life > 2*time.Minute {
		t.Fatalf("served certificate lives %s, want about 1m", life)
	}
	if _, err := client.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{}); err != nil {
		t.Fatalf("list before renewal: %v", err)
	}
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, 2*time.Minute, false,
		func(context.Context) (bool, error) { return served().SerialNumber.Cmp(first.SerialNumber) != 0, nil })
	if err != nil {
		t.Fatalf("the served certificate (valid until %s) was not renewed", first.NotAfter)
	}
	renewed := served()
	t.Logf("renewed %s after start; new one valid until %s", renewed.NotBefore.Sub(first.NotBefore).Round(time.Second), renewed.NotAfter)
	// The same client, configured before the renewal.
	if _, err := client.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{}); err != nil {
		t.Fatalf("list after renewal with the kubeconfig written at start-up: %v", err)
	}
}
