package timeline

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	historyv1alpha1 "github.com/eventapiserver/event-apiserver/pkg/apis/history/v1alpha1"
	historyclient "github.com/eventapiserver/event-apiserver/pkg/generated/clientset/versioned/typed/history/v1alpha1"
	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// pageCounts is the overview's table, read from the DOM: what the page
// shows, not what it was sent.
type pageCounts struct {
	Kind          string
	FieldSelector string
	By            string
	Bucket        int64
	Top           int32
	Groups        []historyv1alpha1.EventRecordCountGroup
	Buckets       []struct {
		Start  int64
		Counts []int64
		Other  int64
	}
	Other int64
	Total int64
}

// readPageCounts reads the counts table and the query the page says it
// asked the server.
func readPageCounts(t *testing.T, tab *testTab) pageCounts {
	t.Helper()
	raw := tab.eval(t, `JSON.stringify((() => {
		const q = document.querySelector('p.query').dataset;
		const t = document.querySelector('table.counts');
		const values = [...t.tHead.rows[0].cells].filter((c) => c.dataset.value !== undefined).map((c) => c.dataset.value);
		const foot = [...t.tFoot.rows[0].cells].slice(1).map((c) => Number(c.textContent));
		return {
			Kind: q.kind, FieldSelector: q.fieldSelector, By: q.by, Bucket: Number(q.bucket), Top: Number(q.top),
			Groups: values.map((v, i) => ({ values: [v], total: foot[i] })),
			Buckets: [...t.tBodies[0].rows].map((r) => {
				const n = [...r.cells].slice(1).map((c) => Number(c.textContent));
				return { Start: Number(r.dataset.start), Counts: n.slice(0, values.length), Other: n[values.length] };
			}),
			Other: foot[values.length], Total: foot[values.length + 1],
		};
	})())`)
	var c pageCounts
	if err := json.Unmarshal([]byte(raw), &c); err != nil {
		t.Fatalf("the counts table %s: %v", raw, err)
	}
	return c
}

// compareToAPI asks the counts API the page's own question, as the user,
// and compares every number the page shows with its answer; ns "" for
// every namespace (ClusterEventRecordCount).
func compareToAPI(t *testing.T, ctx context.Context, config *rest.Config, ns string, page pageCounts) historyv1alpha1.EventRecordCountStatus {
	t.Helper()
	client, err := historyclient.NewForConfig(config)
	if err != nil {
		t.Fatal(err)
	}
	spec := historyv1alpha1.EventRecordCountSpec{
		FieldSelector: page.FieldSelector, GroupBy: []string{page.By},
		BucketSize: metav1.Duration{Duration: time.Duration(page.Bucket) * time.Second}, Top: page.Top,
	}
	var status historyv1alpha1.EventRecordCountStatus
	switch {
	case ns == "" && page.Kind == "ClusterEventRecordCount":
		got, err := client.ClusterEventRecordCounts().Create(ctx, &historyv1alpha1.ClusterEventRecordCount{Spec: spec}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("the counts API, asked %+v: %v", spec, err)
		}
		status = got.Status
	case ns != "" && page.Kind == "EventRecordCount":
		got, err := client.EventRecordCounts(ns).Create(ctx, &historyv1alpha1.EventRecordCount{Spec: spec}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("the counts API, asked %+v: %v", spec, err)
		}
		status = got.Status
	default:
		t.Fatalf("the page counted with %q in namespace %q", page.Kind, ns)
	}
	if page.Total != status.Total || page.Other != status.Other {
		t.Errorf("the page shows %d in all, %d other; the API %d, %d", page.Total, page.Other, status.Total, status.Other)
	}
	if len(page.Groups) != len(status.Groups) {
		t.Fatalf("the page shows groups %v, the API %v", page.Groups, status.Groups)
	}
	for i, g := range status.Groups {
		if !slices.Equal(page.Groups[i].Values, g.Values) || page.Groups[i].Total != g.Total {
			t.Errorf("group %d: the page shows %v, the API %v", i, page.Groups[i], g)
		}
	}
	if len(page.Buckets) != len(status.Buckets) {
		t.Fatalf("the page shows %d buckets, the API %d", len(page.Buckets), len(status.Buckets))
	}
	for i, b := range status.Buckets {
		if page.Buckets[i].Start != b.Start.UnixMilli() || !slices.Equal(page.Buckets[i].Counts, b.Counts) {
			t.Errorf("bucket %d: the page shows %d %v, the API %d %v", i, page.Buckets[i].Start, page.Buckets[i].Counts, b.Start.UnixMilli(), b.Counts)
		}
	}
	return status
}

