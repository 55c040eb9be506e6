package ttl_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/storagebackend"

	"github.com/eventapiserver/event-apiserver/pkg/apis/core"
	"github.com/eventapiserver/event-apiserver/pkg/apiserver"
	"github.com/eventapiserver/event-apiserver/pkg/etcd"
	"github.com/eventapiserver/event-apiserver/pkg/ttl"
)

// testStorage starts an embedded etcd and builds the raw Event storage the
// server builds, for the given rules.
func testStorage(t *testing.T, rules *ttl.Rules) (storage.Interface, *clientv3.Client) {
	t.Helper()
	e, err := etcd.StartEmbedded(etcd.EmbeddedConfig{
		DataDir:                filepath.Join(t.TempDir(), "etcd"),
		ClientAddress:          "127.0.0.1:0",
		ProgressNotifyInterval: time.Second,
		ReadyTimeout:           time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	config := storagebackend.NewDefaultConfig("/registry", nil)
	config.Transport.ServerList = []string{e.ClientURL()}
	factory := apiserver.NewStorageFactory(*config, "application/vnd.kubernetes.protobuf")
	resourceConfig, err := factory.NewConfig(core.Resource("events"), &core.Event{})
	if err != nil {
		t.Fatal(err)
	}
	s, destroy, err := rules.NewRawStorage(resourceConfig,
		func() runtime.Object { return &core.Event{} }, func() runtime.Object { return &core.EventList{} }, "/events")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(destroy)
	client, err := clientv3.New(clientv3.Config{Endpoints: []string{e.ClientURL()}, DialTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	return s, client
}

func event(name, typ string) *core.Event {
	return &core.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: name, Namespace: "ns"},
		InvolvedObject: core.ObjectReference{Kind: "Pod", Namespace: "ns", Name: "p"},
		Reason:         "Test",
		Type:           typ,
	}
}

// grantedTTL is the granted TTL of the lease the key is attached to.
func grantedTTL(t *testing.T, c *clientv3.Client, key string) int64 {
	t.Helper()
	resp, err := c.Get(context.Background(), key)
	if err != nil || len(resp.Kvs) != 1 || resp.Kvs[0].Lease == 0 {
		t.Fatalf("key %s: %v %v", key, err, resp)
	}
	ttl, err := c.TimeToLive(context.Background(), clientv3.LeaseID(resp.Kvs[0].Lease))
	if err != nil {
		t.Fatal(err)
	}
	return ttl.GrantedTTL
}

func leases(t *testing.T, c *clientv3.Client) int {
	t.Helper()
	resp, err := c.Leases(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return len(resp.Leases)
}

// TestRouterLeases writes Events whose TTLs alternate, 40s and 20s, which
// the lease manager reuses for 2s and 1s. One etcd3 store, as with no rules,
// grants a lease for every write; a store per TTL class a handful.
func TestRouterLeases(t *testing.T) {
	const writes = 60
	// perWindow bounds the leases of a store per class: one per reuse
	// window (1s, 2s) the writes span, plus the window they start in.
	perWindow := func(elapsed time.Duration) (int, int) {
		s := int(elapsed / time.Second)
		return 2, s + 1 + s/2 + 1
	}
	tests := []struct {
		name  string
		rules []string
		// leases bounds the leases granted for writes that took elapsed.
		leases func(elapsed time.Duration) (min, max int)
	}{
		{"one lease manager for both TTLs", nil, func(time.Duration) (int, int) { return writes, writes }},
		{"a store per TTL class", []string{"type=Warning:40s"}, perWindow},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rules, err := ttl.Parse(tc.rules, 20*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			s, client := testStorage(t, rules)
			ctx := context.Background()
			start := time.Now()
			for i := range writes {
				typ := "Normal"
				if i%2 == 0 {
					typ = "Warning"
				}
				e := event(fmt.Sprintf("e%d", i), typ)
				// The TTL the Store's TTLFunc would pass, by the rule the
				// router is not told about when there are none.
				ttlSeconds := uint64(20)
				if i%2 == 0 {
					ttlSeconds = 40
				}
				if err := s.Create(ctx, "/events/ns/"+e.Name, e, &core.Event{}, ttlSeconds); err != nil {
					t.Fatal(err)
				}
			}
			elapsed := time.Since(start)
			n := leases(t, client)
			if lo, hi := tc.leases(elapsed); n < lo || n > hi {
				t.Errorf("%d leases for %d writes in %v, want %d to %d", n, writes, elapsed, lo, hi)
			}
			t.Logf("%d leases for %d writes in %v", n, writes, elapsed)
			for i := range 4 {
				want := int64(21)
				if i%2 == 0 {
					want = 42
				}
				if got := grantedTTL(t, client, fmt.Sprintf("/registry/events/ns/e%d", i)); got != want {
					t.Errorf("e%d: lease granted for %ds, want %ds", i, got, want)
				}
			}
		})
	}
}

// TestRouterUpdateChangesClass updates an Event into another TTL class:
// the write lands with the new class's lease, from that class's store.
func TestRouterUpdateChangesClass(t *testing.T) {
	rules, err := ttl.Parse([]string{"type=Warning:40s"}, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	s, client := testStorage(t, rules)
	ctx := context.Background()
	const key = "/events/ns/e"
	created := &core.Event{}
	if err := s.Create(ctx, key, event("e", "Normal"), created, 20); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		typ    string
		cached bool
		want   int64
	}{
		{"to Warning, cached", "Warning", true, 42},
		{"to Normal, cached", "Normal", true, 21},
		{"to Warning, not cached", "Warning", false, 42},
		{"stays Warning, not cached: tried in the default class first", "Warning", false, 42},
	}
	current := created
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var cached runtime.Object
			if tc.cached {
				cached = current
			}
			out := &core.Event{}
			tries := 0
			err := s.GuaranteedUpdate(ctx, key, out, false, nil, func(input runtime.Object, _ storage.ResponseMeta) (runtime.Object, *uint64, error) {
				tries++
				e := input.(*core.Event).DeepCopy()
				e.Type = tc.typ
				ttlSeconds := rules.Seconds(e)
				return e, &ttlSeconds, nil
			}, cached)
			if err != nil {
				t.Fatal(err)
			}
			if out.Type != tc.typ {
				t.Errorf("type %q after the update, want %q", out.Type, tc.typ)
			}
			if got := grantedTTL(t, client, "/registry"+key); got != tc.want {
				t.Errorf("lease granted for %ds, want %ds (tried %d times)", got, tc.want, tries)
			}
			current = out
		})
	}
}

