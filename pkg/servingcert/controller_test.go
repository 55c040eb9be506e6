package servingcert

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	aggregatorfake "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset/fake"
)

type countingListener struct{ n atomic.Int32 }

func (l *countingListener) Enqueue() { l.n.Add(1) }

// TestControllersShareOneSecret: two replicas on one Secret serve the same
// certificate, the APIService trusts it, and a renewal by one reaches the
// other on its next sync with the previous CA still trusted.
func TestControllersShareOneSecret(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	aggregator := aggregatorfake.NewSimpleClientset(&apiregistrationv1.APIService{
		ObjectMeta: metav1.ObjectMeta{Name: "v1.events.k8s.io"},
		Spec:       apiregistrationv1.APIServiceSpec{Service: &apiregistrationv1.ServiceReference{Namespace: "event-apiserver", Name: "event-apiserver"}},
	}, &apiregistrationv1.APIService{
		// kube-apiserver's own: left alone.
		ObjectMeta: metav1.ObjectMeta{Name: "v1.local.example.com"},
	})
	now := t0
	// Leaf and CA due at about the same time, so the old leaf is still
	// valid when the CA is renewed.
	policy := Policy{DNSNames: testPolicy.DNSNames, CAValidity: 30 * time.Hour, Validity: 29 * time.Hour, RenewFraction: 2.0 / 3}
	clock := func() time.Time { return now }
	newReplica := func() (*Controller, *countingListener) {
		c := New(Config{
			Client: client, APIServices: aggregator.ApiregistrationV1(), APIServiceNames: []string{"v1.events.k8s.io", "v1.missing.example.com", "v1.local.example.com"},
			Namespace: "event-apiserver", Name: "event-apiserver-serving", Policy: policy, Resync: time.Second, Now: clock,
		})
		l := &countingListener{}
		c.AddListener(l)
		return c, l
	}
	a, la := newReplica()
	b, lb := newReplica()
	for _, c := range []*Controller{a, b} {
		if err := c.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	certA, _ := a.CurrentCertKeyContent()
	certB, _ := b.CurrentCertKeyContent()
	if len(certA) == 0 || string(certA) != string(certB) {
		t.Fatalf("replicas serve different certificates")
	}
	if la.n.Load() != 1 || lb.n.Load() != 1 {
		t.Errorf("listeners told %d and %d times, want once each", la.n.Load(), lb.n.Load())
	}
	trusts := func(cert []byte) {
		t.Helper()
		svc, err := aggregator.ApiregistrationV1().APIServices().Get(ctx, "v1.events.k8s.io", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		roots, _ := parseCerts(svc.Spec.CABundle)
		leaf, _ := parseCerts(cert)
		if err := policy.usable(leaf[0], roots, now); err != nil {
			t.Errorf("APIService caBundle does not trust the served certificate: %v", err)
		}
	}
	trusts(certA)

	// Past the CA's renewal point: a renews, b still serves the old leaf,
	// which the APIService must keep trusting.
	now = t0.Add(20*time.Hour + 30*time.Minute)
	if err := a.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	renewed, _ := a.CurrentCertKeyContent()
	if string(renewed) == string(certA) {
		t.Fatal("no renewal")
	}
	trusts(renewed)
	trusts(certB)
	if err := b.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := b.CurrentCertKeyContent(); string(got) != string(renewed) {
		t.Errorf("b does not serve the renewed certificate")
	}
	if local, err := aggregator.ApiregistrationV1().APIServices().Get(ctx, "v1.local.example.com", metav1.GetOptions{}); err != nil || len(local.Spec.CABundle) != 0 {
		t.Errorf("a local APIService got a caBundle (%v)", err)
	}
	if lb.n.Load() != 2 {
		t.Errorf("b's listener told %d times, want 2", lb.n.Load())
	}
}
