package events

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// deletions records when each Event's DELETED reached a watch.
type deletions struct {
	mu sync.Mutex
	at map[string]time.Time
}

func (d *deletions) record(ctx context.Context, w watch.Interface) {
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				return
			}
			if ev.Type != watch.Deleted {
				continue
			}
			if m, ok := ev.Object.(metav1.Object); ok {
				d.mu.Lock()
				d.at[m.GetName()] = time.Now()
				d.mu.Unlock()
			}
		case <-ctx.Done():
			return
		}
	}
}

func (d *deletions) get(name string) (time.Time, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	at, ok := d.at[name]
	return at, ok
}

// TestEventTTLRules runs a server with two rules, Warning 10s and Normal 3s
// (--event-ttl 1h applies to neither): each Event gets a lease of its rule's
// TTL, through either API, and expires on its own schedule, seen by watches
// of both APIs and by lists; a series PATCH restarts the Warning rule's TTL.
func TestEventTTLRules(t *testing.T) {
	t.Parallel()
	const warningTTL, normalTTL = 10 * time.Second, 3 * time.Second
	server := framework.StartServer(t, framework.ServerOptions{
		EmbeddedEtcdPort: framework.FreePort(t),
		ExtraArgs:        []string{"--event-ttl-rule=type=Warning:10s", "--event-ttl-rule=type=Normal:3s"},
	})
	client := server.Client(t)
	etcd := framework.EtcdClient(t, server.EtcdURL)
	const ns = "ttl-rules"
	ctx := framework.PollCtx(t)

	list, err := client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]*deletions{}
	for api, open := range map[string]func() (watch.Interface, error){
		"core/v1": func() (watch.Interface, error) {
			return client.CoreV1().Events(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
		},
		"events.k8s.io/v1": func() (watch.Interface, error) {
			return client.EventsV1().Events(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
		},
	} {
		w, err := open()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Stop)
		seen[api] = &deletions{at: map[string]time.Time{}}
		go seen[api].record(ctx, w)
	}

	type expiring struct {
		name    string
		ttl     time.Duration
		created time.Time
	}
	coreEvent := func(name, typ string) func() error {
		return func() error {
			e := framework.FullCoreEvent(ns, name)
			e.Type = typ
			_, err := client.CoreV1().Events(ns).Create(ctx, e, metav1.CreateOptions{})
			return err
		}
	}
	eventsEvent := func(name, typ string) func() error {
		return func() error {
			e := framework.FullEventsV1Event(ns, name)
			e.Type = typ
			_, err := client.EventsV1().Events(ns).Create(ctx, e, metav1.CreateOptions{})
			return err
		}
	}
	tests := []struct {
		name   string
		ttl    time.Duration
		create func() error
	}{
		{"warning-core", warningTTL, coreEvent("warning-core", corev1.EventTypeWarning)},
		{"warning-events", warningTTL, eventsEvent("warning-events", corev1.EventTypeWarning)},
		{"normal-core", normalTTL, coreEvent("normal-core", corev1.EventTypeNormal)},
		{"normal-events", normalTTL, eventsEvent("normal-events", corev1.EventTypeNormal)},
		{"warning-series", warningTTL, eventsEvent("warning-series", corev1.EventTypeWarning)},
	}
	var events []expiring
	for _, tc := range tests {
		created := time.Now()
		if err := tc.create(); err != nil {
			t.Fatalf("creating %s: %v", tc.name, err)
		}
		events = append(events, expiring{tc.name, tc.ttl, created})
		assertLeaseTTL(t, etcd, ns, tc.name, tc.ttl)
	}

	waitGone := func(names ...string) {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, warningTTL+framework.PollTimeout, true, func(context.Context) (bool, error) {
			for _, name := range names {
				for _, d := range seen {
					if _, ok := d.get(name); !ok {
						return false, nil
					}
				}
			}
			return true, nil
		})
		if err != nil {
			t.Fatalf("no DELETED for all of %v in both watches: %v", names, err)
		}
	}
	// The Normal Events go first, while the Warnings stay.
	waitGone("normal-core", "normal-events")
	names, err := listNames(ctx, client, "events.k8s.io/v1", ns)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"warning-core", "warning-events", "warning-series"} {
		if !names[name] {
			t.Errorf("%s gone with the Normal Events, before its %v TTL", name, warningTTL)
		}
	}

	// A series heartbeat, as client-go's events recorder sends it, half way
	// through the Warning's TTL: an Event that was not extended would be
	// gone 5s later, this one only after 10s.
	series := &events[len(events)-1]
	seriesCreated := series.created
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, warningTTL, true, func(context.Context) (bool, error) {
		return time.Since(seriesCreated) >= warningTTL/2, nil
	}); err != nil {
		t.Fatal(err)
	}
	patched := time.Now()
	patch := fmt.Sprintf(`{"series":{"count":4,"lastObservedTime":%q}}`, metav1.NewMicroTime(patched).Format(metav1.RFC3339Micro))
	if _, err := client.EventsV1().Events(ns).Patch(ctx, "warning-series", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	assertLeaseTTL(t, etcd, ns, "warning-series", warningTTL)
	series.created = patched

	waitGone("warning-core", "warning-events", "warning-series")
	for _, e := range events {
		for api, d := range seen {
			at, _ := d.get(e.name)
			lived := at.Sub(e.created)
			// etcd counts whole seconds and checks expiry about every
			// 500ms; the watch cache delivers within a second or two.
			if lived < e.ttl-time.Second || lived > e.ttl+15*time.Second {
				t.Errorf("%s: %s DELETED %v after its last write, want about its %v TTL", api, e.name, lived.Round(time.Millisecond), e.ttl)
			} else {
				t.Logf("%s: %s DELETED %v after its last write (TTL %v)", api, e.name, lived.Round(time.Millisecond), e.ttl)
			}
		}
	}
	if at, _ := seen["core/v1"].get("warning-series"); at.Sub(seriesCreated) < warningTTL+warningTTL/2-time.Second {
		t.Errorf("warning-series DELETED %v after its create: the PATCH %v after the create did not extend it",
			at.Sub(seriesCreated), patched.Sub(seriesCreated))
	}
	for _, api := range []string{"core/v1", "events.k8s.io/v1"} {
		names, err := listNames(ctx, client, api, ns)
		if err != nil {
			t.Fatal(err)
		}
		if len(names) != 0 {
			t.Errorf("%s list after every TTL: %v", api, names)
		}
	}
}

