package framework

// StartAggregatedCluster runs kube-apiserver v1.36.3 with event-apiserver
// behind its aggregator, as docs/aggregated.md installs them.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	aggregatorclient "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"

	historyv1alpha1 "github.com/eventapiserver/event-apiserver/pkg/apis/history/v1alpha1"
)

// AggregatedCluster is kube-apiserver v1.36.3 with its core/v1 Events in a
// separate events etcd, and event-apiserver on that etcd serving
// events.k8s.io/v1 through an APIService, as docs/aggregated.md describes.
type AggregatedCluster struct {
	Kube *KubeAPIServer
	// EventsEtcd is the events etcd: kube-apiserver's
	// --etcd-servers-overrides=/events#... and every replica's
	// --etcd-servers.
	EventsEtcd *Etcd
	// Replicas are the event-apiserver replicas, all aggregated by Kube;
	// Events is the first, the one the APIService routes to.
	Replicas []*Server
	Events   *Server
	// Client talks to kube-apiserver only; events.k8s.io/v1 reaches
	// event-apiserver through the aggregator.
	Client kubernetes.Interface
}

// AggregatedClusterOptions configures StartAggregatedCluster. The zero value
// is the install of docs/aggregated.md with one replica.
type AggregatedClusterOptions struct {
	// Replicas is how many event-apiserver replicas share the events etcd
	// (default 1).
	Replicas int
	// KubeFlags are appended to kube-apiserver's flags (after
	// --runtime-config=events.k8s.io/v1=false, which the cluster sets:
	// events.k8s.io/v1 is event-apiserver's).
	KubeFlags []string
	// ServerArgs are appended to every replica's flags.
	ServerArgs []string
}

// The test's Service lives apart from deploy/'s namespace.
const (
	AggregatedServiceNamespace = "events-e2e"
	AggregatedServiceDNS       = "event-apiserver." + AggregatedServiceNamespace + ".svc"
)

// StartAggregatedCluster starts the events etcd, kube-apiserver with its
// Events there, the event-apiserver replicas over the same etcd with
// kube-apiserver's kubeconfig, and registers the APIService for
// events.k8s.io/v1, waiting until kube-apiserver serves it. Everything is
// stopped when the test ends.
func StartAggregatedCluster(t *testing.T, opts AggregatedClusterOptions) *AggregatedCluster {
	t.Helper()
	if opts.Replicas == 0 {
		opts.Replicas = 1
	}
	eventsEtcd := StartEtcd(t)
	kube := StartKubeAPIServer(t, KubeAPIServerOptions{
		EtcdServersOverrides: "/events#" + eventsEtcd.ClientURL(),
		ExtraFlags:           append([]string{"--runtime-config=events.k8s.io/v1=false"}, opts.KubeFlags...),
	})
	c := &AggregatedCluster{Kube: kube, EventsEtcd: eventsEtcd, Client: kube.Client(t)}
	for range opts.Replicas {
		c.Replicas = append(c.Replicas, StartServer(t, ServerOptions{
			EtcdServers:          eventsEtcd.ClientURL(),
			AggregatedKubeconfig: kube.KubeconfigPath,
			ExtraArgs:            append([]string{"--self-signed-cert-dns-names=" + AggregatedServiceDNS}, opts.ServerArgs...),
		}))
	}
	c.Events = c.Replicas[0]
	c.registerAPIService(t)
	return c
}

// registerAPIService routes events.k8s.io/v1 to event-apiserver. On one
// machine the aggregator reaches it through an ExternalName Service for
// localhost; TLS is verified against the server's CA for the Service's name.
func (c *AggregatedCluster) registerAPIService(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	caBundle, err := os.ReadFile(c.Events.CACertFile())
	if err != nil {
		t.Fatal(err)
	}
	MustCreate(t, func() error {
		_, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: AggregatedServiceNamespace}}, metav1.CreateOptions{})
		return err
	})
	MustCreate(t, func() error {
		_, err := c.Client.CoreV1().Services(AggregatedServiceNamespace).Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "event-apiserver"},
			Spec: corev1.ServiceSpec{
				Type:         corev1.ServiceTypeExternalName,
				ExternalName: "localhost",
				Ports:        []corev1.ServicePort{{Name: "https", Port: int32(c.Events.Port)}},
			},
		}, metav1.CreateOptions{})
		return err
	})
	aggregator, err := aggregatorclient.NewForConfig(c.Kube.RestConfig())
	if err != nil {
		t.Fatal(err)
	}
	port := int32(c.Events.Port)
	MustCreate(t, func() error {
		_, err := aggregator.ApiregistrationV1().APIServices().Create(ctx, &apiregistrationv1.APIService{
			ObjectMeta: metav1.ObjectMeta{Name: "v1.events.k8s.io"},
			Spec: apiregistrationv1.APIServiceSpec{
				Group:                "events.k8s.io",
				Version:              "v1",
				GroupPriorityMinimum: 17750,
				VersionPriority:      15,
				CABundle:             caBundle,
				Service:              &apiregistrationv1.ServiceReference{Namespace: AggregatedServiceNamespace, Name: "event-apiserver", Port: &port},
			},
		}, metav1.CreateOptions{})
		return err
	})
	WaitAPIServiceAvailable(t, aggregator, "v1.events.k8s.io", 90*time.Second)
	// Discovery through kube-apiserver follows the APIService a moment later.
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := c.Client.EventsV1().Events("default").List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("events.k8s.io/v1 not served through kube-apiserver: %v", err)
	}
}

