package timeline

import (
	"bufio"
	"context"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	historyclient "github.com/eventapiserver/event-apiserver/pkg/generated/clientset/versioned/typed/history/v1alpha1"
	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// TestTimelineWeb drives `kubectl timeline --web` in headless Chromium
// (Debian's chromium, which hack/install-test-packages.sh installs),
// against kube-apiserver with event-apiserver behind it, the production
// shape: one cluster and one browser for every case, each case a tab.
// Screenshots land in _output/screenshots.
func TestTimelineWeb(t *testing.T) {
	t.Parallel()
	chromium := chromiumBinary(t)
	plugin := timelineBinary(t)
	c := framework.StartAggregatedCluster(t, framework.AggregatedClusterOptions{})
	browser := startBrowser(t, chromium)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	ns := framework.UniqueName("timeline-web")
	c.CreateNamespace(t, ns)
	// Pods need their service account; no controller makes it here.
	framework.MustCreate(t, func() error {
		_, err := c.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
		return err
	})

	// web-0 three times over: each pod has its Events, the first two are
	// deleted, the third still exists.
	now := time.Now().Truncate(time.Second)
	var uids []types.UID
	for i, ago := range []time.Duration{5 * time.Hour, 3 * time.Hour, time.Hour} {
		pod, err := c.Client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "web-0"},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "web:1"}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		uids = append(uids, pod.UID)
		for j, e := range []*corev1.Event{
			timelineEvent(fmt.Sprintf("web-0.%d-scheduled", i), "Pod", "web-0", pod.UID, "Scheduled", "Normal", "default-scheduler", now.Add(-ago)),
			timelineEvent(fmt.Sprintf("web-0.%d-backoff", i), "Pod", "web-0", pod.UID, "BackOff", "Warning", "kubelet", now.Add(-ago+10*time.Minute)),
		} {
			e.InvolvedObject.Namespace = ns
			if j == 1 {
				e.Count, e.LastTimestamp = 7, metav1.NewTime(now.Add(-ago+40*time.Minute))
			}
			if _, err := c.Client.CoreV1().Events(ns).Create(ctx, e, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		if i < 2 {
			// Not bound to a node, so deleted at once.
			if err := c.Client.CoreV1().Pods(ns).Delete(ctx, "web-0", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}

	// Before history's APIService exists, the page says so and shows the
	// live Events.
	t.Run("without history", func(t *testing.T) {
		page := startTimelineWeb(t, ctx, plugin, c.Kube.KubeconfigPath, "pod/web-0", "-n", ns)
		tab := browser.open(t, page.url)
		notices := tab.text(t, "#notices")
		if !strings.Contains(notices, "History is not available") || !strings.Contains(notices, "history is not installed on this server") {
			t.Errorf("notices %q do not say history is missing", notices)
		}
		if n := tab.count(t, ".chart .mark"); n != 6 {
			t.Errorf("%d marks, want the 6 live Events", n)
		}
		tab.screenshot(t, "timeline-web-without-history")
		page.stop(t)
	})
	t.Run("without history, the overview lists the live Events' objects", func(t *testing.T) {
		testTimelineWebOverviewWithoutHistory(t, ctx, c, browser, plugin, ns)
	})

	c.RegisterHistoryAPIService(t)
	err := wait.PollUntilContextTimeout(ctx, framework.PollInterval, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		records, err := listRecordsThrough(ctx, c, ns)
		return err == nil && len(records) >= 6, nil
	})
	if err != nil {
		t.Fatalf("history never held web-0's Events through the aggregator: %v", err)
	}

	t.Run("a name reused by three pods shows three lanes, the earlier two deleted", func(t *testing.T) {
		page := startTimelineWeb(t, ctx, plugin, c.Kube.KubeconfigPath, "pod/web-0", "-n", ns)
		tab := browser.open(t, page.url)
		lanes := tab.attributes(t, "g.lane")
		if len(lanes) != 3 {
			t.Fatalf("%d lanes, want 3: %v", len(lanes), lanes)
		}
		for i, uid := range uids {
			want := "deleted"
			if i == 2 {
				want = "exists"
			}
			if lanes[i]["data-lane"] != string(uid) || lanes[i]["data-state"] != want {
				t.Errorf("lane %d: %s %s, want %s %s", i, lanes[i]["data-lane"], lanes[i]["data-state"], uid, want)
			}
		}
		// Each lane's marks: Scheduled as a Normal, BackOff as a Warning
		// series of 7 with its bar, each with its text alternative.
		if n := tab.count(t, ".chart .mark.normal"); n != 3 {
			t.Errorf("%d Normal marks, want 3", n)
		}
		if n := tab.count(t, ".chart .mark.warning"); n != 3 {
			t.Errorf("%d Warning marks, want 3", n)
		}
		if n := tab.count(t, ".chart .bar.warning"); n != 3 {
			t.Errorf("%d series bars, want 3", n)
		}
		label := tab.attributes(t, `.mark[data-name="web-0.1-backoff"]`)
		if len(label) != 1 || !strings.Contains(label[0]["aria-label"], "Warning BackOff, 7 times from") || !strings.Contains(label[0]["aria-label"], "reported by kubelet") {
			t.Errorf("the second pod's BackOff mark: %v", label)
		}
		// Keyboard: Tab reaches the first Event, the arrow keys move on,
		// and the focused Event's tooltip says what it is.
		tab.do(t, chromedp.Focus(chromedp.CSS(`.mark[tabindex="0"]`)), chromedp.KeyEvent(kb.ArrowRight))
		focused := tab.eval(t, `document.activeElement.dataset.name + " | " + document.getElementById('mark-tooltip').textContent`)
		if !strings.HasPrefix(focused, "web-0.0-backoff | ") || !strings.Contains(focused, "BackOff") || !strings.Contains(focused, "Reporterkubelet") {
			t.Errorf("after ArrowRight from the first Event: %q", focused)
		}
		// + zooms in around the focused Event, 0 goes back.
		before := tab.text(t, ".toolbar .range")
		rangeIs := func(want string, is bool) string {
			t.Helper()
			_, err := chromedp.Run(tab.ctx, chromedp.Poll[bool](fmt.Sprintf(`(document.querySelector('.toolbar .range').textContent === %q) === %v`, want, is),
				chromedp.WithPollingTimeout(10*time.Second)))
			if err != nil {
				t.Errorf("the shown range stayed %q (want it to be %q: %v)", tab.text(t, ".toolbar .range"), want, is)
			}
			return tab.text(t, ".toolbar .range")
		}
		tab.do(t, chromedp.KeyEvent("+"))
		t.Logf("+ zoomed from %s to %s", before, rangeIs(before, false))
		tab.do(t, chromedp.KeyEvent("0"))
		rangeIs(before, true)
		// Down twice to the third pod's lane, End to its last Event.
		tab.do(t, chromedp.KeyEvent(kb.ArrowDown), chromedp.KeyEvent(kb.ArrowDown), chromedp.KeyEvent(kb.End))
		if name := tab.eval(t, `document.activeElement.dataset.name`); name != "web-0.2-backoff" {
			t.Errorf("after ArrowDown, ArrowDown, End the focused Event is %q, want web-0.2-backoff", name)
		}
		tab.screenshot(t, "timeline-web-three-incarnations")
		// The table view lists the same six Events.
		tab.do(t, chromedp.Click(chromedp.CSS(`.toolbar button:nth-child(2)`)))
		if n := tab.count(t, "table.events tbody tr"); n != 6 {
			t.Errorf("the table lists %d Events, want 6", n)
		}
		tab.screenshot(t, "timeline-web-table")
		page.stop(t)
	})

	t.Run("the owner tree folds in what a Deployment owns", func(t *testing.T) {
		testTimelineWebOwners(t, ctx, c, browser, plugin, ns)
	})

	t.Run("a namespace's Events over time", func(t *testing.T) {
		testTimelineWebOverview(t, ctx, c, browser, plugin, ns)
	})

	t.Run("with -w a new Event appears as it is written", func(t *testing.T) {
		page := startTimelineWeb(t, ctx, plugin, c.Kube.KubeconfigPath, "pod/web-0", "-n", ns, "-w")
		tab := browser.open(t, page.url)
		tab.do(t, chromedp.WaitVisible(chromedp.CSS(`.notice.watch`)))
		if text := tab.text(t, ".notice.watch"); !strings.Contains(text, "Following new Events") {
			t.Fatalf("watch notice %q", text)
		}
		// The page notes when the mark appears, so the delay is measured
		// in the browser, not by polling it.
		tab.eval(t, `window.markSeen = new Promise((resolve) => {
			const seen = () => document.querySelector('.mark[data-name="web-0.2-unhealthy"]');
			new MutationObserver((_, o) => { if (seen()) { o.disconnect(); resolve(Date.now()); } })
				.observe(document.getElementById('view'), { childList: true, subtree: true });
		}); "ok"`)
		e := timelineEvent("web-0.2-unhealthy", "Pod", "web-0", uids[2], "Unhealthy", "Warning", "kubelet", time.Now())
		e.InvolvedObject.Namespace = ns
		sent := time.Now()
		if _, err := c.Client.CoreV1().Events(ns).Create(ctx, e, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		seen, err := chromedp.Run(tab.ctx, chromedp.Evaluate[float64](`window.markSeen`, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatal(err)
		}
		delay := time.UnixMilli(int64(seen)).Sub(sent)
		t.Logf("a new Event's mark appeared in the page %v after its create was sent", delay)
		// Generous: the figure is reported; this bound only catches a page
		// that polls or waits for history's batches.
		if delay > 5*time.Second {
			t.Errorf("the new Event appeared %v after its create", delay)
		}
		tab.screenshot(t, "timeline-web-watch")
		page.stop(t)
	})

	t.Run("a user who may not read the namespace sees the API's 403", func(t *testing.T) {
		user := framework.UniqueName("web-outsider")
		page := startTimelineWeb(t, ctx, plugin, c.Kube.KubeconfigPath, "pod/web-0", "-n", ns, "--as="+user, "--as-group=system:authenticated")
		tab := browser.open(t, page.url)
		if state := tab.eval(t, `document.body.dataset.state`); state != "error" {
			t.Errorf("page state %q, want error", state)
		}
		heading, message := tab.text(t, ".error h2"), tab.text(t, ".error .message")
		want := fmt.Sprintf(`events is forbidden: User %q cannot list resource "events" in API group "" in the namespace %q`, user, ns)
		if !strings.Contains(heading, "403 Forbidden") || message != want {
			t.Errorf("error %q: %q, want 403 Forbidden: %q", heading, message, want)
		}
		tab.screenshot(t, "timeline-web-forbidden")
		page.stop(t)
	})

	t.Run("only the token opens it, and only on the loopback", func(t *testing.T) {
		page := startTimelineWeb(t, ctx, plugin, c.Kube.KubeconfigPath, "pod/web-0", "-n", ns)
		u, err := http.NewRequest(http.MethodGet, page.url, nil)
		if err != nil {
			t.Fatal(err)
		}
		host, token := u.URL.Host, strings.Trim(u.URL.Path, "/")
		get := func(path, hostHeader string) *http.Response {
			t.Helper()
			req, err := http.NewRequest(http.MethodGet, "http://"+host+path, nil)
			if err != nil {
				t.Fatal(err)
			}
			if hostHeader != "" {
				req.Host = hostHeader
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			return resp
		}
		_, port, _ := net.SplitHostPort(host)
		for _, tc := range []struct {
			name, path, host string
			code             int
		}{
			{"no token", "/", "", http.StatusForbidden},
			{"no token, an asset", "/app.js", "", http.StatusForbidden},
			{"no token, the API", "/api/story?kind=Pod&name=web-0&namespace=" + ns, "", http.StatusForbidden},
			{"a wrong token", "/" + strings.Repeat("A", len(token)) + "/", "", http.StatusForbidden},
			{"the token as a prefix", "/" + token + "x/", "", http.StatusForbidden},
			{"another host name (DNS rebinding)", "/" + token + "/", "rebound.example:" + port, http.StatusForbidden},
			{"the token", "/" + token + "/", "", http.StatusOK},
			{"the token, as localhost", "/" + token + "/app.js", "localhost:" + port, http.StatusOK},
		} {
			resp := get(tc.path, tc.host)
			if resp.StatusCode != tc.code {
				t.Errorf("%s: %d, want %d", tc.name, resp.StatusCode, tc.code)
			}
			if resp.Header.Get("Referrer-Policy") != "no-referrer" || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'none'") {
				t.Errorf("%s: Referrer-Policy %q, CSP %q", tc.name, resp.Header.Get("Referrer-Policy"), resp.Header.Get("Content-Security-Policy"))
			}
		}
		// In the browser too: the page without its token is a 403.
		tab := browser.tab(t)
		status, err := chromedp.Run(tab.ctx, chromedp.NavigateResponse("http://"+host+"/"))
		if err != nil {
			t.Fatal(err)
		}
		if status.Status != http.StatusForbidden {
			t.Errorf("the browser got %d without the token", status.Status)
		}
		// The plugin's listening sockets, from the kernel: all on
		// 127.0.0.1.
		listening := listeningAddresses(t, page.cmd.Process.Pid)
		if len(listening) == 0 {
			t.Fatal("the plugin listens on nothing")
		}
		for _, a := range listening {
			if a != "127.0.0.1:"+port {
				t.Errorf("the plugin listens on %s; want 127.0.0.1:%s only", a, port)
			}
		}
		page.stop(t)
	})
}

// testTimelineWebOwners builds a Deployment's tree by hand (no controller
// runs here): a ReplicaSet it owns and a Pod the ReplicaSet owns, each
// with an Event, and a Pod of the same labels owned by nothing, which must
// stay out. The Deployment's page draws the three objects' lanes, owned
// ones under their owner, and says what it cannot know.
func testTimelineWebOwners(t *testing.T, ctx context.Context, c *framework.AggregatedCluster, browser *testBrowser, plugin, ns string) {
	labels := map[string]string{"app": "shop"}
	deploy, err := c.Client.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "shop"},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "shop", Image: "shop:1"}}}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	controller := true
	owner := func(kind string, name string, uid types.UID, apiVersion string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid, Controller: &controller}}
	}
	rsLabels := map[string]string{"app": "shop", "pod-template-hash": "5d8f"}
	rs, err := c.Client.AppsV1().ReplicaSets(ns).Create(ctx, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "shop-5d8f", Labels: rsLabels, OwnerReferences: owner("Deployment", "shop", deploy.UID, "apps/v1")},
		Spec: appsv1.ReplicaSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: rsLabels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: rsLabels}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "shop", Image: "shop:1"}}}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod, err := c.Client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "shop-5d8f-x2k4p", Labels: rsLabels, OwnerReferences: owner("ReplicaSet", rs.Name, rs.UID, "apps/v1")},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "shop", Image: "shop:1"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stray, err := c.Client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "shop-stray", Labels: rsLabels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "shop", Image: "shop:1"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now().Add(-30 * time.Minute)
	for _, e := range []*corev1.Event{
		timelineEvent("shop.scaled", "Deployment", "shop", deploy.UID, "ScalingReplicaSet", "Normal", "deployment-controller", at),
		timelineEvent("shop-5d8f.created", "ReplicaSet", rs.Name, rs.UID, "SuccessfulCreate", "Normal", "replicaset-controller", at.Add(time.Minute)),
		timelineEvent("shop-5d8f-x2k4p.failed", "Pod", pod.Name, pod.UID, "FailedScheduling", "Warning", "default-scheduler", at.Add(2*time.Minute)),
		timelineEvent("shop-stray.scheduled", "Pod", stray.Name, stray.UID, "Scheduled", "Normal", "default-scheduler", at.Add(3*time.Minute)),
	} {
		e.InvolvedObject.Namespace = ns
		if e.InvolvedObject.Kind != "Pod" {
			e.InvolvedObject.APIVersion = "apps/v1"
		}
		if _, err := c.Client.CoreV1().Events(ns).Create(ctx, e, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The tree's Events come from history: wait until it holds them.
	err = wait.PollUntilContextTimeout(ctx, framework.PollInterval, time.Minute, true, func(ctx context.Context) (bool, error) {
		n, err := countRecordsThrough(ctx, c, ns, fmt.Sprintf("regarding.uid in (%s,%s)", rs.UID, pod.UID))
		return err == nil && n == 2, nil
	})
	if err != nil {
		t.Fatalf("history never held the ReplicaSet's and Pod's Events: %v", err)
	}

	page := startTimelineWeb(t, ctx, plugin, c.Kube.KubeconfigPath, "deployment/shop", "-n", ns)
	tab := browser.open(t, page.url)
	lanes := tab.attributes(t, "g.lane")
	var got []string
	for _, l := range lanes {
		got = append(got, l["data-lane"]+"/"+l["data-state"])
	}
	want := []string{string(deploy.UID) + "/exists", string(rs.UID) + "/exists", string(pod.UID) + "/exists"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("lanes %v, want the Deployment, its ReplicaSet and its Pod %v", got, want)
	}
	for _, name := range []string{"shop.scaled", "shop-5d8f.created", "shop-5d8f-x2k4p.failed"} {
		if tab.count(t, fmt.Sprintf(`.mark[data-name=%q]`, name)) != 1 {
			t.Errorf("no mark for %s", name)
		}
	}
	if tab.count(t, `.mark[data-name="shop-stray.scheduled"]`) != 0 {
		t.Error("a Pod the ReplicaSet does not own is folded in")
	}
	notices := tab.text(t, "#notices")
	if !strings.Contains(notices, "the ReplicaSets and Pods it owns now are folded in, 2 objects") || !strings.Contains(notices, "What it owned that is gone") {
		t.Errorf("notices %q do not say what the tree covers and what it cannot know", notices)
	}
	tab.screenshot(t, "timeline-web-owner-tree")
	// A lane's name leads to that object's own story.
	tab.do(t, chromedp.Click(chromedp.CSS(fmt.Sprintf(`g.lane[data-lane=%q] a.drill`, rs.UID))))
	_, err = chromedp.Run(tab.ctx, chromedp.Poll[bool](fmt.Sprintf(
		`document.getElementById('title').textContent === %q && document.body.dataset.state === 'ready'`, "ReplicaSet "+rs.Name),
		chromedp.WithPollingTimeout(20*time.Second)))
	if err != nil {
		t.Errorf("following the ReplicaSet's lane: %v; the title is %q", err, tab.text(t, "#title"))
	}
	lanes = tab.attributes(t, "g.lane")
	if len(lanes) != 2 || lanes[0]["data-lane"] != string(rs.UID) || lanes[1]["data-lane"] != string(pod.UID) {
		t.Errorf("the ReplicaSet's story has lanes %v, want the ReplicaSet's and its Pod's", lanes)
	}
	page.stop(t)
}

// countRecordsThrough counts the eventrecords in ns matching selector,
// through kube-apiserver's aggregator.
func countRecordsThrough(ctx context.Context, c *framework.AggregatedCluster, ns, selector string) (int, error) {
	client, err := historyclient.NewForConfig(c.Kube.RestConfig())
	if err != nil {
		return 0, err
	}
	list, err := client.EventRecords(ns).List(ctx, metav1.ListOptions{FieldSelector: selector})
	if err != nil {
		return 0, err
	}
	return len(list.Items), nil
}

// chromiumBinary is Debian's chromium, or the test skips: the browser
// tests need a real browser, and a download of one is not possible here.
func chromiumBinary(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	t.Skip("no chromium on PATH: hack/install-test-packages.sh installs Debian's chromium, which the browser tests drive")
	return ""
}

// testBrowser is one headless Chromium shared by a test's cases: starting
// it is the slow part, a tab is cheap.
type testBrowser struct {
	ctx context.Context
}

// startBrowser starts Chromium with the flags this machine needs (no
// sandbox as root, no GPU, none of its own network traffic, which the
// closed network refuses) and a fresh profile.
func startBrowser(t *testing.T, chromium string) *testBrowser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium),
		chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 720),
	)
	allocator, cancelAllocator := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocator)
	t.Cleanup(func() {
		cancel()
		cancelAllocator()
	})
	// The first action starts the browser; a failure here is Chromium
	// failing to run, which the test reports rather than skips.
	started := time.Now()
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting %s: %v", chromium, err)
	}
	t.Logf("Chromium started in %v", time.Since(started).Round(time.Millisecond))
	return &testBrowser{ctx: ctx}
}

