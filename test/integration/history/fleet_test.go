package history

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/eventapiserver/event-apiserver/internal/pgtest"
	"github.com/eventapiserver/event-apiserver/internal/testbed"
	historyv1alpha1 "github.com/eventapiserver/event-apiserver/pkg/apis/history/v1alpha1"
	"github.com/eventapiserver/event-apiserver/pkg/history/fleet"
	"github.com/eventapiserver/event-apiserver/pkg/standalone"
	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// TestFleet: three real kube-apiservers v1.36.3, a, b and c, each with its
// own etcd, and one history-only hub on PostgreSQL running in cluster a
// (--history-cluster-name=a), whose fleet namespace holds kubeconfig Secrets
// for its members; the Events of a and b are written once the hub captures
// them, so every version is in history. Each member's credentials are a ServiceAccount token
// allowed to list and watch Events, nothing else. client-go's tools/record
// writes a BackOff twice and a Pulled once in every cluster, and
// `kubectl get eventrecords -A --field-selector cluster=b,reason=BackOff`
// on the hub finds exactly b's two versions. A person of cluster a bound
// (RBAC resourceNames on history.eventapiserver.io's clusters) to b's
// records lists and watches b's and gets 403 for a's, for a list or watch
// naming no cluster, and 404 for a record of a by name. Then, without restarting the
// hub, member c is added (its Events, written before, come with its first
// relist, as each is then) and member b removed (its capture and metrics stop: an Event
// written in b afterwards is not captured, one in c is). Last, c's
// kube-apiserver is stopped for two minutes: the hub stays ready and still
// captures a; once c is back, every version c served before and after is in
// history exactly once. In between, kubectl timeline --cluster tells the
// story, the feed, a search and a summary of one pod name of a and b apart.
func TestFleet(t *testing.T) {
	t.Parallel()
	// Each wait bounds itself; the test as a whole takes minutes.
	ctx := framework.TestCtx(t)
	dsn := pgtest.Start(t)
	clusters := map[string]*framework.KubeAPIServer{}
	for _, name := range []string{"a", "b", "c"} {
		clusters[name] = framework.StartKubeAPIServer(t, framework.KubeAPIServerOptions{})
	}
	hubCluster := clusters["a"].Client(t)
	const fleetNamespace, appNamespace = "event-history-fleet", "apps"
	for name, kube := range clusters {
		if _, err := kube.Client(t).CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: appNamespace}}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	// c's, before it joins the fleet: its first relist finds each Event as
	// it is then, the versions before are not in history (as for any
	// history-only server started on a cluster with Events).
	recordFleetEvents(ctx, t, clusters["c"].Client(t), appNamespace, "web-c", "BackOff", 2)
	recordFleetEvents(ctx, t, clusters["c"].Client(t), appNamespace, "web-c", "Pulled", 1)
	if _, err := hubCluster.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fleetNamespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	addMember := func(name string) {
		t.Helper()
		secret := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "member-" + name, Namespace: fleetNamespace, Labels: map[string]string{fleet.MemberLabel: name}},
			Data:       map[string][]byte{fleet.KubeconfigKey: eventReaderKubeconfig(ctx, t, clusters[name])},
		}
		if _, err := hubCluster.CoreV1().Secrets(fleetNamespace).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	addMember("b")

	hub := framework.StartHistoryOnlyReplica(t, clusters["a"], []string{"--history-store=postgres", "--history-dsn=" + dsn,
		"--history-cluster-name=a", "--history-fleet-namespace=" + fleetNamespace})
	// The hub is ready once its own cluster's starting point is stored; a
	// member's capture has stored its own once its captured revision shows.
	capturing := func(member string) {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, framework.PollInterval, framework.PollTimeout, true, func(context.Context) (bool, error) {
			return hub.Metric(t, `event_apiserver_history_capture_revision{source="`+fleet.SourcePrefix+member+`"}`) > 0, nil
		})
		if err != nil {
			t.Fatalf("member %s's capture has not stored its starting point: %v", member, err)
		}
	}
	capturing("b")
	for _, name := range []string{"a", "b"} {
		client := clusters[name].Client(t)
		recordFleetEvents(ctx, t, client, appNamespace, "web-"+name, "BackOff", 2)
		recordFleetEvents(ctx, t, client, appNamespace, "web-"+name, "Pulled", 1)
	}
	kubeconfig := hub.Kubeconfig(t, clusters["a"].AdminToken)
	records := func(selector string) []string {
		t.Helper()
		out, stderr, err := framework.Kubectl(t, kubeconfig, "get", "eventrecords", "-A", "--field-selector", selector,
			"-o", `jsonpath={range .items[*]}{.cluster}/{.event.regarding.name}/{.event.reason}/{.event.deprecatedCount}{"\n"}{end}`)
		if err != nil {
			t.Fatalf("kubectl get eventrecords --field-selector %s: %v\n%s", selector, err, stderr)
		}
		lines := strings.Fields(out)
		slices.Sort(lines)
		return lines
	}
	waitRecords := func(what, selector string, want ...string) {
		t.Helper()
		var got []string
		err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(context.Context) (bool, error) {
			got = records(selector)
			return slices.Equal(got, want), nil
		})
		if err != nil {
			t.Fatalf("%s: --field-selector %s found %v, want %v", what, selector, got, want)
		}
	}

	t.Run("the cluster on every record", func(t *testing.T) {
		waitRecords("b's BackOffs", "cluster=b,reason=BackOff", "b/web-b/BackOff/1", "b/web-b/BackOff/2")
		// In the test's namespace: kube-apiserver records Events of its
		// own, as ClusterIPNotAllocated for the kubernetes Service when its
		// IP repair runs first after a restart (CI, 2026-11-29 10:05).
		waitRecords("the hub's own cluster", "cluster=a,metadata.namespace="+appNamespace, "a/web-a/BackOff/1", "a/web-a/BackOff/2", "a/web-a/Pulled/1")
		waitRecords("every BackOff", "reason=BackOff,cluster in (a,b,c)",
			"a/web-a/BackOff/1", "a/web-a/BackOff/2", "b/web-b/BackOff/1", "b/web-b/BackOff/2")
		waitRecords("not b", "cluster!=b,reason=Pulled", "a/web-a/Pulled/1")
	})

	t.Run("who sees what", func(t *testing.T) {
		// A person of the hub's cluster bound to member b's records alone:
		// RBAC resourceNames on the virtual resource clusters.
		token := clusterReaderToken(ctx, t, hubCluster, "reader-b", "b")
		reader := &framework.RawClient{BaseURL: hub.Client.BaseURL, Token: token, HTTP: hub.Client.HTTP}
		const records = "/apis/history.eventapiserver.io/v1alpha1/eventrecords"
		get := func(path string, query url.Values) framework.Response {
			t.Helper()
			if query != nil {
				path += "?" + query.Encode()
			}
			return reader.Do(t, http.MethodGet, path, nil, map[string]string{"Accept": "application/json"})
		}
		inApps := records[:len(records)-len("/eventrecords")] + "/namespaces/" + appNamespace + "/eventrecords"
		if resp := get(inApps, url.Values{"fieldSelector": {"cluster=b"}}); resp.Code != http.StatusOK ||
			strings.Count(string(resp.Body), `"cluster":"b"`) != 3 || strings.Contains(string(resp.Body), `"cluster":"a"`) {
			t.Errorf("b's reader lists b's records: %d %s", resp.Code, resp.Body)
		}
		for _, query := range []url.Values{
			{"fieldSelector": {"cluster=a"}},
			{"fieldSelector": {"cluster in (a,b)"}},
			{"fieldSelector": {"cluster!=a"}},
			nil,
			{"fieldSelector": {"cluster=a"}, "watch": {"1"}},
			{"watch": {"1"}},
		} {
			if resp := get(records, query); resp.Code != http.StatusForbidden {
				t.Errorf("b's reader, %v: %d %s, want 403", query, resp.Code, resp.Body)
			}
		}
		if resp := get(records, url.Values{"fieldSelector": {"cluster=b"}, "watch": {"1"}, "timeoutSeconds": {"1"}}); resp.Code != http.StatusOK ||
			!strings.Contains(string(resp.Body), `"cluster":"b"`) || strings.Contains(string(resp.Body), `"cluster":"a"`) {
			t.Errorf("b's reader watches b's records: %d %s", resp.Code, resp.Body)
		}
		// Counts tell no more than lists: b's are b's reader's, and a
		// count that would take in a's records is refused, not cut to b's.
		count := func(kind, path, selector string) framework.Response {
			t.Helper()
			body, err := json.Marshal(map[string]any{
				"apiVersion": historyv1alpha1.SchemeGroupVersion.String(), "kind": kind,
				"spec": historyv1alpha1.EventRecordCountSpec{FieldSelector: selector, GroupBy: []string{"cluster"}}})
			if err != nil {
				t.Fatal(err)
			}
			return reader.Do(t, http.MethodPost, path, body, map[string]string{"Accept": "application/json", "Content-Type": "application/json"})
		}
		inAppsCounts := strings.TrimSuffix(inApps, "eventrecords") + "eventrecordcounts"
		if resp := count("EventRecordCount", inAppsCounts, "cluster=b"); resp.Code != http.StatusCreated || !strings.Contains(string(resp.Body), `"total":3`) {
			t.Errorf("b's reader counts b's records: %d %s, want 201 with total 3", resp.Code, resp.Body)
		}
		for _, selector := range []string{"cluster=a", "cluster in (a,b)", "cluster!=b", ""} {
			if resp := count("EventRecordCount", inAppsCounts, selector); resp.Code != http.StatusForbidden {
				t.Errorf("b's reader counts %q in %s by cluster: %d %s, want 403", selector, appNamespace, resp.Code, resp.Body)
			}
		}
		everywhere := strings.TrimSuffix(records, "eventrecords") + "clustereventrecordcounts"
		if resp := count("ClusterEventRecordCount", everywhere, "cluster=a"); resp.Code != http.StatusForbidden {
			t.Errorf("b's reader counts a's records in every namespace: %d %s, want 403", resp.Code, resp.Body)
		}
		// A record of a by name: not found, not forbidden, which would
		// tell that it exists.
		name := strings.TrimSpace(framework.MustKubectl(t, kubeconfig, "get", "eventrecords", "-n", appNamespace, "--field-selector", "cluster=a",
			"-o", "jsonpath={.items[0].metadata.name}"))
		if resp := get(inApps+"/"+name, nil); resp.Code != http.StatusNotFound {
			t.Errorf("b's reader gets a's record %s: %d %s, want 404", name, resp.Code, resp.Body)
		}
	})

	t.Run("kubectl timeline --cluster", func(t *testing.T) {
		// One pod name in a and b: --cluster tells their stories apart.
		const ns, pod = "timeline", "web-shared"
		for _, name := range []string{"a", "b"} {
			if _, err := clusters[name].Client(t).CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
		recordFleetEvents(ctx, t, hubCluster, ns, pod, "Scheduled", 1)
		recordFleetEvents(ctx, t, clusters["b"].Client(t), ns, pod, "BackOff", 2)
		waitRecords("the shared pod's", "regarding.name="+pod+",cluster in (a,b)", "a/"+pod+"/Scheduled/1", "b/"+pod+"/BackOff/1", "b/"+pod+"/BackOff/2")
		plugin, err := testbed.TimelineBinary()
		if err != nil {
			t.Fatal(err)
		}
		timeline := func(args ...string) string {
			t.Helper()
			stdout, stderr, err := framework.KubectlAt(t, plugin, kubeconfig, nil, args...)
			if err != nil {
				t.Fatalf("kubectl-timeline %s: %v\n%s\n%s", strings.Join(args, " "), err, stdout, stderr)
			}
			return stdout
		}
		// story is cluster/reason/count of each Event the timeline shows.
		story := func(args ...string) []string {
			t.Helper()
			var list historyv1alpha1.EventRecordList
			// None found is said on stderr, as kubectl events says it.
			if out := timeline(append(args, "-o", "json")...); out != "" {
				if err := json.Unmarshal([]byte(out), &list); err != nil {
					t.Fatal(err)
				}
			}
			var got []string
			for _, r := range list.Items {
				got = append(got, fmt.Sprintf("%s/%s/%d", r.Cluster, r.Event.Reason, r.Event.DeprecatedCount))
			}
			return got
		}
		for _, tc := range []struct {
			args []string
			want []string
		}{
			{[]string{"--cluster=b"}, []string{"b/BackOff/2"}},
			// The hub's own cluster, by the name its records carry.
			{[]string{"--cluster=a"}, []string{"a/Scheduled/1"}},
			{[]string{"--cluster=b", "--since=1h", "--search=occurrence of backoff"}, []string{"b/BackOff/2"}},
			{[]string{"--cluster=c"}, nil},
		} {
			if got := story(append([]string{"pod/" + pod, "-n", ns}, tc.args...)...); !slices.Equal(got, tc.want) {
				t.Errorf("kubectl timeline pod/%s %v: %v, want %v", pod, tc.args, got, tc.want)
			}
		}
		// summary counts versions: b's two BackOffs.
		var count historyv1alpha1.ClusterEventRecordCount
		if err := json.Unmarshal([]byte(timeline("summary", "-A", "--cluster=b", "--field-selector=regarding.name="+pod, "-o", "json")), &count); err != nil {
			t.Fatal(err)
		}
		if got := count.Status.Groups; count.Status.Total != 2 || len(got) != 1 || !slices.Equal(got[0].Values, []string{"BackOff"}) {
			t.Errorf("kubectl timeline summary --cluster=b: total %d, groups %+v; want BackOff's 2", count.Status.Total, got)
		}

		// The feed: b's next Event shows, a's (written first) does not.
		watch := framework.StartCommandWatch(t, plugin, kubeconfig, "pod/"+pod, "-n", ns, "--cluster=b", "-w")
		if err := watch.WaitPrinted(ctx, "BackOff", "2"); err != nil {
			t.Fatalf("kubectl timeline --cluster=b -w has not shown b's story: %v\n%s\n%s", err, watch.Output(), watch.Stderr())
		}
		recordFleetEvents(ctx, t, hubCluster, ns, pod, "Unhealthy", 1)
		waitRecords("a's Unhealthy", "regarding.name="+pod+",reason=Unhealthy,cluster=a", "a/"+pod+"/Unhealthy/1")
		recordFleetEvents(ctx, t, clusters["b"].Client(t), ns, pod, "Pulled", 1)
		if err := watch.WaitPrinted(ctx, "Pulled"); err != nil {
			t.Fatalf("kubectl timeline --cluster=b -w has not shown b's Pulled: %v\n%s\n%s", err, watch.Output(), watch.Stderr())
		}
		if out := watch.Output(); strings.Contains(out, "Unhealthy") || strings.Contains(out, "Scheduled") {
			t.Errorf("kubectl timeline --cluster=b -w shows a's Events:\n%s", out)
		}
	})

	t.Run("a member added and another removed without a restart", func(t *testing.T) {
		addMember("c")
		waitRecords("c's Events, written before it joined", "cluster=c", "c/web-c/BackOff/2", "c/web-c/Pulled/1")
		capturing("c")
		if err := hubCluster.CoreV1().Secrets(fleetNamespace).Delete(ctx, "member-b", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		// b's capture has stopped once its series are gone from /metrics.
		err := wait.PollUntilContextTimeout(ctx, framework.PollInterval, framework.PollTimeout, true, func(context.Context) (bool, error) {
			resp := hub.Client.Do(t, http.MethodGet, "/metrics", nil, nil)
			return resp.Code == http.StatusOK && !strings.Contains(string(resp.Body), `source="`+fleet.SourcePrefix+`b"`) &&
				strings.Contains(string(resp.Body), `source="`+fleet.SourcePrefix+`c"`), nil
		})
		if err != nil {
			t.Fatalf("b's capture still runs, or c's does not: %v", err)
		}
		recordFleetEvents(ctx, t, clusters["b"].Client(t), appNamespace, "after-b", "Killing", 1)
		recordFleetEvents(ctx, t, clusters["c"].Client(t), appNamespace, "after-c", "Killing", 1)
		waitRecords("c's Event after b left", "reason=Killing", "c/after-c/Killing/1")
	})

	t.Run("a member stopped two minutes and restarted", func(t *testing.T) {
		c := clusters["c"].Client(t)
		served := recordFleetEvents(ctx, t, c, appNamespace, "before-stop", "BackOff", 2)
		stopped := time.Now()
		if err := clusters["c"].Stop(); err != nil {
			t.Fatal(err)
		}
		recordFleetEvents(ctx, t, hubCluster, appNamespace, "while-c-down", "Started", 1)
		waitRecords("a's Event while c is down", "reason=Started", "a/while-c-down/Started/1")
		// Down for two minutes, the hub ready throughout.
		err := wait.PollUntilContextTimeout(ctx, 5*time.Second, 3*time.Minute, true, func(context.Context) (bool, error) {
			if resp := hub.Client.Do(t, http.MethodGet, "/readyz", nil, nil); resp.Code != http.StatusOK {
				return false, fmt.Errorf("hub /readyz with a member down: %d %s", resp.Code, resp.Body)
			}
			return time.Since(stopped) >= 2*time.Minute, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := clusters["c"].Restart(); err != nil {
			t.Fatal(err)
		}
		served = append(served, recordFleetEvents(ctx, t, c, appNamespace, "after-restart", "BackOff", 2)...)
		slices.Sort(served)
		// Every version c served, each exactly once (record names are
		// <event name>.<resourceVersion>, one per version).
		var got []string
		err = wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(context.Context) (bool, error) {
			out := framework.MustKubectl(t, kubeconfig, "get", "eventrecords", "-n", appNamespace,
				"--field-selector", "cluster=c,regarding.name in (before-stop,after-restart)", "-o", "jsonpath={.items[*].metadata.name}")
			got = strings.Fields(out)
			slices.Sort(got)
			return slices.Equal(got, served), nil
		})
		if err != nil {
			t.Fatalf("c's versions in history %v, want each of %v once", got, served)
		}
	})
}

// recordFleetEvents writes n occurrences of reason about pod in ns through
// client-go's tools/record, as a kubelet does, waiting after each until the
// cluster holds it, and returns the versions the cluster served, named as
// their records are (<event name>.<resourceVersion>): one per occurrence,
// nothing else writing the Event.
func recordFleetEvents(ctx context.Context, t *testing.T, client kubernetes.Interface, ns, pod, reason string, n int32) []string {
	t.Helper()
	uid := types.UID(fmt.Sprintf("uid-%s-%s", pod, reason))
	object := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: ns, UID: uid}}
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	defer broadcaster.Shutdown()
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kubelet", Host: "node-1"})
	eventType := corev1.EventTypeNormal
	if reason == "BackOff" {
		eventType = corev1.EventTypeWarning
	}
	var versions []string
	for i := int32(1); i <= n; i++ {
		recorder.Event(object, eventType, reason, "occurrence of "+reason)
		err := wait.PollUntilContextTimeout(ctx, framework.PollInterval, framework.PollTimeout, true, func(ctx context.Context) (bool, error) {
			list, err := client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.uid=" + string(uid)})
			if err != nil {
				return false, err
			}
			if len(list.Items) != 1 || list.Items[0].Count != i {
				return false, nil
			}
			versions = append(versions, list.Items[0].Name+"."+list.Items[0].ResourceVersion)
			return true, nil
		})
		if err != nil {
			t.Fatalf("waiting for %s of %s, count %d: %v", reason, pod, i, err)
		}
	}
	return versions
}

