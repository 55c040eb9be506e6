package integration

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	aggregatorclient "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"

	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// aggregatedCluster is kube-apiserver v1.36.3 with its core/v1 Events in a
// separate events etcd, and event-apiserver on that etcd serving
// events.k8s.io/v1 through an APIService, as docs/aggregated.md describes.
type aggregatedCluster struct {
	kube   *framework.KubeAPIServer
	events *framework.Server
	// client talks to kube-apiserver only; events.k8s.io/v1 reaches
	// event-apiserver through the aggregator.
	client kubernetes.Interface
}

// The test's Service lives apart from deploy/'s namespace.
const (
	aggregatedServiceNamespace = "events-e2e"
	aggregatedServiceDNS       = "event-apiserver." + aggregatedServiceNamespace + ".svc"
)

func startAggregatedCluster(t *testing.T) *aggregatedCluster {
	t.Helper()
	eventsEtcd := framework.StartEtcd(t)
	kube := framework.StartKubeAPIServer(t, framework.KubeAPIServerOptions{
		EtcdServersOverrides: "/events#" + eventsEtcd.ClientURL(),
		ExtraFlags:           []string{"--runtime-config=events.k8s.io/v1=false"},
	})
	events := framework.StartServer(t, framework.ServerOptions{
		EtcdServers:          eventsEtcd.ClientURL(),
		AggregatedKubeconfig: kube.KubeconfigPath,
		ExtraArgs:            []string{"--self-signed-cert-dns-names=" + aggregatedServiceDNS},
	})
	c := &aggregatedCluster{kube: kube, events: events, client: kube.Client(t)}
	c.registerAPIService(t)
	return c
}

// registerAPIService routes events.k8s.io/v1 to event-apiserver. On one
// machine the aggregator reaches it through an ExternalName Service for
// localhost; TLS is verified against the server's CA for the Service's name.
func (c *aggregatedCluster) registerAPIService(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	caBundle, err := os.ReadFile(c.events.CACertFile())
	if err != nil {
		t.Fatal(err)
	}
	mustCreate(t, func() error {
		_, err := c.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: aggregatedServiceNamespace}}, metav1.CreateOptions{})
		return err
	})
	mustCreate(t, func() error {
		_, err := c.client.CoreV1().Services(aggregatedServiceNamespace).Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "event-apiserver"},
			Spec: corev1.ServiceSpec{
				Type:         corev1.ServiceTypeExternalName,
				ExternalName: "localhost",
				Ports:        []corev1.ServicePort{{Name: "https", Port: int32(c.events.Port)}},
			},
		}, metav1.CreateOptions{})
		return err
	})
	aggregator, err := aggregatorclient.NewForConfig(c.kube.RestConfig())
	if err != nil {
		t.Fatal(err)
	}
	port := int32(c.events.Port)
	mustCreate(t, func() error {
		_, err := aggregator.ApiregistrationV1().APIServices().Create(ctx, &apiregistrationv1.APIService{
			ObjectMeta: metav1.ObjectMeta{Name: "v1.events.k8s.io"},
			Spec: apiregistrationv1.APIServiceSpec{
				Group:                "events.k8s.io",
				Version:              "v1",
				GroupPriorityMinimum: 17750,
				VersionPriority:      15,
				CABundle:             caBundle,
				Service:              &apiregistrationv1.ServiceReference{Namespace: aggregatedServiceNamespace, Name: "event-apiserver", Port: &port},
			},
		}, metav1.CreateOptions{})
		return err
	})
	waitAPIServiceAvailable(t, aggregator, "v1.events.k8s.io", 90*time.Second)
	// Discovery through kube-apiserver follows the APIService a moment later.
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := c.client.EventsV1().Events("default").List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("events.k8s.io/v1 not served through kube-apiserver: %v", err)
	}
}