// testTab is a browser tab.
type testTab struct {
	ctx context.Context
}

func (b *testBrowser) tab(t *testing.T) *testTab {
	t.Helper()
	ctx, cancel := chromedp.NewContext(b.ctx)
	ctx, cancelTimeout := context.WithTimeout(ctx, time.Minute)
	t.Cleanup(func() {
		cancelTimeout()
		cancel()
	})
	return &testTab{ctx: ctx}
}

// open loads url in a new tab and waits until the page has drawn its story
// or its error.
func (b *testBrowser) open(t *testing.T, url string) *testTab {
	t.Helper()
	tab := b.tab(t)
	tab.do(t, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS(`body[data-state="ready"], body[data-state="error"]`)))
	return tab
}

func (tab *testTab) do(t *testing.T, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(tab.ctx, actions...); err != nil {
		t.Fatal(err)
	}
}

func (tab *testTab) eval(t *testing.T, expression string) string {
	t.Helper()
	v, err := chromedp.Run(tab.ctx, chromedp.Evaluate[string](expression))
	if err != nil {
		t.Fatalf("%s: %v", expression, err)
	}
	return v
}

func (tab *testTab) count(t *testing.T, selector string) int {
	t.Helper()
	n, err := strconv.Atoi(tab.eval(t, fmt.Sprintf("String(document.querySelectorAll(%q).length)", selector)))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func (tab *testTab) text(t *testing.T, selector string) string {
	t.Helper()
	return tab.eval(t, fmt.Sprintf("(document.querySelector(%q) || {textContent: ''}).textContent.trim()", selector))
}

func (tab *testTab) attributes(t *testing.T, selector string) []map[string]string {
	t.Helper()
	v, err := chromedp.Run(tab.ctx, chromedp.Evaluate[[]map[string]string](fmt.Sprintf(
		"[...document.querySelectorAll(%q)].map((e) => Object.fromEntries([...e.attributes].map((a) => [a.name, a.value])))", selector)))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// screenshot saves the whole page as _output/screenshots/<name>.png.
func (tab *testTab) screenshot(t *testing.T, name string) {
	t.Helper()
	png, err := chromedp.Run(tab.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "_output", "screenshots")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// timelineWeb is a running `kubectl-timeline --web` and the URL it printed.
type timelineWeb struct {
	*timelineWatch
	url string
}

var pageURL = regexp.MustCompile(`http://127\.0\.0\.1:[0-9]+/[A-Za-z0-9_-]+/`)

// startTimelineWeb runs the plugin with --web (and no browser of its own)
// and reads the URL it prints.
func startTimelineWeb(t *testing.T, ctx context.Context, plugin, kubeconfig string, args ...string) *timelineWeb {
	t.Helper()
	w := startTimelineWatch(t, ctx, plugin, kubeconfig, append(args, "--web", "--browser=false")...)
	page := &timelineWeb{timelineWatch: w}
	w.waitFor(t, "the page's URL", func(line string) bool {
		page.url = pageURL.FindString(line)
		return page.url != ""
	})
	return page
}

// stop ends the server as Ctrl-C does, which must exit cleanly.
func (p *timelineWeb) stop(t *testing.T) {
	t.Helper()
	p.interrupt(t)
}

// listeningAddresses are the TCP addresses process pid listens on, read
// from the kernel (/proc/net/tcp{,6} for the sockets among its open files).
func listeningAddresses(t *testing.T, pid int) []string {
	t.Helper()
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		target, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if err == nil && strings.HasPrefix(target, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(target, "socket:["), "]")] = true
		}
	}
	var out []string
	for _, table := range []string{"tcp", "tcp6"} {
		f, err := os.Open(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		if err != nil {
			t.Fatal(err)
		}
		scanner := bufio.NewScanner(f)
		scanner.Scan() // the header
		for scanner.Scan() {
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
			fields := strings.Fields(scanner.Text())
			if len(fields) < 10 || fields[3] != "0A" || !inodes[fields[9]] {
				continue
			}
			out = append(out, procAddress(t, fields[1]))
		}
		f.Close()
	}
	return out
}

// procAddress reads /proc/net/tcp's HEXIP:HEXPORT, the IP in the kernel's
// byte order (per 32-bit word, little-endian here).
func procAddress(t *testing.T, s string) string {
	t.Helper()
	hexIP, hexPort, _ := strings.Cut(s, ":")
	raw, err := hex.DecodeString(hexIP)
	if err != nil {
		t.Fatal(err)
	}
	ip := make(net.IP, len(raw))
	for i := 0; i < len(raw); i += 4 {
		ip[i], ip[i+1], ip[i+2], ip[i+3] = raw[i+3], raw[i+2], raw[i+1], raw[i]
	}
	port, err := strconv.ParseUint(hexPort, 16, 16)
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort(ip.String(), strconv.Itoa(int(port)))
}
