package faults

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// faultRequestTimeout is the server's --request-timeout in the fault test;
// no request may take longer than it (plus a little for the network).
const faultRequestTimeout = 10 * time.Second

// createOutcome is one create's fate as the client saw it.
type createOutcome struct {
	name       string
	code       int // 0: transport error
	message    string
	reason     metav1.StatusReason
	retryAfter string
	started    time.Time
	took       time.Duration
}

// faultWriter creates Events with raw requests, one after another, and
// keeps every outcome.
type faultWriter struct {
	client *framework.RawClient
	prefix string

	mu       sync.Mutex
	outcomes []createOutcome
}

func (w *faultWriter) run(ctx context.Context) {
	for i := 0; ctx.Err() == nil; i++ {
		name := fmt.Sprintf("%s-%05d", w.prefix, i)
		o := w.create(name)
		w.mu.Lock()
		w.outcomes = append(w.outcomes, o)
		w.mu.Unlock()
		// About 50 creates a second per writer; a client backing off on
		// failures, not spinning on a dead etcd.
		pause := 20 * time.Millisecond
		if o.code != http.StatusCreated {
			pause = 100 * time.Millisecond
		}
		select {
		case <-ctx.Done():
		case <-time.After(pause):
		}
	}
}

func (w *faultWriter) create(name string) createOutcome {
	body := framework.CoreBody(name, func(m map[string]any) {
		m["metadata"] = map[string]any{"name": name, "namespace": "fault"}
		m["involvedObject"] = map[string]any{"kind": "Pod", "name": name, "namespace": "fault", "apiVersion": "v1"}
	})
	o := send(w.client, http.MethodPost, "/api/v1/namespaces/fault/events", body, http.StatusCreated)
	o.name = name
	return o
}

