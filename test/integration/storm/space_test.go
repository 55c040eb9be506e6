package storm

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
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
	const quota = 16 << 20
	server := framework.StartServer(t, framework.ServerOptions{
		EventTTL: 30 * time.Second,
		ExtraArgs: []string{fmt.Sprintf("--embedded-etcd-quota-backend-bytes=%d", quota),
			// One reporter writes them all: its own byte budget (8 MiB
			// burst) would refuse them with 429 before etcd fills up.
			"--event-rate-limit-bytes-qps=0"},
	})
	client := framework.AdminRawClient(t, server)
	post := poster(t, client)
	check := func(what string, r framework.Response) {
		t.Helper()
		if r.Code >= 500 && r.Code != http.StatusServiceUnavailable {
			t.Fatalf("%s: %d, never a 5xx other than 503: %s", what, r.Code, r.Body)
		}
	}

	accepted, refusal := fillUntilRefused(t, post)
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

// poster creates core/v1 Events in default with a given message.
func poster(t *testing.T, client *framework.RawClient) func(name, message string) framework.Response {
	return func(name, message string) framework.Response {
		return client.Send(t, framework.Request{Method: http.MethodPost, Path: framework.CoreEventsPath, ContentType: framework.ContentJSON,
			Body: framework.CoreBody(name, func(m map[string]any) { m["message"] = message })})
	}
}

// fillUntilRefused writes 600 KB Events from 4 writers until one is refused
// (at most 160, 96 MB), and returns how many were accepted and the first
// refusal, nil if none.
func fillUntilRefused(t *testing.T, post func(name, message string) framework.Response) (int, *framework.Response) {
	big := strings.Repeat("x", 600<<10)
	var (
		mu       sync.Mutex
		accepted int
		refusal  *framework.Response
		wg       sync.WaitGroup
	)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 40 {
				mu.Lock()
				done := refusal != nil
				mu.Unlock()
				if done {
					return
				}
				r := post(fmt.Sprintf("big-%d-%d", w, i), big)
				mu.Lock()
				switch {
				case r.Code == http.StatusCreated:
					accepted++
				case refusal == nil:
					refusal = &r
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return accepted, refusal
}

// TestExternalEtcdFullSaysWhatToDo fills an external etcd's 16 MiB quota.
// The server cannot fix someone else's etcd, so it answers writes 503,
// fails its /readyz check etcd-space and logs what the operator must do;
// once the operator has compacted, defragmented and disarmed, the check
// passes and writes are accepted again.
func TestExternalEtcdFullSaysWhatToDo(t *testing.T) {
	t.Parallel()
	etcd := framework.StartEtcd(t, framework.WithEtcdFlags(fmt.Sprintf("--quota-backend-bytes=%d", 16<<20)))
	server := framework.StartServer(t, framework.ServerOptions{
		EtcdServers: etcd.ClientURL(),
		EventTTL:    5 * time.Second,
		ExtraArgs:   []string{"--event-rate-limit-bytes-qps=0"},
	})
	client := framework.AdminRawClient(t, server)
	post := poster(t, client)
	accepted, refusal := fillUntilRefused(t, post)
	if refusal == nil || refusal.Code != http.StatusServiceUnavailable {
		t.Fatalf("after %d accepted, want a 503 refusal, got %+v", accepted, refusal)
	}
	readyz := func() framework.Response { return client.Do(t, http.MethodGet, "/readyz?verbose", nil, nil) }
	err := wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, 30*time.Second, true,
		func(context.Context) (bool, error) {
			r := readyz()
			return r.Code != http.StatusOK && strings.Contains(string(r.Body), "[-]etcd-space failed"), nil
		})
	if err != nil {
		t.Fatalf("/readyz does not fail etcd-space while etcd is full: %s", readyz().Body)
	}
	if !server.LogContains("etcdctl alarm disarm") {
		t.Errorf("the log does not say what to do")
	}

	// The operator's recovery, after the Events have expired.
	ec := etcd.Client(t)
	err = wait.PollUntilContextTimeout(context.Background(), time.Second, 90*time.Second, true,
		func(ctx context.Context) (bool, error) {
			status, err := ec.Status(ctx, etcd.ClientURL())
			if err != nil {
				return false, nil
			}
			if _, err := ec.Compact(ctx, status.Header.Revision); err != nil && !strings.Contains(err.Error(), "compacted") {
				return false, nil
			}
			if _, err := ec.Defragment(ctx, etcd.ClientURL()); err != nil {
				return false, nil
			}
			if status, err = ec.Status(ctx, etcd.ClientURL()); err != nil || status.DbSize > 8<<20 {
				return false, nil
			}
			_, err = ec.AlarmDisarm(ctx, &clientv3.AlarmMember{MemberID: status.Header.MemberId, Alarm: etcdserverpb.AlarmType_NOSPACE})
			return err == nil, nil
		})
	if err != nil {
		t.Fatalf("cannot recover etcd as an operator would: %v", err)
	}
	err = wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, 30*time.Second, true,
		func(context.Context) (bool, error) { return readyz().Code == http.StatusOK, nil })
	if err != nil {
		t.Fatalf("/readyz still failing after recovery: %s", readyz().Body)
	}
	if r := post(framework.UniqueName("after"), "small"); r.Code != http.StatusCreated {
		t.Errorf("write after recovery: %d %s", r.Code, r.Body)
	}
}