// assertLeaseTTL checks the Event's key holds a lease granted for its TTL
// (plus the lease manager's reuse margin).
func assertLeaseTTL(t *testing.T, etcd *clientv3.Client, ns, name string, ttl time.Duration) {
	t.Helper()
	kv := getKey(t, etcd, framework.EtcdEventKey(ns, name))
	if kv == nil || kv.Lease == 0 {
		t.Fatalf("key of %s missing or without a lease: %+v", name, kv)
	}
	lease, err := etcd.TimeToLive(context.Background(), clientv3.LeaseID(kv.Lease))
	if err != nil {
		t.Fatal(err)
	}
	if want := leaseGrantSeconds(ttl); lease.GrantedTTL != want {
		t.Errorf("%s: lease granted for %ds, want %ds for its %v TTL", name, lease.GrantedTTL, want, ttl)
	}
}

// TestEventTTLRulesLeases writes 500 Events, Warning and Normal interleaved
// (creates through both APIs, then series PATCHes), under rules of 40s and
// 20s. One lease manager would grant a lease for almost every write, its one
// lease never matching the next write's TTL; with a store per TTL class the
// leases granted grow with the seconds the writes take (a class reuses its
// lease for 5% of its TTL: 2s and 1s here), not with the writes.
func TestEventTTLRulesLeases(t *testing.T) {
	t.Parallel()
	const creates, patches, workers = 400, 100, 8
	ttls := map[string]time.Duration{corev1.EventTypeWarning: 40 * time.Second, corev1.EventTypeNormal: 20 * time.Second}
	server := framework.StartServer(t, framework.ServerOptions{
		EmbeddedEtcdPort: framework.FreePort(t),
		ExtraArgs: []string{"--event-ttl-rule=type=Warning:40s", "--event-ttl-rule=type=Normal:20s",
			// Writes as fast as the machine allows, from two reporters.
			"--event-rate-limit-qps=0", "--event-rate-limit-update-qps=0", "--event-rate-limit-global-qps=0"},
	})
	client := framework.UnthrottledClient(t, server.Config(t))
	etcd := framework.EtcdClient(t, server.EtcdURL)
	const ns = "ttl-leases"
	ctx := framework.PollCtx(t)

	before, err := etcd.Leases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	existing := map[clientv3.LeaseID]bool{}
	for _, l := range before.Leases {
		existing[l.ID] = true
	}

	typeOf := func(i int) string {
		if i%2 == 0 {
			return corev1.EventTypeWarning
		}
		return corev1.EventTypeNormal
	}
	start := time.Now()
	var next atomic.Int64
	var failed atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= creates+patches {
					return
				}
				if err := ttlWrite(ctx, client, ns, i, creates, typeOf); err != nil {
					if failed.Add(1) <= 5 {
						t.Errorf("write %d: %v", i, err)
					}
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if failed.Load() > 0 {
		t.Fatalf("%d of %d writes failed", failed.Load(), creates+patches)
	}

	after, err := etcd.Leases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	granted := map[int64]int{}
	for _, l := range after.Leases {
		if existing[l.ID] {
			continue
		}
		ttl, err := etcd.TimeToLive(ctx, l.ID)
		if err != nil {
			t.Fatal(err)
		}
		granted[ttl.GrantedTTL]++
	}
	leases := 0
	for _, n := range granted {
		leases += n
	}
	metrics := map[string]float64{}
	for typ, ttl := range ttls {
		metrics[typ] = framework.MetricValue(t, server.Config(t), "event_apiserver_ttl_lease_grants_total", map[string]string{"ttl": ttl.String()})
	}
	t.Logf("%d writes (%d creates, %d series PATCHes, Warning and Normal interleaved) in %v: %d live leases by granted TTL %v; "+
		"grants counted by the server: Warning %v, Normal %v",
		creates+patches, creates, patches, elapsed.Round(time.Millisecond), leases, granted, metrics[corev1.EventTypeWarning], metrics[corev1.EventTypeNormal])

	// Per class, one grant per reuse window the writes span, and one more
	// for the window they start in.
	seconds := int(elapsed/time.Second) + 1
	if bound := seconds/1 + 1 + seconds/2 + 1; leases > bound {
		t.Errorf("%d leases for %d writes over %v, want at most %d (one per class per reuse window)", leases, creates+patches, elapsed, bound)
	}
	for ttlSeconds := range granted {
		if ttlSeconds != leaseGrantSeconds(ttls[corev1.EventTypeWarning]) && ttlSeconds != leaseGrantSeconds(ttls[corev1.EventTypeNormal]) {
			t.Errorf("a lease granted for %ds, which is no class's", ttlSeconds)
		}
	}
	if sum := metrics[corev1.EventTypeWarning] + metrics[corev1.EventTypeNormal]; int(sum) < leases {
		t.Errorf("the server counted %v grants, etcd holds %d new leases", sum, leases)
	}

	// Every Event's lease is its class's.
	resp, err := etcd.Get(ctx, framework.EtcdEventKey(ns, ""), clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != creates {
		t.Fatalf("etcd holds %d Events, want %d", len(resp.Kvs), creates)
	}
	grantedOf := map[int64]int64{}
	for _, kv := range resp.Kvs {
		e := decodeStoredEvent(t, kv.Value)
		if _, ok := grantedOf[kv.Lease]; !ok {
			ttl, err := etcd.TimeToLive(ctx, clientv3.LeaseID(kv.Lease))
			if err != nil {
				t.Fatal(err)
			}
			grantedOf[kv.Lease] = ttl.GrantedTTL
		}
		if got, want := grantedOf[kv.Lease], leaseGrantSeconds(ttls[e.Type]); got != want {
			t.Errorf("%s (%s): lease granted for %ds, want %ds", e.Name, e.Type, got, want)
		}
	}
}

// ttlWrite is write i of TestEventTTLRulesLeases: the first creates are
// creates, alternately through core/v1 and events.k8s.io/v1, the rest series
// PATCHes of the first Events.
func ttlWrite(ctx context.Context, client kubernetes.Interface, ns string, i, creates int, typeOf func(int) string) error {
	if i >= creates {
		target := i - creates
		patch := fmt.Sprintf(`{"series":{"count":9,"lastObservedTime":%q}}`, metav1.NewMicroTime(time.Now()).Format(metav1.RFC3339Micro))
		_, err := client.EventsV1().Events(ns).Patch(ctx, fmt.Sprintf("lease-%d", target), types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		return err
	}
	name := fmt.Sprintf("lease-%d", i)
	if i%4 < 2 {
		e := framework.FullCoreEvent(ns, name)
		e.Type = typeOf(i)
		_, err := client.CoreV1().Events(ns).Create(ctx, e, metav1.CreateOptions{})
		return err
	}
	e := framework.FullEventsV1Event(ns, name)
	e.Type = typeOf(i)
	_, err := client.EventsV1().Events(ns).Create(ctx, e, metav1.CreateOptions{})
	return err
}

// TestEventTTLRulesRefused runs the binary with bad rules: it must exit at
// once, before starting anything, naming the flag and the fault.
func TestEventTTLRulesRefused(t *testing.T) {
	t.Parallel()
	bin := framework.ServerBinary(t)
	tooMany := make([]string, 17)
	for i := range tooMany {
		tooMany[i] = fmt.Sprintf("--event-ttl-rule=reason=R%d:1m", i)
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown key", []string{"--event-ttl-rule=kind=Pod:1h"}, `--event-ttl-rule "kind=Pod:1h": unknown key "kind", want type, reason or reportingController`},
		{"bad duration", []string{"--event-ttl-rule=type=Warning:1d"}, `--event-ttl-rule "type=Warning:1d": bad duration "1d"`},
		{"negative", []string{"--event-ttl-rule=type=Warning:-1h"}, `--event-ttl-rule "type=Warning:-1h": TTL -1h0m0s must be at least 1s`},
		{"under a second", []string{"--event-ttl-rule=type=Normal:100ms"}, `--event-ttl-rule "type=Normal:100ms": TTL 100ms must be at least 1s`},
		{"no duration", []string{"--event-ttl-rule=type=Warning"}, `--event-ttl-rule "type=Warning": want KEY=VALUE[,KEY=VALUE...]:DURATION`},
		{"bad type", []string{"--event-ttl-rule=type=warning:1h"}, `type must be Normal or Warning, not "warning"`},
		{"too many rules", tooMany, "--event-ttl-rule: 17 rules given, at most 16 are allowed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), framework.PollTimeout)
			defer cancel()
			dataDir := t.TempDir()
			cmd := exec.CommandContext(ctx, bin, append([]string{"--data-dir=" + dataDir, "--secure-port=0"}, tc.args...)...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			exit, ok := err.(*exec.ExitError)
			if !ok || exit.ExitCode() != 1 {
				t.Fatalf("exit: %v, want status 1\nstderr:\n%s", err, stderr.String())
			}
			// component-base's cli.Run logs the error as a quoted klog value.
			if !strings.Contains(stderr.String(), strings.ReplaceAll(tc.want, `"`, `\"`)) {
				t.Errorf("stderr does not say %q:\n%s", tc.want, stderr.String())
			}
		})
	}
}
