package storm

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// TestStormTowardEmbeddedQuota fills a 16 MiB embedded etcd with 600 KB
// Events, well within the storm limiter's request budget. Once etcd's quota
// is reached, writes must be refused with a 503 that says so and carries
// Retry-After (etcd's NOSPACE alarm used to answer 500 for good), reads must
// keep answering, and once the Events have expired (--event-ttl=30s, so that
// the first is still there when the quota is hit even on a loaded machine,
// where filling it took over 10s) the server must compact, defragment and
// disarm by itself so that writes succeed again. No request may ever answer
// 500.
func TestStormTowardEmbeddedQuota(t *testing.T) {
	// Not parallel: the refusal must be etcd's NOSPACE; with other tests'
	// processes on the same cores, etcd's health probe timed out first and
	// the refusal was that 503 instead (go test -parallel 3, race build).
	framework.Exclusive(t)
	const quota = 16 << 20
	server := framework.StartServer(t, framework.ServerOptions{
		EventTTL: 30 * time.Second,
		ExtraArgs: []string{fmt.Sprintf("--embedded-etcd-quota-backend-bytes=%d", quota),
			// One reporter writes them all: its own byte budget (8 MiB
			// burst) would refuse them with 429 before etcd fills up.
			"--event-rate-limit-bytes-qps=0"},
	})
	client := framework.AdminRawClient(t, server)
	post := framework.Poster(t, client)
	check := func(what string, r framework.Response) {
		t.Helper()
		if r.Code >= 500 && r.Code != http.StatusServiceUnavailable {
			t.Fatalf("%s: %d, never a 5xx other than 503: %s", what, r.Code, r.Body)
		}
	}

	accepted, refusal := framework.FillUntilRefused(t, post)
	if refusal == nil {
		t.Fatalf("%d Events of 600 KB accepted, the 16 MiB quota never refused one", accepted)
	}
	check("storm write", *refusal)
	st := refusal.Status(t)
	if refusal.Code != http.StatusServiceUnavailable || st.Reason != metav1.StatusReasonServiceUnavailable ||
		!strings.Contains(st.Message, "out of space") || st.Details == nil || st.Details.RetryAfterSeconds <= 0 {
		t.Fatalf("refusal after %d accepted: %d %s %q, want a 503 saying etcd is out of space, with Retry-After",
			accepted, refusal.Code, st.Reason, st.Message)
	}
	t.Logf("%d Events of 600 KB accepted, then: %d %q", accepted, refusal.Code, st.Message)

	// Even a small write is refused, the same way; reads answer.
	r := post(framework.UniqueName("small"), "small")
	check("small write while full", r)
	if r.Code != http.StatusServiceUnavailable {
		t.Errorf("small write while full: %d, want 503: %s", r.Code, r.Body)
	}
	for _, path := range []string{framework.CoreEventsPath + "?limit=1", framework.CoreEventsPath + "?resourceVersion=0&limit=1",
		framework.EventsEventsPath + "?limit=1", "/api/v1/namespaces/default/events/big-0-0"} {
		if r := client.Do(t, http.MethodGet, path, nil, nil); r.Code != http.StatusOK {
			t.Errorf("GET %s while full: %d, want 200: %s", path, r.Code, r.Body)
		}
	}

	// Writes come back by themselves once the Events have expired.
	start := time.Now()
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, 90*time.Second, true,
		func(context.Context) (bool, error) {
			r := post(framework.UniqueName("after"), "small")
			check("write while recovering", r)
			return r.Code == http.StatusCreated, nil
		})
	if err != nil {
		t.Fatalf("writes still refused 90s after the quota was reached: %v", err)
	}
	t.Logf("writes accepted again %s after the refusal", time.Since(start).Round(time.Second))
}
