package timeline

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/eventapiserver/event-apiserver/internal/pgtest"
	historyv1alpha1 "github.com/eventapiserver/event-apiserver/pkg/apis/history/v1alpha1"
	historyclient "github.com/eventapiserver/event-apiserver/pkg/generated/clientset/versioned/typed/history/v1alpha1"
	"github.com/eventapiserver/event-apiserver/pkg/history/fleet"
	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// TestTimelineWebFleet drives the overview's cluster picker against a
// fleet's hub on PostgreSQL (history-only in cluster a,
// --history-cluster-name=a) with one member, b: a second kube-apiserver on
// a's etcd under its own --etcd-prefix, one etcd fewer than TestFleet's
// shape for the same two clusters' records. The same two Events are
// written in each. The picker lists a and b; picking b narrows the counts
// (still the API's numbers), the drill-down and the story to b's records;
// with -A the page counts every namespace (ClusterEventRecordCount).
// A person who may read b only cannot count across clusters: the page
// offers a field for a cluster's name, shows the API's 403 for a, and b's
// chart for b.
func TestTimelineWebFleet(t *testing.T) {
	t.Parallel()
	chromium := chromiumBinary(t)
	plugin := timelineBinary(t)
	ctx := framework.TestCtx(t)
	dsn := pgtest.Start(t)
	kube := framework.StartKubeAPIServer(t, framework.KubeAPIServerOptions{})
	client := kube.Client(t)
	const fleetNamespace, ns = "event-history-fleet", "apps"
	for _, name := range []string{fleetNamespace, ns} {
		if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	memberKube := framework.StartKubeAPIServer(t, framework.KubeAPIServerOptions{
		EtcdServers: kube.Etcd.ClientURL(), ExtraFlags: []string{"--etcd-prefix=/member-b"}})
	memberClient := memberKube.Client(t)
	if _, err := memberClient.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The member's admin kubeconfig: what the hub may do with it is not
	// under test here (TestFleet's members read Events only).
	member, err := os.ReadFile(memberKube.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Secrets(fleetNamespace).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "member-b", Labels: map[string]string{fleet.MemberLabel: "b"}},
		Data:       map[string][]byte{fleet.KubeconfigKey: member},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	hub := framework.StartHistoryOnlyReplica(t, kube, []string{"--history-store=postgres", "--history-dsn=" + dsn,
		"--history-cluster-name=a", "--history-fleet-namespace=" + fleetNamespace})
	// b's reader: eventrecords and their counts, and of the clusters b
	// alone (resourceNames on the virtual resource clusters).
	const reader = "overview-reader-b"
	if _, err := client.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: reader}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{historyv1alpha1.GroupName}, Resources: []string{"eventrecords"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{historyv1alpha1.GroupName}, Resources: []string{"eventrecordcounts", "clustereventrecordcounts"}, Verbs: []string{"create"}},
		{APIGroups: []string{historyv1alpha1.GroupName}, Resources: []string{"clusters"}, ResourceNames: []string{"b"}, Verbs: []string{"get"}},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: reader},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: reader},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: reader}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	at := time.Now().Add(-10 * time.Minute)
	for _, e := range []*corev1.Event{
		timelineEvent("web.backoff", "Pod", "web", "5b1d7c1e-0000-4000-8000-00000000b001", "BackOff", "Warning", "kubelet", at),
		timelineEvent("web.pulled", "Pod", "web", "5b1d7c1e-0000-4000-8000-00000000b001", "Pulled", "Normal", "kubelet", at.Add(time.Minute)),
	} {
		e.InvolvedObject.Namespace = ns
		for _, c := range []*kubernetes.Clientset{client, memberClient} {
			if _, err := c.CoreV1().Events(ns).Create(ctx, e.DeepCopy(), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	admin := hub.RestConfig(kube.AdminToken)
	counts, err := historyclient.NewForConfig(admin)
	if err != nil {
		t.Fatal(err)
	}
	var held string
	err = wait.PollUntilContextTimeout(ctx, framework.PollInterval, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := counts.EventRecordCounts(ns).Create(ctx, &historyv1alpha1.EventRecordCount{Spec: historyv1alpha1.EventRecordCountSpec{GroupBy: []string{"cluster"}}}, metav1.CreateOptions{})
		var now string
		if err != nil {
			now = err.Error()
		} else {
			var n []string
			for _, g := range got.Status.Groups {
				n = append(n, fmt.Sprintf("%s=%d", g.Values[0], g.Total))
			}
			now = strings.Join(n, " ")
		}
		if now != held && !strings.Contains(now, "rate limiter") {
			t.Logf("the hub's count by cluster: %s", now)
			held = now
		}
		return now == "a=2 b=2", nil
	})
	if err != nil {
		t.Fatalf("the hub never held both Events in both clusters (last count: %s): %v", held, err)
	}
	browser := startBrowser(t, chromium)
	kubeconfig := hub.Kubeconfig(t, kube.AdminToken)

	t.Run("the picker narrows the counts, the drill-down and the story to one cluster", func(t *testing.T) {
		page := startTimelineWeb(t, ctx, plugin, kubeconfig, "-n", ns)
		defer page.stop(t)
		tab := browser.open(t, page.url)
		options := tab.eval(t, `[...document.querySelectorAll('select#cluster option')].map((o) => o.value || '(all)').join(' ')`)
		if options != "(all) a b" {
			t.Fatalf("the picker offers %q, want all, a and b", options)
		}
		if all := readPageCounts(t, tab); all.Total != 4 {
			t.Errorf("every cluster's chart counts %d, want 4", all.Total)
		}
		tab.eval(t, `{ const s = document.querySelector('select#cluster'); s.value = 'b'; s.dispatchEvent(new Event('change')); } "ok"`)
		waitPage(t, tab, `document.body.dataset.state === 'ready' && document.querySelector('p.query').dataset.fieldSelector.includes('cluster=b')`)
		picked := readPageCounts(t, tab)
		compareToAPI(t, ctx, admin, ns, picked)
		if picked.Total != 2 {
			t.Errorf("b's chart counts %d, want 2", picked.Total)
		}
		tab.screenshot(t, "timeline-web-overview-cluster")
		tab.do(t, chromedp.Focus(chromedp.CSS(`.bars .seg[tabindex="0"]`)), chromedp.KeyEvent(kb.Enter))
		waitPage(t, tab, `document.querySelector('section.drill').dataset.state === 'ready'`)
		if cells := tab.eval(t, `[...document.querySelectorAll('section.drill table.objects tbody tr')].map((r) => r.dataset.name + '/' + r.cells[2].textContent).join(' ')`); cells != "web/b" {
			t.Errorf("b's segment lists %q, want web of b", cells)
		}
		if href := tab.eval(t, `document.querySelector('section.drill a.story-link').getAttribute('href')`); !strings.Contains(href, "cluster=b") {
			t.Errorf("the story link %q is not b's", href)
		}
		tab.do(t, chromedp.Click(chromedp.CSS(`section.drill a.story-link`)))
		waitPage(t, tab, `document.getElementById('title').textContent === 'Pod web' && document.body.dataset.state === 'ready'`)
		if n := tab.count(t, ".chart .mark"); n != 2 {
			t.Errorf("b's story of web draws %d marks, want its 2 Events", n)
		}
		if sub := tab.text(t, "#subtitle"); !strings.Contains(sub, "of cluster b") {
			t.Errorf("the story's subtitle %q does not name cluster b", sub)
		}
		tab.screenshot(t, "timeline-web-story-cluster")
	})

	t.Run("with -A, every namespace's, from ClusterEventRecordCount", func(t *testing.T) {
		page := startTimelineWeb(t, ctx, plugin, kubeconfig, "-A")
		defer page.stop(t)
		tab := browser.open(t, page.url)
		counts := readPageCounts(t, tab)
		compareToAPI(t, ctx, admin, "", counts)
		if counts.Total != 4 {
			t.Errorf("every namespace of both clusters counts %d, want 4", counts.Total)
		}
		if sub := tab.text(t, "#subtitle"); !strings.HasPrefix(sub, "in every namespace") {
			t.Errorf("subtitle %q", sub)
		}
	})

	t.Run("--cluster opens the page on one cluster, the picker still offers the others", func(t *testing.T) {
		page := startTimelineWeb(t, ctx, plugin, kubeconfig, "-A", "--cluster=b")
		defer page.stop(t)
		tab := browser.open(t, page.url)
		waitPage(t, tab, `document.body.dataset.state === 'ready' && document.querySelector('p.query').dataset.fieldSelector.includes('cluster=b')`)
		counts := readPageCounts(t, tab)
		compareToAPI(t, ctx, admin, "", counts)
		if counts.Total != 2 {
			t.Errorf("b's chart counts %d, want 2", counts.Total)
		}
		if picked := tab.eval(t, `document.querySelector('select#cluster').value`); picked != "b" {
			t.Errorf("the picker shows %q, want b", picked)
		}
	})

	t.Run("a reader of b alone names b, and sees the API's 403 for a", func(t *testing.T) {
		page := startTimelineWeb(t, ctx, plugin, kubeconfig, "-n", ns, "--as="+reader, "--as-group=system:authenticated")
		defer page.stop(t)
		tab := browser.open(t, page.url)
		if n := tab.count(t, "input#cluster"); n != 1 {
			t.Fatalf("no field to name a cluster: %s", tab.text(t, "#view"))
		}
		if notices := tab.text(t, "#notices"); !strings.Contains(notices, "you may not count across every cluster") {
			t.Errorf("notices %q", notices)
		}
		as := hub.RestConfig(kube.AdminToken)
		as.Impersonate.UserName, as.Impersonate.Groups = reader, []string{"system:authenticated"}
		readerClient, err := historyclient.NewForConfig(as)
		if err != nil {
			t.Fatal(err)
		}
		_, apiErr := readerClient.EventRecordCounts(ns).Create(ctx, &historyv1alpha1.EventRecordCount{Spec: historyv1alpha1.EventRecordCountSpec{
			FieldSelector: "cluster=a,since=24h", GroupBy: []string{"reason"}}}, metav1.CreateOptions{})
		if apiErr == nil {
			t.Fatal("b's reader counted a's records")
		}
		name := func(cluster string) {
			tab.eval(t, fmt.Sprintf(`{ const i = document.querySelector('input#cluster'); i.value = %q; i.dispatchEvent(new Event('change')); } "ok"`, cluster))
		}
		name("a")
		waitPage(t, tab, `document.body.dataset.state === 'error' && document.getElementById('subtitle').textContent.includes('of cluster a')`)
		if heading, message := tab.text(t, ".error h2"), tab.text(t, ".error .message"); !strings.Contains(heading, "403") || message != apiErr.Error() {
			t.Errorf("cluster a shows %q: %q, want 403: %q", heading, message, apiErr.Error())
		}
		tab.screenshot(t, "timeline-web-overview-cluster-forbidden")
		name("b")
		waitPage(t, tab, `document.body.dataset.state === 'ready' && document.querySelector('p.query').dataset.fieldSelector.includes('cluster=b')`)
		if got := readPageCounts(t, tab); got.Total != 2 {
			t.Errorf("b's chart for b's reader counts %d, want 2", got.Total)
		}
	})
}
