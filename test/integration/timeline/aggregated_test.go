package timeline

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	historyv1alpha1 "github.com/eventapiserver/event-apiserver/pkg/apis/history/v1alpha1"
	historyclient "github.com/eventapiserver/event-apiserver/pkg/generated/clientset/versioned/typed/history/v1alpha1"
	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// TestTimelineAggregated runs kubectl-timeline against kube-apiserver with
// event-apiserver behind it, the production shape (docs/aggregated.md):
// TYPE resolves through kube-apiserver's discovery; before history's
// APIService is registered the plugin says history is not installed (404)
// and shows the live Event; after, the Event shows once from both sources;
// a user who may read Events but not eventrecords (403) is told so and
// still sees the live Event.
func TestTimelineAggregated(t *testing.T) {
	t.Parallel()
	plugin := timelineBinary(t)
	c := framework.StartAggregatedCluster(t, framework.AggregatedClusterOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns := framework.UniqueName("timeline-agg")
	c.CreateNamespace(t, ns)
	// Written through kube-apiserver, which keeps core/v1 Events in the
	// events etcd it shares with event-apiserver, whose capture keeps them.
	e := timelineEvent("web-0.scheduled", "Pod", "web-0", "uid-agg-web-0", "Scheduled", "Normal", "default-scheduler", time.Now().Add(-time.Minute))
	e.InvolvedObject.Namespace = ns
	if _, err := c.Client.CoreV1().Events(ns).Create(ctx, e, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, string) {
		t.Helper()
		stdout, stderr, err := framework.KubectlAt(t, plugin, c.Kube.KubeconfigPath, nil, args...)
		if err != nil {
			t.Fatalf("kubectl-timeline %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, stdout, stderr)
		}
		return stdout, stderr
	}
	assertLiveEventShown := func(name, stdout string) {
		t.Helper()
		if lines := strings.Split(strings.TrimSpace(stdout), "\n"); len(lines) != 2 || !strings.Contains(lines[1], "Scheduled") || !strings.Contains(lines[1], "uid-agg-web-0") {
			t.Errorf("%s: stdout does not show the live Event once:\n%s", name, stdout)
		}
	}

	stdout, stderr := run("pods/web-0", "-n", ns)
	if !strings.Contains(stderr, "history is not installed on this server") {
		t.Errorf("without history's APIService: stderr %q", stderr)
	}
	assertLiveEventShown("without history's APIService", stdout)

	c.RegisterHistoryAPIService(t)
	// Once history, through the aggregator, holds the version the live
	// API serves, the plugin shows it once from both sources, without a
	// word on stderr.
	var records []historyv1alpha1.EventRecord
	err := wait.PollUntilContextTimeout(ctx, framework.PollInterval, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		var listErr error
		records, listErr = listRecordsThrough(ctx, c, ns)
		return listErr == nil && len(records) == 1, nil
	})
	if err != nil {
		t.Fatalf("history never held web-0's Event through the aggregator: %v (%+v)", err, records)
	}
	stdout, stderr = run("pod/web-0", "-n", ns, "-o", "json")
	var list historyv1alpha1.EventRecordList
	if err := json.Unmarshal([]byte(stdout), &list); err != nil {
		t.Fatal(err)
	}
	if stderr != "" || len(list.Items) != 1 || list.Items[0].Event.ResourceVersion != records[0].Event.ResourceVersion || !list.Items[0].Live {
		t.Errorf("with history: stderr %q, %d records (want the live version %s once)", stderr, len(list.Items), records[0].Event.ResourceVersion)
	}

	reader := framework.UniqueName("timeline-reader")
	if _, err := c.Client.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "events-reader"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"get", "list", "watch"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "events-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "events-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: reader}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	as := []string{"--as=" + reader, "--as-group=system:authenticated"}
	var runErr error
	err = wait.PollUntilContextTimeout(ctx, framework.PollInterval, 30*time.Second, true, func(context.Context) (bool, error) {
		stdout, stderr, runErr = framework.KubectlAt(t, plugin, c.Kube.KubeconfigPath, nil, append([]string{"pod/web-0", "-n", ns}, as...)...)
		return runErr == nil, nil
	})
	if err != nil {
		t.Fatalf("a user who may list Events: %v (%v)\n%s\n%s", err, runErr, stdout, stderr)
	}
	if !strings.Contains(stderr, "you may not list history in namespace "+ns) || !strings.Contains(stderr, "showing live Events only") {
		t.Errorf("a user who may not list eventrecords: stderr %q", stderr)
	}
	assertLiveEventShown("a user who may not list eventrecords", stdout)
}

// listRecordsThrough lists web-0's records in ns through kube-apiserver's
// aggregator.
func listRecordsThrough(ctx context.Context, c *framework.AggregatedCluster, ns string) ([]historyv1alpha1.EventRecord, error) {
	client, err := historyclient.NewForConfig(c.Kube.RestConfig())
	if err != nil {
		return nil, err
	}
	list, err := client.EventRecords(ns).List(ctx, metav1.ListOptions{FieldSelector: "regarding.kind=Pod,regarding.name=web-0"})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}
