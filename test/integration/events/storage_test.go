package events

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/eventapiserver/event-apiserver/pkg/ttl"
	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// protobufPrefix starts every protobuf-encoded value kube-apiserver writes.
var protobufPrefix = []byte("k8s\x00")

// leaseGrantSeconds is the lease k8s.io/apiserver's etcd3 lease manager
// grants for a TTL with the default --lease-reuse-duration-seconds (60):
// the TTL plus a reuse margin of min(5% of it, 60s), so that one lease can
// serve many keys written close together.
func leaseGrantSeconds(d time.Duration) int64 {
	return ttl.LeaseSeconds(int64(d.Seconds()), 60)
}

// TestStorageLayout reads etcd under a server started with the default
// --event-ttl: Events written through either API sit under
// /registry/events/<ns>/<name> as core/v1 protobuf with a lease of
// 1h plus the lease manager's 60s reuse margin, as kube-apiserver stores them.
func TestStorageLayout(t *testing.T) {
	t.Parallel()
	server := framework.StartServer(t, framework.ServerOptions{EmbeddedEtcdPort: framework.FreePort(t)})
	client := server.Client(t)
	etcd := framework.EtcdClient(t, server.EtcdURL)
	const ns = "storage"

	if got, want := leaseGrantSeconds(time.Hour), int64(3660); got != want {
		t.Fatalf("leaseGrantSeconds(1h) = %d, want %d", got, want)
	}

	tests := []struct {
		name string
		// create writes the Event and returns it as core/v1.
		create func(ctx context.Context) (*corev1.Event, error)
	}{
		{
			name: "core/v1",
			create: func(ctx context.Context) (*corev1.Event, error) {
				return client.CoreV1().Events(ns).Create(ctx, framework.FullCoreEvent(ns, "from-core"), metav1.CreateOptions{})
			},
		},
		{
			name: "events.k8s.io/v1",
			create: func(ctx context.Context) (*corev1.Event, error) {
				created, err := client.EventsV1().Events(ns).Create(ctx, framework.FullEventsV1Event(ns, "from-events"), metav1.CreateOptions{})
				if err != nil {
					return nil, err
				}
				return framework.CoreFromEventsV1(created), nil
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			created, err := tc.create(ctx)
			if err != nil {
				t.Fatal(err)
			}
			key := fmt.Sprintf("/registry/events/%s/%s", ns, created.Name)
			kv := getKey(t, etcd, key)
			if kv == nil {
				t.Fatalf("etcd has no key %s", key)
			}
			if !bytes.HasPrefix(kv.Value, protobufPrefix) {
				t.Fatalf("value of %s does not start with %q: %q", key, protobufPrefix, framework.Truncate(kv.Value, 64))
			}
			stored := decodeStoredEvent(t, kv.Value)
			// Storage drops the resourceVersion; etcd's mod revision is it.
			if got, want := fmt.Sprint(kv.ModRevision), created.ResourceVersion; got != want {
				t.Errorf("mod revision %s, want the created resourceVersion %s", got, want)
			}
			want := created.DeepCopy()
			want.ResourceVersion = ""
			assertSameCoreEvent(t, "stored Event", want, stored)

			if kv.Lease == 0 {
				t.Fatalf("key %s has no lease", key)
			}
			ttl, err := etcd.TimeToLive(ctx, clientv3.LeaseID(kv.Lease))
			if err != nil {
				t.Fatal(err)
			}
			if want := leaseGrantSeconds(time.Hour); ttl.GrantedTTL != want {
				t.Errorf("lease granted for %ds, want %ds (--event-ttl 1h plus the lease manager's reuse margin)", ttl.GrantedTTL, want)
			}
			if ttl.TTL <= 3600-60 || ttl.TTL > ttl.GrantedTTL {
				t.Errorf("lease has %ds left of %ds", ttl.TTL, ttl.GrantedTTL)
			}
		})
	}

	t.Run("update keeps the layout and a lease", func(t *testing.T) {
		ctx := context.Background()
		patched, err := client.CoreV1().Events(ns).Patch(ctx, "from-core", "application/strategic-merge-patch+json",
			[]byte(`{"count":8}`), metav1.PatchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		kv := getKey(t, etcd, "/registry/events/"+ns+"/from-core")
		if kv == nil {
			t.Fatal("key gone after a patch")
		}
		stored := decodeStoredEvent(t, kv.Value)
		if stored.Count != 8 || fmt.Sprint(kv.ModRevision) != patched.ResourceVersion {
			t.Errorf("stored count %d at revision %d, want 8 at %s", stored.Count, kv.ModRevision, patched.ResourceVersion)
		}
		if kv.Lease == 0 {
			t.Errorf("patched key has no lease: the TTL must apply to updates too")
		}
	})
}

// TestEventTTL runs a server with --event-ttl=5s: the lease is granted for
// exactly 5s (5% of 5s rounds down to no reuse margin), and once it expires
// the Event is gone from lists and a running watch sees it DELETED.
func TestEventTTL(t *testing.T) {
	t.Parallel()
	const ttl = 5 * time.Second
	server := framework.StartServer(t, framework.ServerOptions{
		EmbeddedEtcdPort: framework.FreePort(t),
		EventTTL:         ttl,
	})
	client := server.Client(t)
	etcd := framework.EtcdClient(t, server.EtcdURL)
	const ns = "ttl"

	tests := []struct {
		name   string
		create func(ctx context.Context, name string) (string, error)
	}{
		{
			name: "core/v1",
			create: func(ctx context.Context, name string) (string, error) {
				e, err := client.CoreV1().Events(ns).Create(ctx, framework.FullCoreEvent(ns, name), metav1.CreateOptions{})
				if err != nil {
					return "", err
				}
				return e.ResourceVersion, nil
			},
		},
		{
			name: "events.k8s.io/v1",
			create: func(ctx context.Context, name string) (string, error) {
				e, err := client.EventsV1().Events(ns).Create(ctx, framework.FullEventsV1Event(ns, name), metav1.CreateOptions{})
				if err != nil {
					return "", err
				}
				return e.ResourceVersion, nil
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // each waits out the TTL
			// Its own deadline: parallel subtests start only when a slot
			// of go test -parallel is free, maybe long after the parent's.
			ctx := framework.PollCtx(t)
			name := framework.UniqueName("expiring")
			// Watch both APIs from before the create.
			list, err := client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			coreWatch, err := client.CoreV1().Events(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
			if err != nil {
				t.Fatal(err)
			}
			defer coreWatch.Stop()
			eventsWatch, err := client.EventsV1().Events(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
			if err != nil {
				t.Fatal(err)
			}
			defer eventsWatch.Stop()

			created := time.Now()
			if _, err := tc.create(ctx, name); err != nil {
				t.Fatal(err)
			}
			kv := getKey(t, etcd, "/registry/events/"+ns+"/"+name)
			if kv == nil || kv.Lease == 0 {
				t.Fatalf("key for %s missing or without lease: %+v", name, kv)
			}
			lease, err := etcd.TimeToLive(ctx, clientv3.LeaseID(kv.Lease))
			if err != nil {
				t.Fatal(err)
			}
			if want := leaseGrantSeconds(ttl); lease.GrantedTTL != want {
				t.Errorf("lease granted for %ds, want %ds", lease.GrantedTTL, want)
			}

			// Bounded: the TTL, etcd's expiry check and the watch cache's
			// delivery take seconds; 30s more means the TTL is not working.
			deadline := ttl + 30*time.Second
			var wg sync.WaitGroup
			for _, w := range []struct {
				api   string
				watch watch.Interface
			}{{"core/v1", coreWatch}, {"events.k8s.io/v1", eventsWatch}} {
				wg.Go(func() {
					deletedAt, err := waitDeleted(w.watch, name, created.Add(deadline))
					if err != nil {
						t.Errorf("%s watch: %v", w.api, err)
						return
					}
					// The lease cannot expire before the TTL; allow a second
					// for etcd's whole-second TTL accounting.
					if early := ttl - time.Second; deletedAt.Sub(created) < early {
						t.Errorf("%s watch: DELETED after %v, before the %v TTL", w.api, deletedAt.Sub(created), ttl)
					}
				})
			}
			wg.Wait()

			for _, api := range []string{"core/v1", "events.k8s.io/v1"} {
				names, err := listNames(ctx, client, api, ns)
				if err != nil {
					t.Fatal(err)
				}
				if names[name] {
					t.Errorf("%s list still has %s after it expired", api, name)
				}
			}
			if _, err := client.CoreV1().Events(ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("GET after expiry: %v, want NotFound", err)
			}
			if kv := getKey(t, etcd, "/registry/events/"+ns+"/"+name); kv != nil {
				t.Errorf("etcd still has the key after expiry")
			}
		})
	}
}

// waitDeleted reads w until it reports name DELETED or the deadline passes.
func waitDeleted(w watch.Interface, name string, deadline time.Time) (time.Time, error) {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	var added bool
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				return time.Time{}, fmt.Errorf("watch closed before %s was DELETED", name)
			}
			if ev.Type == watch.Error {
				return time.Time{}, fmt.Errorf("watch error: %v", apierrors.FromObject(ev.Object))
			}
			m, ok := ev.Object.(metav1.Object)
			if !ok || m.GetName() != name {
				continue
			}
			switch ev.Type {
			case watch.Added:
				added = true
			case watch.Deleted:
				if !added {
					return time.Time{}, fmt.Errorf("DELETED %s without ADDED first", name)
				}
				return time.Now(), nil
			}
		case <-timer.C:
			return time.Time{}, fmt.Errorf("no DELETED for %s by %v (ADDED seen: %v)", name, deadline.Format(time.RFC3339), added)
		}
	}
}

