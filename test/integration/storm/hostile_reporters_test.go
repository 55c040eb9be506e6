package storm

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// TestHostileReporters: one user writes core/v1 Events under 1,000 distinct
// reporter names of 32 KiB each (source.component and source.host, which
// core/v1 validation does not bound), a fresh instance every time. The user
// stays within its own budget (10 at once, 5 a second) whatever the names;
// the limiter remembers at most --event-rate-limit-max-reporters entries of
// a fixed size; no request answers 5xx; and once the traffic stops the
// reporters gauge falls to zero without another write.
func TestHostileReporters(t *testing.T) {
	// Not parallel: 1000 writes that must all answer 201 or 429; with other
	// tests' processes on the same cores, etcd's health probe timed out and
	// 503s appeared (go test -parallel 3, race build).
	// 1000 names, not 2000: the limiter forgets a reporter once it has been
	// idle for its longest bucket refill, so while the writes run it holds
	// only the last seconds' names (51 entries at the end of a 2000-write
	// run, 65 s under the race detector on a loaded machine), and a name
	// kept whole (32 KiB) would put even a few entries over the byte bound.
	// Half the writes check the same bounds in half the time of a serial
	// test.
	framework.Exclusive(t)
	const (
		names = 1000
		// The user's bucket refills in burst/qps = 2 s, like the
		// reporters' (below): the gauge's fall to zero once the writes
		// stop takes 2 s, not the 10 s a burst of 50 took (13 s waited
		// in that run).
		userBurst    = 10
		userQPS      = 5
		maxReporters = 500
		// entryLimit is what one remembered reporter may take, whatever
		// its name's length (keys are 16-byte hashes).
		entryLimit = 512
	)
	server := framework.StartServer(t, framework.ServerOptions{ExtraArgs: []string{
		fmt.Sprintf("--event-rate-limit-user-burst=%d", userBurst), fmt.Sprintf("--event-rate-limit-user-qps=%d", userQPS),
		fmt.Sprintf("--event-rate-limit-max-reporters=%d", maxReporters),
		// Buckets that refill within seconds, so idle reporters are
		// forgotten quickly: the longest refill is 2 s.
		"--event-rate-limit-burst=2", "--event-rate-limit-qps=1",
		"--event-rate-limit-update-burst=2", "--event-rate-limit-update-qps=1",
		"--event-rate-limit-bytes-burst=1048576", "--event-rate-limit-bytes-qps=1048576",
	}})
	client := framework.AdminRawClient(t, server)
	config := server.Config(t)
	long := strings.Repeat("r", 16<<10)

	var (
		mu    sync.Mutex
		codes = map[int]int{}
		next  atomic.Int64
		wg    sync.WaitGroup
	)
	start := time.Now()
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1); i <= names; i = next.Add(1) {
				r := client.Send(t, framework.Request{Method: http.MethodPost, Path: framework.CoreEventsPath, ContentType: framework.ContentJSON,
					Body: framework.CoreBody(fmt.Sprintf("hostile-%d", i), func(m map[string]any) {
						m["source"] = map[string]any{"component": fmt.Sprintf("%d-%s", i, long), "host": long}
					})})
				mu.Lock()
				codes[r.Code]++
				mu.Unlock()
				if r.Code >= 500 {
					t.Errorf("write %d: %d %s", i, r.Code, r.Body)
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	reporters := framework.MetricValue(t, config, "event_apiserver_storm_reporters", nil)
	memory := framework.MetricValue(t, config, "event_apiserver_storm_reporters_bytes", nil)
	t.Logf("%d writes under distinct reporter names of 32 KiB in %s: %v; limiter holds %g entries, %g bytes",
		names, elapsed.Round(time.Millisecond), codes, reporters, memory)
	if allowed := userBurst + int(userQPS*elapsed.Seconds()) + 1; codes[http.StatusCreated] > allowed {
		t.Errorf("%d accepted, over the user's budget of %d in %s", codes[http.StatusCreated], allowed, elapsed)
	}
	if codes[http.StatusCreated]+codes[http.StatusTooManyRequests] != names {
		t.Errorf("answers %v, want only 201 and 429", codes)
	}
	if reporters > maxReporters || memory > maxReporters*entryLimit {
		t.Errorf("limiter holds %g entries, %g bytes, want at most %d and %d", reporters, memory, maxReporters, maxReporters*entryLimit)
	}

	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, 60*time.Second, true,
		func(context.Context) (bool, error) {
			return framework.MetricValue(t, config, "event_apiserver_storm_reporters", nil) == 0, nil
		})
	if err != nil {
		t.Errorf("reporters gauge still %g a minute after the traffic stopped",
			framework.MetricValue(t, config, "event_apiserver_storm_reporters", nil))
	}
}
