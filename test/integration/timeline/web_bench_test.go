package timeline

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// TestTimelineWebFirstPaint measures how long the page takes to draw a
// story of many Events in headless Chromium: EVENT_APISERVER_WEB_BENCH=1 to
// run it, EVENT_APISERVER_WEB_BENCH_EVENTS=<n> Events (default 10,000) about
// one pod name over three incarnations, one in ten a Warning series, all
// kept by history (half of them deleted, so the page reads both sources).
// The figure is the page's own performance measure "timeline:first-paint":
// from navigation start to the second animation frame after the lanes are
// in the DOM (the first frame with them painted), in a fresh tab, over
// EVENT_APISERVER_WEB_BENCH_LOADS=<n> loads (default 7); it reports each
// phase's median: the story's request (list, merge, JSON), then building
// the lanes, then the paint.
func TestTimelineWebFirstPaint(t *testing.T) {
	if os.Getenv("EVENT_APISERVER_WEB_BENCH") != "1" {
		t.Skip("a benchmark: set EVENT_APISERVER_WEB_BENCH=1")
	}
	events, loads := framework.BenchEnvInt(t, "EVENT_APISERVER_WEB_BENCH_EVENTS", 10000), framework.BenchEnvInt(t, "EVENT_APISERVER_WEB_BENCH_LOADS", 7)
	chromium := chromiumBinary(t)
	plugin := timelineBinary(t)
	server := framework.StartServer(t, framework.ServerOptions{ExtraArgs: []string{
		"--history-batch-interval=50ms",
		"--event-rate-limit-qps=0", "--event-rate-limit-update-qps=0", "--event-rate-limit-global-qps=0",
		"--event-rate-limit-user-qps=0", "--event-rate-limit-bytes-qps=0", "--event-rate-limit-global-bytes-qps=0",
	}})
	config := server.Config(t)
	config.QPS, config.Burst = -1, 0 // no client-side throttling
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	ns := framework.UniqueName("timeline-web-bench")
	uids := []types.UID{"bench-web-0-first", "bench-web-0-second", "bench-web-0-third"}
	start := time.Now().Add(-48 * time.Hour)
	step := 48 * time.Hour / time.Duration(events)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < events; i += 8 {
				at := start.Add(time.Duration(i) * step)
				uid := uids[i*len(uids)/events]
				e := timelineEvent(fmt.Sprintf("web-0.%05d", i), "Pod", "web-0", uid, "Pulled", "Normal", "kubelet", at)
				if i%10 == 0 {
					e.Reason, e.Type, e.Count, e.LastTimestamp = "BackOff", "Warning", int32(2+i%50), metav1.NewTime(at.Add(20*step))
				}
				e.InvolvedObject.Namespace = ns
				if _, err := client.CoreV1().Events(ns).Create(ctx, e, metav1.CreateOptions{}); err != nil {
					errs <- err
					return
				}
				// Half are gone from the live API: history alone keeps them.
				if i < events/2 {
					// NotFound: client-go resent a delete that etcd had
					// applied before a 503 (a loaded machine's etcd).
					if err := client.CoreV1().Events(ns).Delete(ctx, e.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
						errs <- err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	raw := framework.AdminRawClient(t, server)
	err = wait.PollUntilContextTimeout(ctx, time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		records := framework.ListAllEventRecords(t, raw, ns, "regarding.kind=Pod,regarding.name=web-0", 500)
		ended := 0
		for _, r := range records {
			if r.DeletedAt != nil {
				ended++
			}
		}
		return len(records) == events && ended == events/2, nil
	})
	if err != nil {
		t.Fatalf("history never held the %d Events and the end of half of them: %v", events, err)
	}

	page := startTimelineWeb(t, ctx, plugin, server.Kubeconfig, "pod/web-0", "-n", ns)
	defer page.stop(t)
	browser := startBrowser(t, chromium)
	var story, drawn, painted []float64
	for i := 0; i < loads; i++ {
		tab := browser.open(t, page.url)
		if n := tab.count(t, ".chart .mark"); n != events {
			t.Fatalf("%d marks drawn, want %d", n, events)
		}
		// Wait for the paint mark, set a frame after the lanes.
		tab.do(t, chromedp.WaitVisible(chromedp.CSS(`body[data-state="ready"]`)))
		m, err := chromedp.Run(tab.ctx, chromedp.Evaluate[map[string]float64](`Object.fromEntries(
			['timeline:story-loaded', 'timeline:lanes-drawn', 'timeline:painted'].map((n) => [n, performance.getEntriesByName(n)[0].startTime]))`))
		if err != nil {
			t.Fatal(err)
		}
		story, drawn, painted = append(story, m["timeline:story-loaded"]), append(drawn, m["timeline:lanes-drawn"]), append(painted, m["timeline:painted"])
		if i == 0 {
			tab.screenshot(t, "timeline-web-10000")
		}
		t.Logf("load %d: story loaded %.0f ms, lanes drawn %.0f ms, painted %.0f ms after navigation start", i+1, m["timeline:story-loaded"], m["timeline:lanes-drawn"], m["timeline:painted"])
	}
	median := func(v []float64) float64 {
		s := slices.Clone(v)
		slices.Sort(s)
		return s[len(s)/2]
	}
	t.Logf("%d Events, median of %d loads: story loaded at %.0f ms, lanes drawn at %.0f ms, first paint with the lanes at %.0f ms",
		events, loads, median(story), median(drawn), median(painted))
}
