package history

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	historyv1alpha1 "github.com/eventapiserver/event-apiserver/pkg/apis/history/v1alpha1"
	historyclient "github.com/eventapiserver/event-apiserver/pkg/generated/clientset/versioned/typed/history/v1alpha1"
	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// TestHistoryAggregated serves history.eventapiserver.io through
// kube-apiserver's aggregator, and captures the core/v1 Events that
// kube-apiserver itself writes into the shared events etcd. RBAC on
// eventrecords is kube-apiserver's, through SubjectAccessReview.
func TestHistoryAggregated(t *testing.T) {
	t.Parallel()
	c := framework.StartAggregatedCluster(t, framework.AggregatedClusterOptions{})
	ctx := framework.PollCtx(t)
	c.RegisterHistoryAPIService(t)

	ns := framework.UniqueName("history-agg")
	c.CreateNamespace(t, ns)
	// Written by kube-apiserver (core/v1 stays there), read from etcd by our capture.
	if _, err := c.Client.CoreV1().Events(ns).Create(ctx, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "by-kube-apiserver"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "p", UID: "uid-agg"},
		Reason:         "Started", Message: "written through kube-apiserver", Type: corev1.EventTypeNormal, Count: 1, LastTimestamp: metav1.Now(),
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// eventrecords in ns through the aggregator, as user ("": the admin).
	eventRecords := func(user string) historyclient.EventRecordInterface {
		config := c.Kube.RestConfig()
		if user != "" {
			config = c.ImpersonatingConfig(user)
		}
		client, err := historyclient.NewForConfig(config)
		if err != nil {
			t.Fatal(err)
		}
		return client.EventRecords(ns)
	}
	records := &historyv1alpha1.EventRecordList{}
	err := wait.PollUntilContextTimeout(ctx, framework.PollInterval, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := eventRecords("").List(ctx, metav1.ListOptions{FieldSelector: "regarding.uid=uid-agg"})
		if err != nil {
			return false, nil
		}
		records = list
		return len(records.Items) == 1, nil
	})
	if err != nil {
		t.Fatalf("the Event kube-apiserver wrote never showed in history through the aggregator: %v (%+v)", err, records)
	}
	if got := records.Items[0].Event.Note; got != "written through kube-apiserver" {
		t.Errorf("note %q", got)
	}

	user := framework.UniqueName("reader")
	_, forbidden := eventRecords(user).List(ctx, metav1.ListOptions{})
	if !apierrors.IsForbidden(forbidden) {
		t.Fatalf("a user without RBAC on eventrecords: %v, want 403", forbidden)
	}
	// The ClusterRole deploy/ installs, bound as the view ClusterRole it
	// aggregates into would be (aggregation itself is kube-controller-
	// manager's, which this cluster does not run).
	var role rbacv1.ClusterRole
	framework.FromUnstructured(t, framework.FindObject(t, framework.SplitManifests(t, framework.RenderOverlay(t, "overlays/aggregated")), "ClusterRole", "event-apiserver:eventrecords-view"), &role)
	for _, label := range []string{"aggregate-to-view", "aggregate-to-edit", "aggregate-to-admin"} {
		if role.Labels["rbac.authorization.k8s.io/"+label] != "true" {
			t.Errorf("deploy's eventrecords ClusterRole is not labelled %s: %v", label, role.Labels)
		}
	}
	if _, err := c.Client.RbacV1().ClusterRoles().Create(ctx, &role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "history-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: "User", Name: user}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, framework.PollInterval, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := eventRecords(user).List(ctx, metav1.ListOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("a user granted get/list on eventrecords still cannot list them: %v", err)
	}
}
