package integration

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/eventapiserver/event-apiserver/internal/testbed"
	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// TestHistoryCaptureCPU measures the server's CPU per create with history
// off and on (capture included until it has stored every version), on the
// same workload: EVENT_APISERVER_HISTORY_BENCH=1 to run it. Both runs use the
// embedded etcd, whose CPU counts in both.
func TestHistoryCaptureCPU(t *testing.T) {
	// Not parallel: it measures the server's CPU per create, which other
	// tests' processes on the same cores would inflate.
	if os.Getenv("EVENT_APISERVER_HISTORY_BENCH") != "1" {
		t.Skip("a benchmark: set EVENT_APISERVER_HISTORY_BENCH=1")
	}
	const creates = 4000
	perCreate := map[string]time.Duration{}
	for _, mode := range []string{"off", "on", "off", "on"} {
		server := framework.StartServer(t, framework.ServerOptions{ExtraArgs: []string{
			"--history=" + map[string]string{"off": "false", "on": "true"}[mode],
			"--event-rate-limit-qps=1000000", "--event-rate-limit-burst=1000000",
			"--event-rate-limit-global-qps=1000000", "--event-rate-limit-global-burst=1000000",
		}})
		pid, err := findServerPID(server.DataDir)
		if err != nil {
			t.Fatal(err)
		}
		config := server.Config(t)
		config.QPS, config.Burst = -1, 0 // no client-side throttling
		client, err := kubernetes.NewForConfig(config)
		if err != nil {
			t.Fatal(err)
		}
		ns := uniqueName("bench")
		create := func(n int, prefix string) {
			var wg sync.WaitGroup
			errs := make(chan error, n)
			for w := 0; w < 8; w++ {
				wg.Add(1)
				go func(w int) {
					defer wg.Done()
					for i := w; i < n; i += 8 {
						_, err := client.CoreV1().Events(ns).Create(context.Background(), &corev1.Event{
							ObjectMeta:     metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", prefix, i)},
							InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: fmt.Sprintf("pod-%d", i%100), UID: "uid"},
							Reason:         "BackOff", Message: strings.Repeat("m", 200), Type: corev1.EventTypeWarning,
							Source: corev1.EventSource{Component: "kubelet", Host: "node"}, Count: 1, LastTimestamp: metav1.Now(),
						}, metav1.CreateOptions{})
						if err != nil {
							errs <- err
							return
						}
					}
				}(w)
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
		}
		create(300, "warmup")
		c := adminRawClient(t, server)
		caughtUp := func(want int) {
			if mode == "off" {
				return
			}
			err := wait.PollUntilContextTimeout(pollCtx(t), 50*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
				m := string(c.do(t, "GET", "/metrics", nil, nil).body)
				return strings.Contains(m, fmt.Sprintf("event_apiserver_history_versions_written_total %d\n", want)), nil
			})
			if err != nil {
				t.Fatalf("capture did not store %d versions: %v", want, err)
			}
		}
		caughtUp(300)
		before, err := testbed.CPUTime(pid)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		create(creates, "measured")
		caughtUp(300 + creates)
		after, _ := testbed.CPUTime(pid)
		cpu := (after - before) / creates
		t.Logf("history %s: %d creates in %v, server CPU %v per create", mode, creates, time.Since(start).Round(time.Millisecond), cpu)
		if perCreate[mode] == 0 || cpu < perCreate[mode] {
			perCreate[mode] = cpu
		}
		if err := server.Stop(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("best of two: off %v, on %v per create: capture adds %.1f%%", perCreate["off"], perCreate["on"],
		100*float64(perCreate["on"]-perCreate["off"])/float64(perCreate["off"]))
}