// listNames lists the namespace through one API.
func listNames(ctx context.Context, client kubernetes.Interface, api, ns string) (map[string]bool, error) {
	names := map[string]bool{}
	switch api {
	case "core/v1":
		list, err := client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		for _, e := range list.Items {
			names[e.Name] = true
		}
	case "events.k8s.io/v1":
		list, err := client.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		for _, e := range list.Items {
			names[e.Name] = true
		}
	default:
		return nil, fmt.Errorf("unknown API %q", api)
	}
	return names, nil
}

// storedKey is one etcd key's value and metadata.
type storedKey struct {
	Value       []byte
	ModRevision int64
	Lease       int64
}

// getKey reads one key, nil when absent.
func getKey(t *testing.T, c *clientv3.Client, key string) *storedKey {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.Get(ctx, key)
	if err != nil {
		t.Fatalf("etcd get %s: %v", key, err)
	}
	if len(resp.Kvs) == 0 {
		return nil
	}
	kv := resp.Kvs[0]
	return &storedKey{Value: kv.Value, ModRevision: kv.ModRevision, Lease: kv.Lease}
}

// decodeStoredEvent decodes an etcd value with a scheme that knows only
// k8s.io/api core/v1, as any reader of kube-apiserver's etcd would.
func decodeStoredEvent(t *testing.T, value []byte) *corev1.Event {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	obj, gvk, err := protobuf.NewSerializer(scheme, scheme).Decode(value, nil, nil)
	if err != nil {
		t.Fatalf("decoding stored value: %v", err)
	}
	if gvk.GroupVersion() != corev1.SchemeGroupVersion || gvk.Kind != "Event" {
		t.Errorf("stored as %v, want core/v1 Event", gvk)
	}
	event, ok := obj.(*corev1.Event)
	if !ok {
		t.Fatalf("stored value decodes to %T, want *v1.Event", obj)
	}
	return event
}