// WaitAPIServiceAvailable waits for the APIService's Available condition.
func WaitAPIServiceAvailable(t *testing.T, aggregator aggregatorclient.Interface, name string, timeout time.Duration) {
	t.Helper()
	var last *apiregistrationv1.APIService
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		svc, err := aggregator.ApiregistrationV1().APIServices().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = svc
		for _, cond := range svc.Status.Conditions {
			if cond.Type == apiregistrationv1.Available {
				return cond.Status == apiregistrationv1.ConditionTrue, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("APIService %s not Available: %v: %+v", name, err, last)
	}
}

// MustCreate runs create, failing the test on any error but AlreadyExists.
func MustCreate(t *testing.T, create func() error) {
	t.Helper()
	if err := create(); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// CreateNamespace creates a namespace in kube-apiserver (if missing).
func (c *AggregatedCluster) CreateNamespace(t *testing.T, name string) {
	t.Helper()
	MustCreate(t, func() error {
		_, err := c.Client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		return err
	})
}

// Impersonating is a client of kube-apiserver acting as user, with no groups
// but system:authenticated: RBAC alone decides what it may do.
func (c *AggregatedCluster) Impersonating(t *testing.T, user string) kubernetes.Interface {
	t.Helper()
	client, err := kubernetes.NewForConfig(c.ImpersonatingConfig(user))
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// ImpersonatingConfig is kube-apiserver's admin config acting as user.
func (c *AggregatedCluster) ImpersonatingConfig(user string) *rest.Config {
	config := c.Kube.RestConfig()
	config.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	return config
}

// FrontProxyGet calls event-apiserver directly as kube-apiserver's front
// proxy does: the front-proxy client certificate and X-Remote-* headers.
func (c *AggregatedCluster) FrontProxyGet(t *testing.T, user, path string) (int, string) {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(c.Kube.FrontProxyClientCertFile, c.Kube.FrontProxyClientKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	return c.eventsGet(t, path, []tls.Certificate{cert}, map[string]string{
		"X-Remote-User":  user,
		"X-Remote-Group": "system:authenticated",
	})
}

// AnonymousGet calls event-apiserver (Events) directly with no credentials.
func (c *AggregatedCluster) AnonymousGet(t *testing.T, path string) (int, string) {
	t.Helper()
	return c.eventsGet(t, path, nil, nil)
}

func (c *AggregatedCluster) eventsGet(t *testing.T, path string, certs []tls.Certificate, headers map[string]string) (int, string) {
	t.Helper()
	ca, err := os.ReadFile(c.Events.CACertFile())
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	client := &http.Client{
		Timeout:   30 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: certs}},
	}
	req, err := http.NewRequest(http.MethodGet, c.Events.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// AssertSameStatus compares what a client sees of two API errors.
func AssertSameStatus(t *testing.T, want, got error) {
	t.Helper()
	wantStatus, okWant := want.(apierrors.APIStatus)
	gotStatus, okGot := got.(apierrors.APIStatus)
	if !okWant || !okGot {
		t.Fatalf("want two API errors, got %v and %v", want, got)
	}
	w, g := wantStatus.Status(), gotStatus.Status()
	if w.Code != g.Code || w.Reason != g.Reason || w.Message != g.Message {
		t.Errorf("kube-apiserver: %d %s %q; event-apiserver: %d %s %q", w.Code, w.Reason, w.Message, g.Code, g.Reason, g.Message)
	}
}

// RegisterHistoryAPIService routes history.eventapiserver.io/v1alpha1 to
// event-apiserver, as deploy/ does (the test's Service namespace aside).
func (c *AggregatedCluster) RegisterHistoryAPIService(t *testing.T) {
	t.Helper()
	caBundle, err := os.ReadFile(c.Events.CACertFile())
	if err != nil {
		t.Fatal(err)
	}
	aggregator, err := aggregatorclient.NewForConfig(c.Kube.RestConfig())
	if err != nil {
		t.Fatal(err)
	}
	port := int32(c.Events.Port)
	MustCreate(t, func() error {
		_, err := aggregator.ApiregistrationV1().APIServices().Create(context.Background(), &apiregistrationv1.APIService{
			ObjectMeta: metav1.ObjectMeta{Name: "v1alpha1.history.eventapiserver.io"},
			Spec: apiregistrationv1.APIServiceSpec{
				Group: historyv1alpha1.GroupName, Version: "v1alpha1",
				GroupPriorityMinimum: 1000, VersionPriority: 15, CABundle: caBundle,
				Service: &apiregistrationv1.ServiceReference{Namespace: AggregatedServiceNamespace, Name: "event-apiserver", Port: &port},
			},
		}, metav1.CreateOptions{})
		return err
	})
}
