package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"

	historyv1alpha1 "github.com/eventapiserver/event-apiserver/pkg/apis/history/v1alpha1"
	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// deploymentProbes are the readiness, liveness and startup probe paths of
// the aggregated overlay's Deployment, as rendered, and how long its
// startupProbe lets a start take before the kubelet restarts the container.
func deploymentProbes(t *testing.T) (readiness, liveness, startup string, startupBudget time.Duration) {
	t.Helper()
	deploy := &appsv1.Deployment{}
	framework.FromUnstructured(t, framework.FindObject(t, framework.SplitManifests(t, framework.RenderOverlay(t, "overlays/aggregated")), "Deployment", "event-apiserver"), deploy)
	c := deploy.Spec.Template.Spec.Containers[0]
	for _, p := range []*corev1.Probe{c.ReadinessProbe, c.LivenessProbe, c.StartupProbe} {
		if p == nil || p.HTTPGet == nil {
			t.Fatalf("the Deployment's container lacks an httpGet readiness, liveness or startup probe: %+v", c)
		}
	}
	sp := c.StartupProbe
	startupBudget = time.Duration(sp.InitialDelaySeconds+sp.PeriodSeconds*sp.FailureThreshold) * time.Second
	return c.ReadinessProbe.HTTPGet.Path, c.LivenessProbe.HTTPGet.Path, sp.HTTPGet.Path, startupBudget
}

