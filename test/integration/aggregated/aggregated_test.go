package aggregated

import (
	"context"
	"encoding/json"
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
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

func TestAggregated(t *testing.T) {
	t.Parallel()
	c := framework.StartAggregatedCluster(t, framework.AggregatedClusterOptions{})
	ctx := context.Background()
	c.CreateNamespace(t, "team-a")
	c.CreateNamespace(t, "team-b")

	t.Run("kubectl", func(t *testing.T) {
		t.Run("preinstalled", func(t *testing.T) {
			testKubectlThroughAggregator(t, c, framework.PreinstalledKubectl(t), "kubectl-preinstalled")
		})
		t.Run("v1.36.3", func(t *testing.T) {
			testKubectlThroughAggregator(t, c, framework.KubectlBinary(t), "kubectl-built")
		})
	})

	t.Run("one Event through both paths", func(t *testing.T) {
		// Written through kube-apiserver's own core/v1, read through
		// events.k8s.io/v1, which event-apiserver serves from the same etcd.
		core := framework.RecorderStyleCoreEvent("team-a", "through-core")
		created, err := c.Client.CoreV1().Events("team-a").Create(ctx, core, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		viaEvents, err := c.Client.EventsV1().Events("team-a").Get(ctx, created.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		assertCoreMatchesEvents(t, created, viaEvents)

		// And the other way round.
		ev := framework.SchedulerStyleEvent("team-a", "through-events")
		createdEv, err := c.Client.EventsV1().Events("team-a").Create(ctx, ev, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		viaCore, err := c.Client.CoreV1().Events("team-a").Get(ctx, createdEv.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		assertCoreMatchesEvents(t, viaCore, createdEv)
	})

	t.Run("RBAC", func(t *testing.T) {
		alice := c.Impersonating(t, "alice")
		if _, err := alice.EventsV1().Events("team-a").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
			t.Fatalf("alice without rights: want 403, got %v", err)
		}
		framework.MustCreate(t, func() error {
			_, err := c.Client.RbacV1().Roles("team-a").Create(ctx, &rbacv1.Role{
				ObjectMeta: metav1.ObjectMeta{Name: "event-reader"},
				Rules: []rbacv1.PolicyRule{{
					APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"get", "list", "watch"},
				}},
			}, metav1.CreateOptions{})
			return err
		})
		framework.MustCreate(t, func() error {
			_, err := c.Client.RbacV1().RoleBindings("team-a").Create(ctx, &rbacv1.RoleBinding{
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
		if _, err := alice.EventsV1().Events("team-a").Create(ctx, framework.SchedulerStyleEvent("team-a", "by-alice"), metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
			t.Fatalf("alice creating: want 403, got %v", err)
		}
	})

	t.Run("event-apiserver authorizes by itself", func(t *testing.T) {
		// Straight to event-apiserver as the front proxy, bypassing
		// kube-apiserver's own authorization: the delegated
		// SubjectAccessReview must still refuse alice in team-b.
		status, body := c.FrontProxyGet(t, "alice", "/apis/events.k8s.io/v1/namespaces/team-b/events")
		if status != http.StatusForbidden {
			t.Fatalf("alice in team-b via front proxy: want 403, got %d: %s", status, body)
		}
		if status, body := c.FrontProxyGet(t, "alice", "/apis/events.k8s.io/v1/namespaces/team-a/events"); status != http.StatusOK {
			t.Fatalf("alice in team-a via front proxy: want 200, got %d: %s", status, body)
		}
		// Anonymous, straight to event-apiserver: refused.
		status, body = c.AnonymousGet(t, "/apis/events.k8s.io/v1/namespaces/team-a/events")
		if status != http.StatusForbidden && status != http.StatusUnauthorized {
			t.Fatalf("anonymous to event-apiserver: want 401 or 403, got %d: %s", status, body)
		}
		// Anonymous through kube-apiserver: refused there.
		anon := &rest.Config{Host: c.Kube.URL, TLSClientConfig: rest.TLSClientConfig{CAData: c.Kube.CAData}}
		anonClient, err := kubernetes.NewForConfig(anon)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := anonClient.EventsV1().Events("team-a").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) && !apierrors.IsUnauthorized(err) {
			t.Fatalf("anonymous through kube-apiserver: want 401 or 403, got %v", err)
		}
	})

	t.Run("namespace lifecycle", func(t *testing.T) {
		_, errEvents := c.Client.EventsV1().Events("does-not-exist").Create(ctx, framework.SchedulerStyleEvent("does-not-exist", "x"), metav1.CreateOptions{})
		_, errCore := c.Client.CoreV1().Events("does-not-exist").Create(ctx, framework.RecorderStyleCoreEvent("does-not-exist", "x"), metav1.CreateOptions{})
		t.Logf("missing namespace: event-apiserver: %v; kube-apiserver: %v", errEvents, errCore)
		framework.AssertSameStatus(t, errCore, errEvents)
		if !apierrors.IsNotFound(errEvents) {
			t.Fatalf("missing namespace: want 404, got %v", errEvents)
		}

		// Without a namespace controller the "kubernetes" finalizer keeps
		// a deleted namespace terminating, which is what we need.
		c.CreateNamespace(t, "leaving")
		if err := c.Client.CoreV1().Namespaces().Delete(ctx, "leaving", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		var errTerminating error
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			_, errTerminating = c.Client.EventsV1().Events("leaving").Create(ctx, framework.SchedulerStyleEvent("leaving", "late"), metav1.CreateOptions{})
			return apierrors.IsForbidden(errTerminating), nil
		})
		if err != nil {
			t.Fatalf("terminating namespace: want 403, last answer %v", errTerminating)
		}
		_, errCoreTerminating := c.Client.CoreV1().Events("leaving").Create(ctx, framework.RecorderStyleCoreEvent("leaving", "late"), metav1.CreateOptions{})
		t.Logf("terminating namespace: event-apiserver: %v; kube-apiserver: %v", errTerminating, errCoreTerminating)
		// kube-apiserver names the resource of the request: "events" for
		// core/v1, "events.events.k8s.io" for what reached us.
		wantStatus := errCoreTerminating.(apierrors.APIStatus).Status()
		wantStatus.Message = strings.Replace(wantStatus.Message, `events "late"`, `events.events.k8s.io "late"`, 1)
		framework.AssertSameStatus(t, &apierrors.StatusError{ErrStatus: wantStatus}, errTerminating)
	})

	// kube-apiserver alone, serving events.k8s.io/v1 itself, for what the
	// subtests below compare.
	plain := framework.StartKubeAPIServer(t, framework.KubeAPIServerOptions{})

	t.Run("request sequence against kube-apiserver alone", func(t *testing.T) {
		// core/v1 goes to kube-apiserver in both clusters, events.k8s.io/v1
		// to us through the aggregation layer in one and to kube-apiserver
		// itself in the other; the answers must not tell them apart.
		const ns = "compat-sequence"
		c.CreateNamespace(t, ns)
		if _, err := plain.Client(t).CoreV1().Namespaces().Create(ctx,
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		framework.CompareRequestSequence(t, framework.NewRawClient(t, c.Kube.RestConfig(), c.Kube.AdminToken),
			framework.NewRawClient(t, plain.RestConfig(), plain.AdminToken), ns)
	})

	t.Run("ValidatingAdmissionPolicy", func(t *testing.T) {
		// The cluster's policies apply to the Events we serve, as they do
		// to kube-apiserver's own: our admission chain reads them from
		// kube-apiserver.
		clusters := map[string]kubernetes.Interface{"event-apiserver": c.Client, "kube-apiserver": plain.Client(t)}
		for _, client := range clusters {
			createNoteDenyingPolicy(ctx, t, client)
		}
		refused := map[string]error{}
		for who, client := range clusters {
			err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
				ev := framework.SchedulerStyleEvent("default", framework.UniqueName("denied"))
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
		framework.AssertSameStatus(t, refused["kube-apiserver"], refused["event-apiserver"])
		if _, err := c.Client.EventsV1().Events("default").Create(ctx, framework.SchedulerStyleEvent("default", "allowed"), metav1.CreateOptions{}); err != nil {
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

func testKubectlThroughAggregator(t *testing.T, c *framework.AggregatedCluster, bin, name string) {
	kc := c.Kube.KubeconfigPath
	run := func(args ...string) string {
		t.Helper()
		stdout, stderr, err := framework.KubectlAt(t, bin, kc, nil, args...)
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
	if !strings.Contains(out, framework.AggregatedServiceNamespace+"/event-apiserver") || !strings.Contains(out, "True") {
		t.Fatalf("APIService not served by event-apiserver or not Available:\n%s", out)
	}

	manifest := filepath.Join(t.TempDir(), "event.yaml")
	ev := framework.SchedulerStyleEvent("team-a", name)
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
	got, err := c.Client.EventsV1().Events("team-a").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Labels["checked"] != "yes" || got.Series == nil || got.Series.Count != 2 {
		t.Fatalf("after label and patch: labels %v series %+v", got.Labels, got.Series)
	}

	// A watch through kube-apiserver sees a change made through it.
	watcher, err := c.Client.EventsV1().Events("team-a").Watch(context.Background(), metav1.ListOptions{
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