// send is one request whose outcome, transport errors included, is kept
// rather than failing the test: at the request timeout the generic server
// (kube-apiserver's too) sometimes aborts the response instead of writing
// its 504, when the handler has begun writing its own error as the deadline
// passed; on HTTP/2 that is a stream reset, on HTTP/1.1 a closed
// connection. A request that waits for a dead etcd shows as one of those.
// The client waits longer than the server may take, so that a hang shows as
// a long request, not as a client timeout.
func send(c *framework.RawClient, method, path string, body []byte, success int) createOutcome {
	ctx, cancel := context.WithTimeout(context.Background(), 3*faultRequestTimeout)
	defer cancel()
	o := createOutcome{name: path, started: time.Now()}
	req, err := http.NewRequestWithContext(ctx, method, c.BaseURL+path, bytes.NewReader(body))
	if err != nil {
		panic(err)
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	if body != nil {
		req.Header.Set("Content-Type", framework.ContentJSON)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		o.message = err.Error()
	} else {
		data, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		o.code = resp.StatusCode
		o.retryAfter = resp.Header.Get("Retry-After")
		if o.code != success {
			o.reason, o.message = failureStatus(data)
		}
	}
	o.took = time.Since(o.started)
	return o
}

// withoutRetries is c on HTTP/1.1 without keep-alive: a fresh connection per
// request, so that no failed GET is retried by the transport.
func withoutRetries(c *framework.RawClient) *framework.RawClient {
	tr := c.HTTP.Transport.(*http.Transport).Clone()
	tr.DisableKeepAlives = true
	tr.ForceAttemptHTTP2 = false
	tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	tr.TLSClientConfig.NextProtos = []string{"http/1.1"}
	return &framework.RawClient{BaseURL: c.BaseURL, Token: c.Token, HTTP: &http.Client{Transport: tr}}
}

// failureStatus reads a failure Status. The generic server's timeout filter
// writes its 504 Status without kind and apiVersion (kube-apiserver does
// too); client-go still reads it as a timeout from the code.
func failureStatus(data []byte) (metav1.StatusReason, string) {
	var s metav1.Status
	if err := json.Unmarshal(data, &s); err != nil || s.Status != metav1.StatusFailure || s.Code == 0 {
		return "", "not a Status: " + string(framework.Truncate(data, 200))
	}
	return s.Reason, s.Message
}

// TestEtcdKilledUnderLoad kills an external etcd with SIGKILL while Events
// are being created, keeps it down for longer than the request timeout and
// restarts it. Every create that got 201 is readable afterwards; every other
// create got a 503 with Retry-After, never a 500 or a 504 at the request
// timeout; while etcd is down, reads that need it get the same 503 at once,
// reads from the watch cache and /metrics are served, and /readyz reports
// etcd; the server process is the same one throughout.
func TestEtcdKilledUnderLoad(t *testing.T) {
	t.Parallel()
	etcd := framework.StartEtcd(t)
	server := framework.StartServer(t, framework.ServerOptions{
		EtcdServers: etcd.ClientURL(),
		ExtraArgs: []string{
			"--request-timeout=" + faultRequestTimeout.String(),
			// One client writes as fast as it can: no storm budget.
			"--event-rate-limit-qps=0", "--event-rate-limit-global-qps=0",
		},
	})
	pid, err := framework.FindServerPID(server.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	admin := framework.AdminRawClient(t, server)

	// The server must never exit or be replaced.
	var died atomic.Value
	watchCtx, stopWatching := context.WithCancel(context.Background())
	defer stopWatching()
	watcherDone := make(chan struct{})
	go func() {
		defer close(watcherDone)
		for watchCtx.Err() == nil {
			if !server.Running() {
				died.Store("process exited")
				return
			}
			if p, err := framework.FindServerPID(server.DataDir); err != nil || p != pid {
				died.Store(fmt.Sprintf("pid %d is now %d (%v)", pid, p, err))
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
	}()

	loadCtx, stopLoad := context.WithCancel(context.Background())
	defer stopLoad()
	var writers []*faultWriter
	var wg sync.WaitGroup
	for i := range 4 {
		w := &faultWriter{client: admin, prefix: fmt.Sprintf("w%d", i)}
		writers = append(writers, w)
		wg.Go(func() { w.run(loadCtx) })
	}
	created := func() int {
		n := 0
		for _, w := range writers {
			w.mu.Lock()
			for _, o := range w.outcomes {
				if o.code == http.StatusCreated {
					n++
				}
			}
			w.mu.Unlock()
		}
		return n
	}
	waitFor := func(what string, timeout time.Duration, cond func() bool) {
		t.Helper()
		err := wait.PollUntilContextTimeout(context.Background(), framework.PollInterval, timeout, true,
			func(context.Context) (bool, error) { return cond(), nil })
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
	}
	waitFor("creates before the fault", framework.PollTimeout, func() bool { return created() >= 50 })

	before := created()
	killedAt := time.Now()
	if err := etcd.Kill(); err != nil {
		t.Fatal(err)
	}
	t.Logf("killed etcd (SIGKILL) after %d creates", before)

	// /readyz names etcd while it is down. /livez fails too (the generic
	// server puts its etcd check in all three); a liveness probe must use
	// /livez?exclude=etcd, or it restarts the server for nothing.
	waitFor("/readyz to fail on etcd", framework.PollTimeout, func() bool {
		r := admin.Do(t, http.MethodGet, "/readyz?verbose", nil, nil)
		return r.Code == http.StatusInternalServerError && strings.Contains(string(r.Body), "[-]etcd-readiness failed")
	})
	t.Logf("/readyz failed on etcd %v after the kill", time.Since(killedAt).Round(time.Millisecond))
	// Once the etcd gate's probe has seen etcd fail twice (a few seconds,
	// about when /readyz fails), what needs etcd is refused at once with 503
	// instead of waiting for the request timeout, which would end in 504.
	probe := &faultWriter{client: admin, prefix: "probe"}
	waitFor("the etcd gate to close", framework.PollTimeout, func() bool {
		return probe.create(framework.UniqueName("probe")).code == http.StatusServiceUnavailable
	})
	t.Logf("writes refused with 503 %v after the kill", time.Since(killedAt).Round(time.Millisecond))
	if r := admin.Do(t, http.MethodGet, "/livez?exclude=etcd", nil, nil); r.Code != http.StatusOK {
		t.Errorf("/livez?exclude=etcd during the outage: %d %s", r.Code, r.Body)
	}
	// Each request on a connection of its own: Go's transport sends a
	// failed GET again on its own, which would hide what one request got.
	oneShot := withoutRetries(admin)
	for _, c := range []struct {
		what, method, path string
		want               int
	}{
		{what: "create", method: http.MethodPost, path: "/api/v1/namespaces/fault/events", want: http.StatusServiceUnavailable},
		{what: "describe-pod query (a consistent LIST)", method: http.MethodGet,
			path: "/api/v1/namespaces/fault/events?fieldSelector=involvedObject.name%3Dw0-00001", want: http.StatusServiceUnavailable},
		{what: "GET by name", method: http.MethodGet, path: "/api/v1/namespaces/fault/events/w0-00001", want: http.StatusServiceUnavailable},
		{what: "LIST from the watch cache", method: http.MethodGet,
			path: "/apis/events.k8s.io/v1/namespaces/fault/events?resourceVersion=0&limit=1", want: http.StatusOK},
		{what: "metrics", method: http.MethodGet, path: "/metrics", want: http.StatusOK},
	} {
		var o createOutcome
		if c.method == http.MethodPost {
			o = probe.create("probe-during-outage")
		} else {
			o = send(oneShot, http.MethodGet, c.path, nil, http.StatusOK)
		}
		t.Logf("during the outage, %s: %d %s %q in %v", c.what, o.code, o.reason, o.message, o.took.Round(time.Millisecond))
		if o.code != c.want {
			t.Errorf("during the outage, %s %s: %d %s %q, want %d", c.what, c.path, o.code, o.reason, o.message, c.want)
		}
		if o.code == http.StatusServiceUnavailable && (o.reason != metav1.StatusReasonServiceUnavailable || o.retryAfter == "") {
			t.Errorf("during the outage, %s: 503 %q without Retry-After %q", c.what, o.reason, o.retryAfter)
		}
	}
	if got := framework.MetricValue(t, server.Config(t), "event_apiserver_etcd_available", nil); got != 0 {
		t.Errorf("event_apiserver_etcd_available is %v during the outage, want 0", got)
	}
	// Longer than the request timeout: nothing may wait for etcd that long.
	time.Sleep(faultRequestTimeout + 5*time.Second)
	duringOutage := created()

	if err := etcd.Restart(); err != nil {
		t.Fatal(err)
	}
	restartedAt := time.Now()
	// The storage's etcd client redials with gRPC's backoff, up to two
	// minutes apart; until it has, the gate stays closed.
	waitFor("creates after the fault", 3*time.Minute, func() bool { return created() > duringOutage })
	t.Logf("creates succeed again %v after etcd restarted", time.Since(restartedAt).Round(time.Millisecond))
	waitFor("/readyz after etcd is back", 3*time.Minute, func() bool {
		return admin.Do(t, http.MethodGet, "/readyz", nil, nil).Code == http.StatusOK
	})
	t.Logf("/readyz ok %v after etcd restarted", time.Since(restartedAt).Round(time.Millisecond))
	if got := framework.MetricValue(t, server.Config(t), "event_apiserver_etcd_available", nil); got != 1 {
		t.Errorf("event_apiserver_etcd_available is %v after etcd is back, want 1", got)
	}
	waitFor("creates after the fault", time.Minute, func() bool { return created() >= duringOutage+50 })
	stopLoad()
	wg.Wait()
	stopWatching()
	<-watcherDone
	if d := died.Load(); d != nil {
		t.Fatalf("the server did not survive: %v", d)
	}

	// Every acknowledged create is there; every failure was a clear Status
	// in time.
	var acknowledged, readable, failed int
	failures := map[string]int{}
	var slowest time.Duration
	for _, w := range writers {
		for _, o := range w.outcomes {
			slowest = max(slowest, o.took)

			if o.took > faultRequestTimeout+5*time.Second {
				t.Errorf("create %s took %v, more than the request timeout %v", o.name, o.took, faultRequestTimeout)
			}
			if o.code == http.StatusCreated {
				acknowledged++
				r := admin.Do(t, http.MethodGet, "/api/v1/namespaces/fault/events/"+o.name, nil, nil)
				if r.Code == http.StatusOK {
					readable++
				} else {
					t.Errorf("create %s was acknowledged, GET answers %d %s", o.name, r.Code, r.Body)
				}
				continue
			}
			failed++
			failures[fmt.Sprintf("%d %s: %s", o.code, o.reason, o.message)]++
			// Sent as etcd died, waiting for it when the gate closed, or
			// refused by the closed gate: all a 503 to retry, none a 504
			// at the request timeout or a 500 with the etcd client's error.
			if o.code != http.StatusServiceUnavailable || o.reason != metav1.StatusReasonServiceUnavailable || o.retryAfter == "" {
				t.Errorf("create %s failed without a 503 and Retry-After: %d %q %q (Retry-After %q) after %v",
					o.name, o.code, o.reason, o.message, o.retryAfter, o.took.Round(time.Millisecond))
			}
		}
	}
	t.Logf("%d creates acknowledged, %d of them readable afterwards; %d failed; slowest request %v",
		acknowledged, readable, failed, slowest.Round(time.Millisecond))

	var lines []string
	for f, n := range failures {
		lines = append(lines, fmt.Sprintf("%5d × %s", n, f))
	}
	sort.Strings(lines)
	t.Logf("failures:\n%s", strings.Join(lines, "\n"))
	if failed == 0 {
		t.Errorf("no create failed while etcd was down: was it?")
	}
}