// TestLeaseSeconds pins LeaseSeconds, which the TTL backstop reads an
// Event's deadline by, to the leases the etcd3 store's lease manager really
// grants: the TTL and 5% of it, at most the reuse duration (60s by default).
func TestLeaseSeconds(t *testing.T) {
	rules, err := ttl.Parse([]string{"type=Warning:2h", "reason=Short:20s"}, 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	s, client := testStorage(t, rules)
	ctx := context.Background()
	tests := []struct {
		name string
		e    *core.Event
	}{
		{"2m", event("normal", "Normal")},
		{"2h", event("warning", "Warning")},
		{"20s", func() *core.Event { e := event("short", "Normal"); e.Reason = "Short"; return e }()},
	}
	for _, tc := range tests {
		seconds := rules.Seconds(tc.e)
		if err := s.Create(ctx, "/events/ns/"+tc.e.Name, tc.e, &core.Event{}, seconds); err != nil {
			t.Fatal(err)
		}
		want := ttl.LeaseSeconds(int64(seconds), storagebackend.NewDefaultConfig("", nil).LeaseManagerConfig.ReuseDurationSeconds)
		if got := grantedTTL(t, client, "/registry/events/ns/"+tc.e.Name); got != want {
			t.Errorf("%s: lease granted for %ds, LeaseSeconds says %ds", tc.name, got, want)
		}
	}
}