// eventReaderKubeconfig is a kubeconfig for kube whose credentials may list
// and watch Events in all namespaces and nothing else.
func eventReaderKubeconfig(ctx context.Context, t *testing.T, kube *framework.KubeAPIServer) []byte {
	t.Helper()
	token := serviceAccountToken(ctx, t, kube.Client(t), "event-history-hub",
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"list", "watch"}})
	path := filepath.Join(t.TempDir(), "member.kubeconfig")
	if err := standalone.WriteKubeconfig(path, kube.URL, kube.CAData, token); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// clusterReaderToken is a token of the hub's cluster allowed to read
// eventrecords, and of the clusters only those named (resourceNames on
// history.eventapiserver.io's clusters).
func clusterReaderToken(ctx context.Context, t *testing.T, client kubernetes.Interface, name string, clusters ...string) string {
	t.Helper()
	return serviceAccountToken(ctx, t, client, name,
		rbacv1.PolicyRule{APIGroups: []string{"history.eventapiserver.io"}, Resources: []string{"eventrecords"}, Verbs: []string{"get", "list", "watch"}},
		rbacv1.PolicyRule{APIGroups: []string{"history.eventapiserver.io"}, Resources: []string{"eventrecordcounts", "clustereventrecordcounts"}, Verbs: []string{"create"}},
		rbacv1.PolicyRule{APIGroups: []string{"history.eventapiserver.io"}, Resources: []string{"clusters"}, ResourceNames: clusters, Verbs: []string{"get"}})
}

// serviceAccountToken is an hour's token of a new ServiceAccount name of
// kube-system, bound to a ClusterRole of the same name with rules alone.
func serviceAccountToken(ctx context.Context, t *testing.T, client kubernetes.Interface, name string, rules ...rbacv1.PolicyRule) string {
	t.Helper()
	const ns = "kube-system"
	if _, err := client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}}}
	if _, err := client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	expiry := int64(3600)
	token, err := client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return token.Status.Token
}