// TestReadinessDuringEtcdOutage: with etcd stopped, a replica stays ready on
// the readiness probe path the manifests use, so it stays in its Service
// and serves what needs no etcd (lists and watches at resourceVersion=0,
// the watch already open, eventrecords), while its /readyz check
// etcd-writes fails and what needs etcd gets 503 with Retry-After at once.
// A replica started while etcd is down stays up (kube-apiserver exits),
// serves history and is never ready until etcd answers. Both recover by
// themselves when etcd returns: writes, and a watch sees them.
func TestReadinessDuringEtcdOutage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	readinessPath, livenessPath, startupPath, startupBudget := deploymentProbes(t)
	t.Logf("probes from deploy/: readiness %s, liveness %s, startup %s (at most %v)", readinessPath, livenessPath, startupPath, startupBudget)

	etcd := framework.StartEtcd(t)
	start := func() *framework.Server {
		return framework.StartServer(t, framework.ServerOptions{
			EtcdServers: etcd.ClientURL(),
		})
	}
	// Two replicas over one etcd, as the Deployment runs them: the first
	// rides out the outage, the second is restarted during it.
	steady, restarted := start(), start()
	// A quiet start: gRPC's abandoned first dial of every etcd client is
	// no warning (etcdclient.QuietAbandonedDials).
	for _, s := range []*framework.Server{steady, restarted} {
		if s.LogContains("operation was canceled") || s.LogContains("use of closed network connection") {
			t.Errorf("the server's start logged abandoned etcd dials:\n%s", s.Process().Tail(40))
		}
	}
	admin := framework.AdminRawClient(t, steady)
	client := steady.Client(t)

	ns := framework.UniqueName("outage")
	for i := range 3 {
		if _, err := client.CoreV1().Events(ns).Create(ctx, framework.RecorderStyleCoreEvent(ns, fmt.Sprintf("before-%d", i)), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	recordsPath := "/apis/history.eventapiserver.io/v1alpha1/namespaces/" + ns + "/eventrecords"
	countRecords := func(c *framework.RawClient) (int, framework.Response) {
		r := c.Do(t, http.MethodGet, recordsPath, nil, nil)
		var list historyv1alpha1.EventRecordList
		if r.Code != http.StatusOK || json.Unmarshal(r.Body, &list) != nil {
			return -1, r
		}
		return len(list.Items), r
	}
	if err := wait.PollUntilContextTimeout(ctx, framework.PollInterval, framework.PollTimeout, true, func(context.Context) (bool, error) {
		n, _ := countRecords(admin)
		return n == 3, nil
	}); err != nil {
		t.Fatalf("history never held the 3 Events: %v", err)
	}
	// A watch open before the outage, which must go on through it.
	openWatch, err := client.CoreV1().Events(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		t.Fatal(err)
	}
	defer openWatch.Stop()
	for range 3 {
		if ev := <-openWatch.ResultChan(); ev.Type != watch.Added {
			t.Fatalf("the watch's initial events: %v %+v", ev.Type, ev.Object)
		}
	}

	// A probe as the kubelet's: a refused connection is a failure, not an error.
	probe := func(c *framework.RawClient, path string) framework.Response {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.BaseURL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+c.Token)
		resp, err := c.HTTP.Do(req)
		if err != nil {
			return framework.Response{Body: []byte(err.Error())}
		}
		defer func() { _ = resp.Body.Close() }()
		body, _ := io.ReadAll(resp.Body)
		return framework.Response{Code: resp.StatusCode, Body: body}
	}
	if r := probe(admin, readinessPath); r.Code != http.StatusOK {
		t.Fatalf("readiness probe %s before the outage: %d %s", readinessPath, r.Code, r.Body)
	}

	if err := etcd.Stop(); err != nil {
		t.Fatal(err)
	}
	stoppedAt := time.Now()
	if err := wait.PollUntilContextTimeout(ctx, framework.PollInterval, framework.PollTimeout, true, func(context.Context) (bool, error) {
		return probe(admin, "/readyz/etcd-writes").Code != http.StatusOK, nil
	}); err != nil {
		t.Fatalf("/readyz/etcd-writes still passes with etcd stopped: %v", err)
	}
	t.Logf("/readyz/etcd-writes failed %v after etcd stopped", time.Since(stoppedAt).Round(time.Millisecond))

	t.Run("the probe path stays ready, the writes check fails", func(t *testing.T) {
		if r := probe(admin, readinessPath+"&verbose"); r.Code != http.StatusOK {
			t.Errorf("readiness probe %s during the outage: %d\n%s", readinessPath, r.Code, r.Body)
		} else if !strings.Contains(string(r.Body), "[+]watch-cache ok") {
			t.Errorf("the readiness probe does not run the watch-cache check:\n%s", r.Body)
		}
		if r := probe(admin, livenessPath); r.Code != http.StatusOK {
			t.Errorf("liveness probe %s during the outage: %d %s", livenessPath, r.Code, r.Body)
		}
		// Unfiltered, /readyz says what kube-apiserver's would: not all is well.
		r := probe(admin, "/readyz?verbose")
		if r.Code == http.StatusOK || !strings.Contains(string(r.Body), "[-]etcd-writes failed") {
			t.Errorf("/readyz during the outage: %d, want a failure naming etcd-writes:\n%s", r.Code, r.Body)
		}
		if got := framework.MetricValue(t, steady.Config(t), "event_apiserver_etcd_writes_available", nil); got != 0 {
			t.Errorf("event_apiserver_etcd_writes_available = %v during the outage, want 0", got)
		}
	})

	t.Run("what needs no etcd is served, what needs it gets 503 with Retry-After", func(t *testing.T) {
		oneShot := withoutRetries(admin)
		for _, c := range []struct {
			what, method, path string
			want               int
		}{
			{"create", http.MethodPost, "/api/v1/namespaces/" + ns + "/events", http.StatusServiceUnavailable},
			{"GET by name", http.MethodGet, "/api/v1/namespaces/" + ns + "/events/before-0", http.StatusServiceUnavailable},
			{"consistent LIST", http.MethodGet, "/api/v1/namespaces/" + ns + "/events", http.StatusServiceUnavailable},
			{"LIST at resourceVersion=0", http.MethodGet, "/api/v1/namespaces/" + ns + "/events?resourceVersion=0", http.StatusOK},
			{"events.k8s.io LIST at resourceVersion=0", http.MethodGet, "/apis/events.k8s.io/v1/namespaces/" + ns + "/events?resourceVersion=0", http.StatusOK},
			{"eventrecords", http.MethodGet, recordsPath, http.StatusOK},
		} {
			var o createOutcome
			if c.method == http.MethodPost {
				body, err := json.Marshal(framework.RecorderStyleCoreEvent(ns, "during"))
				if err != nil {
					t.Fatal(err)
				}
				o = send(oneShot, c.method, c.path, body, http.StatusCreated)
			} else {
				o = send(oneShot, c.method, c.path, nil, http.StatusOK)
			}
			t.Logf("%s: %d %s %q (Retry-After %q) in %v", c.what, o.code, o.reason, o.message, o.retryAfter, o.took.Round(time.Millisecond))
			if o.code != c.want {
				t.Errorf("%s %s during the outage: %d %q, want %d", c.what, c.path, o.code, o.message, c.want)
			}
			if o.code == http.StatusServiceUnavailable && (o.reason != metav1.StatusReasonServiceUnavailable || o.retryAfter == "") {
				t.Errorf("%s: 503 %q without Retry-After", c.what, o.reason)
			}
			if o.took > 5*time.Second {
				t.Errorf("%s took %v: the 503 must come at once", c.what, o.took)
			}
		}
		if n, r := countRecords(admin); n != 3 {
			t.Errorf("eventrecords during the outage: %d items (%d %s), want 3", n, r.Code, r.Body)
		}
		// A new watch from the cache, and the one opened before.
		w, err := client.CoreV1().Events(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			t.Fatalf("a watch at resourceVersion=0 during the outage: %v", err)
		}
		defer w.Stop()
		for range 3 {
			if ev := <-w.ResultChan(); ev.Type != watch.Added {
				t.Fatalf("a watch opened during the outage: %v %+v", ev.Type, ev.Object)
			}
		}
		select {
		case ev, ok := <-openWatch.ResultChan():
			t.Errorf("the watch opened before the outage ended or got %v (open %v): %+v", ev.Type, ok, ev.Object)
		default:
		}
	})

	t.Run("a replica started during the outage stays up, serves history, is not ready", func(t *testing.T) {
		// kube-apiserver cannot build its storage without etcd (the
		// generic storage factory dials with grpc.WithBlock for 20 s) and
		// exits, to be restarted by the kubelet until etcd answers. This
		// server's storage does not wait for etcd
		// (etcdclient.NewRawStorage): the replica stays up past those 20 s,
		// serves history and its health checks, and fails etcd-writes and
		// watch-cache, so it is never ready on the probe path meanwhile.
		if err := restarted.Stop(); err != nil {
			t.Fatal(err)
		}
		if err := restarted.Process().Start(); err != nil {
			t.Fatal(err)
		}
		restartedAt := time.Now()
		restartedAdmin := framework.AdminRawClient(t, restarted)
		// Up past the 20 s after which kube-apiserver gives up, and live
		// once poststarthook/storage-readiness stops waiting for the watch
		// cache (--storage-initialization-timeout, 1 minute): within the
		// startupProbe's budget, so the kubelet does not restart it.
		var last framework.Response
		err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, startupBudget, true, func(context.Context) (bool, error) {
			if !restarted.Running() {
				return false, fmt.Errorf("the replica started while etcd is down exited: %s", restarted.Process().Exited())
			}
			if r := probe(restartedAdmin, readinessPath); r.Code == http.StatusOK {
				return false, fmt.Errorf("the replica started while etcd is down passed its readiness probe")
			}
			// The full /readyz runs kube's etcd check, which waits on its
			// client's dial (20 s, grpc.WithBlock) while etcd is down, so
			// most calls outlast the probe's 5 s: the last answer counts.
			if r := probe(restartedAdmin, "/readyz?verbose"); r.Code != 0 {
				last = r
			}
			return time.Since(restartedAt) > 25*time.Second && probe(restartedAdmin, startupPath).Code == http.StatusOK, nil
		})
		if err != nil {
			t.Fatalf("the replica started while etcd is down, %v later: %v\n%s", time.Since(restartedAt).Round(time.Second), err, restarted.Process().Tail(20))
		}
		t.Logf("the replica started while etcd is down is up, live and not ready %v later", time.Since(restartedAt).Round(time.Second))
		if last.Code != http.StatusInternalServerError || !strings.Contains(string(last.Body), "[-]etcd-writes failed") ||
			!strings.Contains(string(last.Body), "[-]watch-cache failed") {
			t.Errorf("/readyz of the replica started while etcd is down: %d, want 500 naming etcd-writes and watch-cache:\n%s", last.Code, last.Body)
		}
		if r := probe(restartedAdmin, "/readyz/etcd-writes"); r.Code == http.StatusOK {
			t.Errorf("/readyz/etcd-writes of the replica started while etcd is down: %d %s", r.Code, r.Body)
		}
		if r := probe(restartedAdmin, livenessPath); r.Code != http.StatusOK {
			t.Errorf("liveness probe %s of the replica started while etcd is down: %d %s", livenessPath, r.Code, r.Body)
		}
		if n, r := countRecords(restartedAdmin); n != 3 {
			t.Errorf("eventrecords from the replica started while etcd is down: %d items (%d %s), want 3", n, r.Code, r.Body)
		}
	})

	t.Run("the outage lasts, the steady replica stays ready", func(t *testing.T) {
		// Across several etcd health probes and readiness periods.
		probes := 0
		_ = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 15*time.Second, true, func(context.Context) (bool, error) {
			probes++
			if r := probe(admin, readinessPath); r.Code != http.StatusOK {
				t.Errorf("readiness probe %d during the outage: %d %s", probes, r.Code, r.Body)
				return true, nil
			}
			return false, nil
		})
		if r := send(withoutRetries(admin), http.MethodGet, "/api/v1/namespaces/"+ns+"/events?resourceVersion=0", nil, http.StatusOK); r.code != http.StatusOK {
			t.Errorf("LIST at resourceVersion=0 %v into the outage: %d %q", time.Since(stoppedAt).Round(time.Second), r.code, r.message)
		}
	})

	if err := etcd.Restart(); err != nil {
		t.Fatal(err)
	}
	restartedAt := time.Now()
	t.Run("everything recovers when etcd returns", func(t *testing.T) {
		// Both by themselves: the replica started during the outage fills
		// its watch cache once etcd answers, with no restart.
		for _, s := range []*framework.Server{steady, restarted} {
			c := framework.AdminRawClient(t, s)
			// The storage's client redials with gRPC's backoff, up to two
			// minutes apart.
			err := wait.PollUntilContextTimeout(ctx, framework.PollInterval, 3*time.Minute, true, func(context.Context) (bool, error) {
				return probe(c, "/readyz").Code == http.StatusOK && probe(c, readinessPath).Code == http.StatusOK, nil
			})
			if err != nil {
				t.Fatalf("%s: /readyz or the probe path not ok after etcd returned: %v\n%s", s.URL, err, probe(c, "/readyz?verbose").Body)
			}
			// A watch from the cache sees a write made after etcd returned.
			w, err := s.Client(t).CoreV1().Events(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: "0"})
			if err != nil {
				t.Fatalf("%s: a watch after etcd returned: %v", s.URL, err)
			}
			name := framework.UniqueName("after")
			if _, err := s.Client(t).CoreV1().Events(ns).Create(ctx, framework.RecorderStyleCoreEvent(ns, name), metav1.CreateOptions{}); err != nil {
				t.Errorf("%s: create after etcd returned: %v", s.URL, err)
			}
			wctx, cancel := context.WithTimeout(ctx, framework.PollTimeout)
			got, _ := framework.Observe(wctx, w, func(got []framework.Seen) bool {
				return len(framework.OfType(framework.WithPrefix(got, name), watch.Added)) > 0
			})
			cancel()
			if len(framework.OfType(framework.WithPrefix(got, name), watch.Added)) == 0 {
				t.Errorf("%s: a watch opened after etcd returned did not see the create of %s: %v", s.URL, name, got)
			}
			if r := probe(c, "/readyz/etcd-writes"); r.Code != http.StatusOK {
				t.Errorf("%s: /readyz/etcd-writes after etcd returned: %d %s", s.URL, r.Code, r.Body)
			}
			if got := framework.MetricValue(t, s.Config(t), "event_apiserver_etcd_writes_available", nil); got != 1 {
				t.Errorf("%s: event_apiserver_etcd_writes_available = %v after etcd returned, want 1", s.URL, got)
			}
		}
		t.Logf("both replicas ready and writing %v after etcd restarted", time.Since(restartedAt).Round(time.Millisecond))
	})
}