// testTimelineWebOverview opens `kubectl timeline --web -n ns` (no object):
// the namespace's Events over time. Its numbers are the counts API's; a
// search finds a word in a note, listing the object whose Event holds it
// (and a term the API refuses shows the API's 400); a segment opens the objects behind it, with the keyboard,
// and an object opens its story; a user who may not count the namespace
// sees the API's 403.
func testTimelineWebOverview(t *testing.T, ctx context.Context, c *framework.AggregatedCluster, browser *testBrowser, plugin, ns string) {
	// A note with a word no other Event's has.
	at := time.Now().Add(-20 * time.Minute)
	pulled := timelineEvent("api-1.pull", "Pod", "api-1", "5b1d7c1e-0000-4000-8000-00000000a001", "Failed", "Warning", "kubelet", at)
	pulled.Message = `Failed to pull image "registry.shop/api:2": tls: failed to verify certificate: x509: certificate signed by unknown authority`
	pulled.InvolvedObject.Namespace = ns
	if _, err := c.Client.CoreV1().Events(ns).Create(ctx, pulled, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, framework.PollInterval, time.Minute, true, func(ctx context.Context) (bool, error) {
		n, err := countRecordsThrough(ctx, c, ns, "regarding.name=api-1")
		return err == nil && n == 1, nil
	})
	if err != nil {
		t.Fatalf("history never held api-1's Event: %v", err)
	}

	page := startTimelineWeb(t, ctx, plugin, c.Kube.KubeconfigPath, "-n", ns)
	defer page.stop(t)
	tab := browser.open(t, page.url)
	if state := tab.eval(t, `document.body.dataset.state`); state != "ready" {
		t.Fatalf("page state %q: %s", state, tab.text(t, "#view"))
	}
	if title := tab.text(t, "#title"); title != "Events over time" {
		t.Errorf("title %q", title)
	}

	t.Run("the chart's numbers are the counts API's", func(t *testing.T) {
		counts := readPageCounts(t, tab)
		status := compareToAPI(t, ctx, c.Kube.RestConfig(), ns, counts)
		if !strings.Contains(counts.FieldSelector, "since=") || counts.By != "reason" || counts.Bucket != 3600 {
			t.Errorf("the page asked %+v, want the last 24h by reason, hourly", counts)
		}
		// Every web-0, owner tree and api-1 Event is in the window.
		if status.Total < 10 {
			t.Errorf("the window counts %d versions, want at least the 10 written", status.Total)
		}
		// One segment per non-zero count, each with its text.
		var nonzero int
		for _, b := range counts.Buckets {
			for _, n := range b.Counts {
				if n > 0 {
					nonzero++
				}
			}
			if b.Other > 0 {
				nonzero++
			}
		}
		if n := tab.count(t, ".bars .seg"); n != nonzero {
			t.Errorf("%d segments drawn, want %d", n, nonzero)
		}
		label := tab.attributes(t, ".bars .seg")[0]["aria-label"]
		if !strings.Contains(label, "Event version") {
			t.Errorf("a segment's text alternative: %q", label)
		}
		tab.screenshot(t, "timeline-web-overview")
		// By type: the same check, two groups.
		tab.do(t, chromedp.Click(chromedp.CSS(`button[data-by="type"]`)))
		waitPage(t, tab, `document.querySelector('p.query') && document.querySelector('p.query').dataset.by === 'type'`)
		byType := readPageCounts(t, tab)
		compareToAPI(t, ctx, c.Kube.RestConfig(), ns, byType)
		if len(byType.Groups) != 2 {
			t.Errorf("by type: groups %v, want Normal and Warning", byType.Groups)
		}
		tab.do(t, chromedp.Click(chromedp.CSS(`.toolbar button:nth-child(2)`)))
		tab.screenshot(t, "timeline-web-overview-table")
		tab.do(t, chromedp.Click(chromedp.CSS(`.toolbar button:nth-child(1)`)), chromedp.Click(chromedp.CSS(`button[data-by="reason"]`)))
		waitPage(t, tab, `document.querySelector('p.query').dataset.by === 'reason'`)
	})

	t.Run("beyond the largest groups, other is the rest of each bucket", func(t *testing.T) {
		tab := browser.open(t, page.url+"#events?namespace="+ns+"&top=2")
		waitPage(t, tab, `document.body.dataset.state === 'ready' && document.querySelector('p.query').dataset.top === '2'`)
		counts := readPageCounts(t, tab)
		status := compareToAPI(t, ctx, c.Kube.RestConfig(), ns, counts)
		if status.Other == 0 {
			t.Fatalf("two groups leave no other: %+v", status)
		}
		// Each bucket's whole, from the API by type: the page's groups and
		// other add up to it.
		client, err := historyclient.NewForConfig(c.Kube.RestConfig())
		if err != nil {
			t.Fatal(err)
		}
		byType, err := client.EventRecordCounts(ns).Create(ctx, &historyv1alpha1.EventRecordCount{Spec: historyv1alpha1.EventRecordCountSpec{
			FieldSelector: counts.FieldSelector, GroupBy: []string{"type"}, BucketSize: metav1.Duration{Duration: time.Hour}, Top: 100}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var others int64
		for i, b := range byType.Status.Buckets {
			var whole, shown int64
			for _, n := range b.Counts {
				whole += n
			}
			for _, n := range counts.Buckets[i].Counts {
				shown += n
			}
			if shown+counts.Buckets[i].Other != whole {
				t.Errorf("bucket %d: the page shows %d in groups and %d other, the API counts %d", i, shown, counts.Buckets[i].Other, whole)
			}
			others += counts.Buckets[i].Other
		}
		if others != status.Other {
			t.Errorf("the buckets' other add up to %d, the API's other is %d", others, status.Other)
		}
		// Other's segment opens the objects of none of the two groups.
		seg := tab.attributes(t, `.bars .seg[data-group="-1"]`)[0]
		tab.do(t, chromedp.Focus(chromedp.CSS(fmt.Sprintf(`.bars .seg[data-group="-1"][data-bucket=%q]`, seg["data-bucket"]))), chromedp.KeyEvent(kb.Enter))
		waitPage(t, tab, `document.querySelector('section.drill').dataset.state === 'ready'`)
		var sum int
		for _, r := range tab.attributes(t, "section.drill table.objects tbody tr") {
			n, _ := strconv.Atoi(r["data-records"])
			sum += n
		}
		if strconv.Itoa(sum) != seg["data-count"] {
			t.Errorf("other's segment counts %s, its objects %d records", seg["data-count"], sum)
		}
		listed := tab.text(t, "section.drill p.query code")
		for _, g := range counts.Groups {
			if !strings.Contains(listed, "reason!="+g.Values[0]) {
				t.Errorf("other's objects listed with %q, not excepting %s", listed, g.Values[0])
			}
		}
	})

	t.Run("a segment opens its objects, and an object its story", func(t *testing.T) {
		counts := readPageCounts(t, tab)
		group := slices.IndexFunc(counts.Groups, func(g historyv1alpha1.EventRecordCountGroup) bool { return g.Values[0] == "BackOff" })
		if group < 0 {
			t.Fatalf("no BackOff group in %v", counts.Groups)
		}
		// The keyboard: the first segment takes the tab stop; End, then
		// Home, then onto BackOff's first segment by focus, and Enter.
		seg := fmt.Sprintf(`.bars .seg[data-group="%d"]`, group)
		tab.do(t, chromedp.Focus(chromedp.CSS(`.bars .seg[tabindex="0"]`)), chromedp.KeyEvent(kb.End), chromedp.KeyEvent(kb.Home))
		if got := tab.eval(t, `document.activeElement.dataset.bucket`); got != tab.eval(t, `document.querySelector('.bars .seg').dataset.bucket`) {
			t.Errorf("Home went to bucket %s", got)
		}
		if tip := tab.text(t, "#segment-tooltip"); !strings.Contains(tip, "Event version") {
			t.Errorf("the focused segment's tooltip: %q", tip)
		}
		want := tab.attributes(t, seg)[0]
		tab.do(t, chromedp.Focus(chromedp.CSS(seg)), chromedp.KeyEvent(kb.Enter))
		waitPage(t, tab, `document.querySelector('section.drill').dataset.state === 'ready'`)
		rows := tab.attributes(t, "section.drill table.objects tbody tr")
		var sum int
		for _, r := range rows {
			n, _ := strconv.Atoi(r["data-records"])
			sum += n
		}
		if strconv.Itoa(sum) != want["data-count"] || len(rows) != 1 || rows[0]["data-name"] != "web-0" || rows[0]["data-kind"] != "Pod" {
			t.Errorf("BackOff's segment (%s versions) lists %v", want["data-count"], rows)
		}
		tab.screenshot(t, "timeline-web-overview-drill")
		tab.do(t, chromedp.Click(chromedp.CSS(`section.drill a.story-link`)))
		waitPage(t, tab, `document.getElementById('title').textContent === 'Pod web-0' && document.body.dataset.state === 'ready'`)
		if n := tab.count(t, "g.lane"); n != 3 {
			t.Errorf("web-0's story from the drill-down has %d lanes, want 3", n)
		}
		// Back returns to the overview as it was.
		// history.back(), not chromedp.NavigateBack, which waits for a
		// page load that a fragment's change never fires.
		tab.eval(t, `history.back(); "ok"`)
		waitPage(t, tab, `document.getElementById('title').textContent === 'Events over time' && document.body.dataset.state === 'ready'`)
	})

	t.Run("a search finds a word in a note", func(t *testing.T) {
		// A tab of its own: each tab lives a minute at most.
		tab := browser.open(t, page.url)
		tab.do(t, chromedp.SetValue(chromedp.CSS("#search"), "x509"), chromedp.Focus(chromedp.CSS("#search")), chromedp.KeyEvent(kb.Enter))
		waitPage(t, tab, `document.querySelector('section.drill').dataset.state === 'ready'`)
		if listed := tab.text(t, "section.drill p.query code"); !strings.HasPrefix(listed, "note.contains=x509,since=") {
			t.Errorf("the search listed eventrecords with %q", listed)
		}
		rows := tab.attributes(t, "section.drill table.objects tbody tr")
		if len(rows) != 1 || rows[0]["data-name"] != "api-1" || rows[0]["data-records"] != "1" {
			t.Errorf("the search for x509 lists %v, want api-1's one Event", rows)
		}
		// The chart counts the Events the search found, as the API counts them.
		waitPage(t, tab, `document.body.dataset.state === 'ready' && document.querySelector('p.query').dataset.fieldSelector.startsWith('note.contains=x509,')`)
		searched := readPageCounts(t, tab)
		compareToAPI(t, ctx, c.Kube.RestConfig(), ns, searched)
		if searched.Total != 1 {
			t.Errorf("the chart of x509 counts %d versions, want api-1's one", searched.Total)
		}
		tab.screenshot(t, "timeline-web-overview-search")

		// A term the API refuses: its 400, in its words.
		client, err := historyclient.NewForConfig(c.Kube.RestConfig())
		if err != nil {
			t.Fatal(err)
		}
		_, apiErr := client.EventRecords(ns).List(ctx, metav1.ListOptions{FieldSelector: "note.contains=ab,since=24h"})
		if apiErr == nil {
			t.Fatal("the API took note.contains=ab")
		}
		tab.do(t, chromedp.SetValue(chromedp.CSS("#search"), "ab"), chromedp.Focus(chromedp.CSS("#search")), chromedp.KeyEvent(kb.Enter))
		waitPage(t, tab, `document.querySelector('.search-error .message') !== null`)
		heading, message := tab.text(t, ".search-error h2"), tab.text(t, ".search-error .message")
		if !strings.Contains(heading, "400") || message != apiErr.Error() {
			t.Errorf("the search for ab shows %q: %q, want 400: %q", heading, message, apiErr.Error())
		}
		if fs := tab.eval(t, `document.querySelector('p.query').dataset.fieldSelector`); !strings.HasPrefix(fs, "note.contains=x509,") {
			t.Errorf("after a refused term the chart is counted with %q, want the last search's", fs)
		}
	})

	t.Run("a user who may not count the namespace sees the API's 403", func(t *testing.T) {
		user := framework.UniqueName("overview-outsider")
		outsider := startTimelineWeb(t, ctx, plugin, c.Kube.KubeconfigPath, "-n", ns, "--as="+user, "--as-group=system:authenticated")
		defer outsider.stop(t)
		tab := browser.open(t, outsider.url)
		client, err := historyclient.NewForConfig(c.ImpersonatingConfig(user))
		if err != nil {
			t.Fatal(err)
		}
		_, apiErr := client.EventRecordCounts(ns).Create(ctx, &historyv1alpha1.EventRecordCount{Spec: historyv1alpha1.EventRecordCountSpec{GroupBy: []string{"reason"}}}, metav1.CreateOptions{})
		if apiErr == nil {
			t.Fatal("an outsider counted the namespace")
		}
		heading, message := tab.text(t, ".error h2"), tab.text(t, ".error .message")
		if state := tab.eval(t, `document.body.dataset.state`); state != "error" || !strings.Contains(heading, "403 Forbidden") || message != apiErr.Error() {
			t.Errorf("page %s, %q: %q; want 403 Forbidden: %q", state, heading, message, apiErr.Error())
		}
		tab.screenshot(t, "timeline-web-overview-forbidden")
	})
}

// testTimelineWebOverviewWithoutHistory: where history is not installed
// the overview says counts need it, and lists the live Events' objects,
// each a link to its story.
func testTimelineWebOverviewWithoutHistory(t *testing.T, ctx context.Context, c *framework.AggregatedCluster, browser *testBrowser, plugin, ns string) {
	page := startTimelineWeb(t, ctx, plugin, c.Kube.KubeconfigPath, "-n", ns)
	defer page.stop(t)
	tab := browser.open(t, page.url)
	notices := tab.text(t, "#notices")
	if !strings.Contains(notices, "History is not available") || !strings.Contains(notices, "Counts over time need history") {
		t.Errorf("notices %q do not say counts need history", notices)
	}
	rows := tab.attributes(t, "section.drill table.objects tbody tr")
	if len(rows) != 1 || rows[0]["data-name"] != "web-0" || rows[0]["data-records"] != "6" {
		t.Errorf("the live Events' objects: %v, want web-0's 6", rows)
	}
	tab.screenshot(t, "timeline-web-overview-without-history")
}

// waitPage polls the page for a condition, a JavaScript expression.
func waitPage(t *testing.T, tab *testTab, condition string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab.ctx, 20*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](condition)); err != nil {
		tab.screenshot(t, "timeline-web-failed-"+strings.Map(func(r rune) rune {
			if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
				return r
			}
			return '-'
		}, strings.ToLower(t.Name())))
		t.Fatalf("waiting for %s: %v; the page says %q %q", condition, err, tab.text(t, "#notices"), tab.text(t, "#view"))
	}
}