// waitAPIServiceAvailable waits for the APIService's Available condition.
func waitAPIServiceAvailable(t *testing.T, aggregator aggregatorclient.Interface, name string, timeout time.Duration) {
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

func mustCreate(t *testing.T, create func() error) {
	t.Helper()
	if err := create(); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

func (c *aggregatedCluster) createNamespace(t *testing.T, name string) {
	t.Helper()
	mustCreate(t, func() error {
		_, err := c.client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		return err
	})
}

// impersonating is a client of kube-apiserver acting as user, with no groups
// but system:authenticated: RBAC alone decides what it may do.
func (c *aggregatedCluster) impersonating(t *testing.T, user string) kubernetes.Interface {
	t.Helper()
	client, err := kubernetes.NewForConfig(c.impersonatingConfig(user))
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// impersonatingConfig is kube-apiserver's admin config acting as user.
func (c *aggregatedCluster) impersonatingConfig(user string) *rest.Config {
	config := c.kube.RestConfig()
	config.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	return config
}

func TestAggregated(t *testing.T) {
	t.Parallel()
	c := startAggregatedCluster(t)
	ctx := context.Background()
	c.createNamespace(t, "team-a")
	c.createNamespace(t, "team-b")

	t.Run("kubectl", func(t *testing.T) {
		t.Run("preinstalled", func(t *testing.T) {
			testKubectlThroughAggregator(t, c, kubectlBinary(t), "kubectl-preinstalled")
		})
		t.Run("v1.36.3", func(t *testing.T) {
			testKubectlThroughAggregator(t, c, framework.KubectlBinary(t), "kubectl-built")
		})
	})

	t.Run("one Event through both paths", func(t *testing.T) {
		// Written through kube-apiserver's own core/v1, read through
		// events.k8s.io/v1, which event-apiserver serves from the same etcd.
		core := recorderStyleCoreEvent("team-a", "through-core")
		created, err := c.client.CoreV1().Events("team-a").Create(ctx, core, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		viaEvents, err := c.client.EventsV1().Events("team-a").Get(ctx, created.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		assertCoreMatchesEvents(t, created, viaEvents)

		// And the other way round.
		ev := schedulerStyleEvent("team-a", "through-events")
		createdEv, err := c.client.EventsV1().Events("team-a").Create(ctx, ev, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		viaCore, err := c.client.CoreV1().Events("team-a").Get(ctx, createdEv.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		assertCoreMatchesEvents(t, viaCore, createdEv)
	})

	t.Run("RBAC", func(t *testing.T) {
		alice := c.impersonating(t, "alice")
		if _, err := alice.EventsV1().Events("team-a").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
			t.Fatalf("alice without rights: want 403, got %v", err)
		}
		mustCreate(t, func() error {
			_, err := c.client.RbacV1().Roles("team-a").Create(ctx, &rbacv1.Role{
				ObjectMeta: metav1.ObjectMeta{Name: "event-reader"},
				Rules: []rbacv1.PolicyRule{{
					APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"get", "list", "watch"},
				}},
			}, metav1.CreateOptions{})
			return err
		})
		mustCreate(t, func() error {
			_, err := c.client.RbacV1().RoleBindings("team-a").Create(ctx, &rbacv1.RoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: "alice-reads-events"},
				RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "event-reader"},
				Subjects:   []rbacv1.Subject{{Kind: "User", Name: "alice", APIGroup: "rbac.authorization.k8s.io"}},
			}, metav1.CreateOptions{})
			return err
		})
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			_, err := alice.EventsV1().Events("team-a").List(ctx, metav1.ListOptions{})
			return err == nil, nil
		})
		if err != nil {
			t.Fatalf("alice with get,list,watch in team-a cannot list there: %v", err)
		}
		if _, err := alice.EventsV1().Events("team-b").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
			t.Fatalf("alice in team-b: want 403, got %v", err)
		}
		if _, err := alice.EventsV1().Events("team-a").Create(ctx, schedulerStyleEvent("team-a", "by-alice"), metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
			t.Fatalf("alice creating: want 403, got %v", err)
		}
	})

	t.Run("event-apiserver authorizes by itself", func(t *testing.T) {
		// Straight to event-apiserver as the front proxy, bypassing
		// kube-apiserver's own authorization: the delegated
		// SubjectAccessReview must still refuse alice in team-b.
		status, body := c.frontProxyGet(t, "alice", "/apis/events.k8s.io/v1/namespaces/team-b/events")
		if status != http.StatusForbidden {
			t.Fatalf("alice in team-b via front proxy: want 403, got %d: %s", status, body)
		}
		if status, body := c.frontProxyGet(t, "alice", "/apis/events.k8s.io/v1/namespaces/team-a/events"); status != http.StatusOK {
			t.Fatalf("alice in team-a via front proxy: want 200, got %d: %s", status, body)
		}
		// Anonymous, straight to event-apiserver: refused.
		status, body = c.anonymousGet(t, "/apis/events.k8s.io/v1/namespaces/team-a/events")
		if status != http.StatusForbidden && status != http.StatusUnauthorized {
			t.Fatalf("anonymous to event-apiserver: want 401 or 403, got %d: %s", status, body)
		}
		// Anonymous through kube-apiserver: refused there.
		anon := &rest.Config{Host: c.kube.URL, TLSClientConfig: rest.TLSClientConfig{CAData: c.kube.CAData}}
		anonClient, err := kubernetes.NewForConfig(anon)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := anonClient.EventsV1().Events("team-a").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) && !apierrors.IsUnauthorized(err) {
			t.Fatalf("anonymous through kube-apiserver: want 401 or 403, got %v", err)
		}
	})

	t.Run("namespace lifecycle", func(t *testing.T) {
		_, errEvents := c.client.EventsV1().Events("does-not-exist").Create(ctx, schedulerStyleEvent("does-not-exist", "x"), metav1.CreateOptions{})
		_, errCore := c.client.CoreV1().Events("does-not-exist").Create(ctx, recorderStyleCoreEvent("does-not-exist", "x"), metav1.CreateOptions{})
		t.Logf("missing namespace: event-apiserver: %v; kube-apiserver: %v", errEvents, errCore)
		assertSameStatus(t, errCore, errEvents)
		if !apierrors.IsNotFound(errEvents) {
			t.Fatalf("missing namespace: want 404, got %v", errEvents)
		}

		// Without a namespace controller the "kubernetes" finalizer keeps
		// a deleted namespace terminating, which is what we need.
		c.createNamespace(t, "leaving")
		if err := c.client.CoreV1().Namespaces().Delete(ctx, "leaving", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		var errTerminating error
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			_, errTerminating = c.client.EventsV1().Events("leaving").Create(ctx, schedulerStyleEvent("leaving", "late"), metav1.CreateOptions{})
			return apierrors.IsForbidden(errTerminating), nil
		})
		if err != nil {
			t.Fatalf("terminating namespace: want 403, last answer %v", errTerminating)
		}
		_, errCoreTerminating := c.client.CoreV1().Events("leaving").Create(ctx, recorderStyleCoreEvent("leaving", "late"), metav1.CreateOptions{})
		t.Logf("terminating namespace: event-apiserver: %v; kube-apiserver: %v", errTerminating, errCoreTerminating)
		// kube-apiserver names the resource of the request: "events" for
		// core/v1, "events.events.k8s.io" for what reached us.
		wantStatus := errCoreTerminating.(apierrors.APIStatus).Status()
		wantStatus.Message = strings.Replace(wantStatus.Message, `events "late"`, `events.events.k8s.io "late"`, 1)
		assertSameStatus(t, &apierrors.StatusError{ErrStatus: wantStatus}, errTerminating)
	})

	// kube-apiserver alone, serving events.k8s.io/v1 itself, for what the
	// subtests below compare.
	plain := framework.StartKubeAPIServer(t, framework.KubeAPIServerOptions{})

	t.Run("request sequence against kube-apiserver alone", func(t *testing.T) {
		// core/v1 goes to kube-apiserver in both clusters, events.k8s.io/v1
		// to us through the aggregation layer in one and to kube-apiserver
		// itself in the other; the answers must not tell them apart.
		const ns = "compat-sequence"
		c.createNamespace(t, ns)
		if _, err := plain.Client(t).CoreV1().Namespaces().Create(ctx,
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		compareRequestSequence(t, newRawClient(t, c.kube.RestConfig(), c.kube.AdminToken),
			newRawClient(t, plain.RestConfig(), plain.AdminToken), ns)
	})

	t.Run("ValidatingAdmissionPolicy", func(t *testing.T) {
		// The cluster's policies apply to the Events we serve, as they do
		// to kube-apiserver's own: our admission chain reads them from
		// kube-apiserver.
		clusters := map[string]kubernetes.Interface{"event-apiserver": c.client, "kube-apiserver": plain.Client(t)}
		for _, client := range clusters {
			createNoteDenyingPolicy(ctx, t, client)
		}
		refused := map[string]error{}
		for who, client := range clusters {
			err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
				ev := schedulerStyleEvent("default", uniqueName("denied"))
				ev.Note = "a forbidden note"
				_, refused[who] = client.EventsV1().Events("default").Create(ctx, ev, metav1.CreateOptions{})
				// A validation without a reason refuses with 422 Invalid.
				return apierrors.IsInvalid(refused[who]), nil
			})
			if err != nil {
				t.Fatalf("%s never applied the policy: %v (last answer %v)", who, err, refused[who])
			}
		}
		// Names differ; the rest of the Status must not.
		for who, err := range refused {
			if status, ok := err.(apierrors.APIStatus); ok {
				s := status.Status()
				s.Message = strings.Replace(s.Message, s.Details.Name, "<name>", 1)
				s.Details.Name = ""
				refused[who] = &apierrors.StatusError{ErrStatus: s}
			}
		}
		assertSameStatus(t, refused["kube-apiserver"], refused["event-apiserver"])
		if _, err := c.client.EventsV1().Events("default").Create(ctx, schedulerStyleEvent("default", "allowed"), metav1.CreateOptions{}); err != nil {
			t.Errorf("an Event the policy allows: %v", err)
		}
	})
}

