package history

import (
	"github.com/eventapiserver/event-apiserver/test/integration/framework"

	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	historyv1alpha1 "github.com/eventapiserver/event-apiserver/pkg/apis/history/v1alpha1"
	historyclient "github.com/eventapiserver/event-apiserver/pkg/generated/clientset/versioned/typed/history/v1alpha1"
)

// TestHistoryCountsRBAC counts Events kube-apiserver wrote into the shared
// etcd, through the aggregator, so that authorization is kube-apiserver's
// RBAC through SubjectAccessReview: a user bound to deploy's eventrecords
// role in one namespace gets counts there that agree with listing the
// records, and 403 in another namespace and across namespaces (though it
// may create counts everywhere: the server refuses to read what the user
// may not list), where the admin's counts hold the other namespace's
// records.
func TestHistoryCountsRBAC(t *testing.T) {
	t.Parallel()
	c := framework.StartAggregatedCluster(t, framework.AggregatedClusterOptions{})
	ctx := framework.PollCtx(t)
	c.RegisterHistoryAPIService(t)

	mine, theirs := framework.UniqueName("counts-mine"), framework.UniqueName("counts-theirs")
	reasons := map[string][]string{mine: {"BackOff", "BackOff", "BackOff", "Started"}, theirs: {"FailedMount", "FailedMount"}}
	for _, ns := range []string{mine, theirs} {
		c.CreateNamespace(t, ns)
		for i, reason := range reasons[ns] {
			if _, err := c.Client.CoreV1().Events(ns).Create(ctx, &corev1.Event{
				ObjectMeta:     metav1.ObjectMeta{Name: fmt.Sprint("ev-", i)},
				InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: fmt.Sprint("p", i)},
				Reason:         reason, Message: "counted", Type: corev1.EventTypeWarning, Count: 1, LastTimestamp: metav1.Now(),
			}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	admin, err := historyclient.NewForConfig(c.Kube.RestConfig())
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{mine, theirs} {
		err := wait.PollUntilContextTimeout(ctx, framework.PollInterval, 90*time.Second, true, func(ctx context.Context) (bool, error) {
			list, err := admin.EventRecords(ns).List(ctx, metav1.ListOptions{})
			return err == nil && len(list.Items) == len(reasons[ns]), nil
		})
		if err != nil {
			t.Fatalf("the Events of %s never all showed in history: %v", ns, err)
		}
	}

	spec := historyv1alpha1.EventRecordCountSpec{GroupBy: []string{"reason"}, FieldSelector: "type=Warning,since=1h"}
	// counts answers the question of spec as the history client c asks it,
	// in namespace ns ("" across namespaces), as reason:count.
	counts := func(client historyclient.HistoryV1alpha1Interface, ns string) (map[string]int64, error) {
		var status historyv1alpha1.EventRecordCountStatus
		if ns == "" {
			got, err := client.ClusterEventRecordCounts().Create(ctx, &historyv1alpha1.ClusterEventRecordCount{Spec: spec}, metav1.CreateOptions{})
			if err != nil {
				return nil, err
			}
			status = got.Status
		} else {
			got, err := client.EventRecordCounts(ns).Create(ctx, &historyv1alpha1.EventRecordCount{Spec: spec}, metav1.CreateOptions{})
			if err != nil {
				return nil, err
			}
			status = got.Status
		}
		out := map[string]int64{}
		var sum int64
		for _, g := range status.Groups {
			out[g.Values[0]] = g.Total
		}
		for _, b := range status.Buckets {
			for _, n := range b.Counts {
				sum += n
			}
		}
		if sum != status.Total-status.Other {
			return nil, fmt.Errorf("buckets add up to %d, groups to %d", sum, status.Total-status.Other)
		}
		return out, nil
	}

	user := framework.UniqueName("counter")
	impersonated, err := historyclient.NewForConfig(c.ImpersonatingConfig(user))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := counts(impersonated, mine); !apierrors.IsForbidden(err) {
		t.Fatalf("a user without RBAC counted: %v, want 403", err)
	}
	var role rbacv1.ClusterRole
	framework.FromUnstructured(t, framework.FindObject(t, framework.SplitManifests(t, framework.RenderOverlay(t, "overlays/aggregated")), "ClusterRole", "event-apiserver:eventrecords-view"), &role)
	if _, err := c.Client.RbacV1().ClusterRoles().Create(ctx, &role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.RbacV1().RoleBindings(mine).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "history-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: "User", Name: user}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// May ask for counts anywhere, so that only the server's own check
	// (list on the eventrecords counted) stands between the user and a
	// count elsewhere.
	if _, err := c.Client.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: user},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{historyv1alpha1.GroupName},
			Resources: []string{"eventrecordcounts", "clustereventrecordcounts"}, Verbs: []string{"create"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: user},
		Subjects:   []rbacv1.Subject{{Kind: "User", Name: user}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var got map[string]int64
	var last error
	err = wait.PollUntilContextTimeout(ctx, framework.PollInterval, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		got, last = counts(impersonated, mine)
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("a user bound to deploy's eventrecords role cannot count in its namespace: %v (%v)", err, last)
	}
	if want := map[string]int64{"BackOff": 3, "Started": 1}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("counts in %s: %v, want %v", mine, got, want)
	}
	// kube-apiserver's authorization filter's words, with the eventrecords
	// the count would read; until the ClusterRoleBinding reaches
	// kube-apiserver's RBAC cache, its filter refuses the create instead.
	want := fmt.Sprintf(`User %q cannot list resource "eventrecords" in API group "history.eventapiserver.io"`, user)
	for _, ns := range []string{theirs, ""} {
		var last error
		err := wait.PollUntilContextTimeout(ctx, framework.PollInterval, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			var got map[string]int64
			got, last = counts(impersonated, ns)
			if last == nil {
				return false, fmt.Errorf("counted %v", got)
			}
			return apierrors.IsForbidden(last) && strings.Contains(last.Error(), want), nil
		})
		if err != nil {
			t.Errorf("a user with list in %s only, counting in %q: %v (%v), want 403 saying %q", mine, ns, err, last, want)
		}
	}
	all, err := counts(admin, "")
	if err != nil {
		t.Fatal(err)
	}
	if all["FailedMount"] < 2 || all["BackOff"] < 3 {
		t.Errorf("the admin's counts across namespaces miss records: %v", all)
	}
	// A spec the store cannot count exactly is refused, naming the field.
	spec.GroupBy = []string{"note"}
	if _, err := counts(admin, mine); !apierrors.IsInvalid(err) {
		t.Errorf("groupBy note: %v, want 422", err)
	}
}