// createNoteDenyingPolicy installs a ValidatingAdmissionPolicy, and its
// binding, that refuses events.k8s.io/v1 Events whose note says
// "forbidden".
func createNoteDenyingPolicy(ctx context.Context, t *testing.T, client kubernetes.Interface) {
	t.Helper()
	fail := admissionregistrationv1.Fail
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "no-forbidden-notes"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{"events.k8s.io"}, APIVersions: []string{"v1"}, Resources: []string{"events"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{Expression: "!object.note.contains('forbidden')", Message: "notes may not say forbidden"}},
		},
	}
	if _, err := client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "no-forbidden-notes"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        policy.Name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
	if _, err := client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func testKubectlThroughAggregator(t *testing.T, c *aggregatedCluster, bin, name string) {
	kc := c.kube.KubeconfigPath
	run := func(args ...string) string {
		t.Helper()
		stdout, stderr, err := kubectlAt(t, bin, kc, nil, args...)
		out := stdout + stderr
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}

	out := run("api-resources", "--api-group=events.k8s.io")
	if !strings.Contains(out, "events.k8s.io/v1") {
		t.Fatalf("api-resources does not list events.k8s.io/v1:\n%s", out)
	}
	out = run("get", "apiservice", "v1.events.k8s.io")
	if !strings.Contains(out, aggregatedServiceNamespace+"/event-apiserver") || !strings.Contains(out, "True") {
		t.Fatalf("APIService not served by event-apiserver or not Available:\n%s", out)
	}

	manifest := filepath.Join(t.TempDir(), "event.yaml")
	ev := schedulerStyleEvent("team-a", name)
	ev.APIVersion, ev.Kind = "events.k8s.io/v1", "Event"
	data, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(manifest, data, 0o600); err != nil {
		t.Fatal(err)
	}
	run("create", "-f", manifest)
	out = run("get", "events.v1.events.k8s.io", "-n", "team-a", name, "-o", "jsonpath={.note}")
	if out != ev.Note {
		t.Fatalf("get: note %q, want %q", out, ev.Note)
	}
	selector := "regarding.name=" + ev.Regarding.Name + ",reason=" + ev.Reason
	out = run("get", "events.events.k8s.io", "-n", "team-a", "--field-selector", selector, "-o", "name")
	if !strings.Contains(out, name) {
		t.Fatalf("list with --field-selector %s misses %s:\n%s", selector, name, out)
	}
	out = run("get", "events.events.k8s.io", "-A", "--field-selector", "regarding.name=nobody", "-o", "name")
	if strings.TrimSpace(out) != "" {
		t.Fatalf("list with a selector nothing matches returned:\n%s", out)
	}
	run("label", "events.events.k8s.io", "-n", "team-a", name, "checked=yes")
	run("patch", "events.events.k8s.io", "-n", "team-a", name, "--type=merge",
		"-p", `{"series":{"count":2,"lastObservedTime":"2026-11-22T10:00:00.000000Z"}}`)
	got, err := c.client.EventsV1().Events("team-a").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Labels["checked"] != "yes" || got.Series == nil || got.Series.Count != 2 {
		t.Fatalf("after label and patch: labels %v series %+v", got.Labels, got.Series)
	}

	// A watch through kube-apiserver sees a change made through it.
	watcher, err := c.client.EventsV1().Events("team-a").Watch(context.Background(), metav1.ListOptions{
		FieldSelector: "metadata.name=" + name, ResourceVersion: got.ResourceVersion,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Stop()
	run("delete", "events.events.k8s.io", "-n", "team-a", name)
	select {
	case e := <-watcher.ResultChan():
		if e.Type != watch.Deleted {
			t.Fatalf("watch: want DELETED, got %s %v", e.Type, e.Object)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("watch through kube-apiserver saw no DELETED within 30s")
	}
}

// frontProxyGet calls event-apiserver directly as kube-apiserver's front
// proxy does: the front-proxy client certificate and X-Remote-* headers.
func (c *aggregatedCluster) frontProxyGet(t *testing.T, user, path string) (int, string) {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(c.kube.FrontProxyClientCertFile, c.kube.FrontProxyClientKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	return c.eventsGet(t, path, []tls.Certificate{cert}, map[string]string{
		"X-Remote-User":  user,
		"X-Remote-Group": "system:authenticated",
	})
}

func (c *aggregatedCluster) anonymousGet(t *testing.T, path string) (int, string) {
	t.Helper()
	return c.eventsGet(t, path, nil, nil)
}

func (c *aggregatedCluster) eventsGet(t *testing.T, path string, certs []tls.Certificate, headers map[string]string) (int, string) {
	t.Helper()
	ca, err := os.ReadFile(c.events.CACertFile())
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	client := &http.Client{
		Timeout:   30 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: certs}},
	}
	req, err := http.NewRequest(http.MethodGet, c.events.URL+path, nil)
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

// assertSameStatus compares what a client sees of two API errors.
func assertSameStatus(t *testing.T, want, got error) {
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

// assertCoreMatchesEvents checks that one stored Event reads the same
// through both APIs, field by field under each version's names.
func assertCoreMatchesEvents(t *testing.T, core *corev1.Event, ev *eventsv1.Event) {
	t.Helper()
	checks := []struct {
		field      string
		core, envt interface{}
	}{
		{"metadata", core.ObjectMeta, ev.ObjectMeta},
		{"involvedObject/regarding", core.InvolvedObject, ev.Regarding},
		{"message/note", core.Message, ev.Note},
		{"source/deprecatedSource", core.Source, ev.DeprecatedSource},
		{"firstTimestamp", core.FirstTimestamp, ev.DeprecatedFirstTimestamp},
		{"lastTimestamp", core.LastTimestamp, ev.DeprecatedLastTimestamp},
		{"count", core.Count, ev.DeprecatedCount},
		{"reason", core.Reason, ev.Reason},
		{"type", core.Type, ev.Type},
		{"eventTime", core.EventTime, ev.EventTime},
		{"action", core.Action, ev.Action},
		{"related", core.Related, ev.Related},
		{"reportingController", core.ReportingController, ev.ReportingController},
		{"reportingInstance", core.ReportingInstance, ev.ReportingInstance},
	}
	for _, c := range checks {
		if !apiequality.Semantic.DeepEqual(c.core, c.envt) {
			t.Errorf("%s: core/v1 %#v, events.k8s.io/v1 %#v", c.field, c.core, c.envt)
		}
	}
	switch {
	case core.Series == nil && ev.Series == nil:
	case core.Series == nil || ev.Series == nil:
		t.Errorf("series: core/v1 %+v, events.k8s.io/v1 %+v", core.Series, ev.Series)
	case core.Series.Count != ev.Series.Count || !core.Series.LastObservedTime.Equal(&ev.Series.LastObservedTime):
		t.Errorf("series: core/v1 %+v, events.k8s.io/v1 %+v", core.Series, ev.Series)
	}
}

// recorderStyleCoreEvent is what client-go's tools/record writes.
func recorderStyleCoreEvent(namespace, name string) *corev1.Event {
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	return &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		InvolvedObject: corev1.ObjectReference{
			Kind: "Pod", Namespace: namespace, Name: "web-0", UID: types.UID("uid-web-0"), APIVersion: "v1",
			ResourceVersion: "42", FieldPath: "spec.containers{web}",
		},
		Reason:              "BackOff",
		Message:             "Back-off restarting failed container",
		Source:              corev1.EventSource{Component: "kubelet", Host: "node-1"},
		FirstTimestamp:      now,
		LastTimestamp:       now,
		Count:               3,
		Type:                corev1.EventTypeWarning,
		ReportingController: "kubelet",
		ReportingInstance:   "node-1",
	}
}

// schedulerStyleEvent is what client-go's tools/events writes.
func schedulerStyleEvent(namespace, name string) *eventsv1.Event {
	return &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: name, Namespace: namespace},
		EventTime:           metav1.NewMicroTime(time.Now().Truncate(time.Microsecond)),
		ReportingController: "default-scheduler",
		ReportingInstance:   "default-scheduler-node-1",
		Action:              "Scheduling",
		Reason:              "FailedScheduling",
		Regarding:           corev1.ObjectReference{Kind: "Pod", Namespace: namespace, Name: "web-1", UID: types.UID("uid-web-1"), APIVersion: "v1"},
		Related:             &corev1.ObjectReference{Kind: "Node", Name: "node-2", UID: types.UID("uid-node-2"), APIVersion: "v1"},
		Note:                "0/3 nodes are available",
		Type:                corev1.EventTypeWarning,
	}
}
