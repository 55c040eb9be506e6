package watch

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// listCounters are the server's LIST metrics for Events.
type listCounters struct {
	// cacheLists counts LISTs the watch cache served, cacheItems the items
	// they returned (apiserver_cache_list_total, _returned_objects_total).
	cacheLists, cacheItems float64
	// etcdLists and etcdItems are the same for etcd
	// (apiserver_storage_list_total, _returned_objects_total).
	etcdLists, etcdItems float64
	// consistent counts consistent reads the cache answered, fallback
	// those it handed to etcd for not catching up in time
	// (apiserver_watch_cache_consistent_read_total).
	consistent, fallback float64
}

func readListCounters(t *testing.T, config *rest.Config) listCounters {
	t.Helper()
	events := map[string]string{"group": "", "resource": "events"}
	return listCounters{
		cacheLists: framework.MetricValue(t, config, "apiserver_cache_list_total", events),
		cacheItems: framework.MetricValue(t, config, "apiserver_cache_list_returned_objects_total", events),
		etcdLists:  framework.MetricValue(t, config, "apiserver_storage_list_total", events),
		etcdItems:  framework.MetricValue(t, config, "apiserver_storage_list_returned_objects_total", events),
		consistent: framework.MetricValue(t, config, "apiserver_watch_cache_consistent_read_total",
			map[string]string{"resource": "events", "success": "true", "fallback": "false"}),
		fallback: framework.MetricValue(t, config, "apiserver_watch_cache_consistent_read_total",
			map[string]string{"resource": "events", "fallback": "true"}),
	}
}

func (c listCounters) minus(o listCounters) listCounters {
	return listCounters{
		cacheLists: c.cacheLists - o.cacheLists, cacheItems: c.cacheItems - o.cacheItems,
		etcdLists: c.etcdLists - o.etcdLists, etcdItems: c.etcdItems - o.etcdItems,
		consistent: c.consistent - o.consistent, fallback: c.fallback - o.fallback,
	}
}

// servedFromCache reports whether d is one consistent LIST of n items served
// by the cache. Such a LIST also reads etcd's current revision, a range read
// with limit 1 that the etcd3 store counts as a list
// (store.GetCurrentResourceVersion); it returns no more than one item. So
// does the etcd health gate's probe, once a second (pkg/etcdhealth), so the
// number of such reads in the window grows with the LIST's latency on a
// loaded machine: it is not bounded here, the items read from etcd are.
func (d listCounters) servedFromCache(n int) bool {
	return d.cacheLists == 1 && d.cacheItems == float64(n) && d.consistent == 1 && d.fallback == 0 &&
		d.etcdItems <= 1
}

// TestConsistentListFromCache (KEP-2340): a LIST without resourceVersion is
// served from the watch cache once it has caught up with etcd, also right
// after writes to other keys and to the Events themselves (the cache asks
// etcd for progress and waits for it), and it returns exactly what etcd
// holds at the list's resource version.
func TestConsistentListFromCache(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	target := startOurTarget(t)
	client, config, kv := target.client, target.config, target.etcd
	namespaces := []string{"list-a", "list-b"}
	for i := range 10 {
		ns := namespaces[i%2]
		createEvents(ctx, t, client, ns, fmt.Sprintf("seed-%d", i))
	}

	// The first consistent list may still reach etcd: wait until one is
	// served from the cache.
	deadline := time.Now().Add(30 * time.Second)
	for {
		before := readListCounters(t, config)
		list, err := client.CoreV1().Events("").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if readListCounters(t, config).minus(before).servedFromCache(len(list.Items)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no consistent LIST served from the cache within 30s")
		}
		time.Sleep(200 * time.Millisecond)
	}

	tests := []struct {
		name      string
		namespace string
	}{
		{name: "all namespaces", namespace: ""},
		{name: "one namespace", namespace: "list-a"},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// etcd moves ahead of the cache: other keys, then an Event.
			putOtherKeys(ctx, t, kv, 5)
			created := createEvents(ctx, t, client, "list-a", fmt.Sprintf("fresh-%d", i))[0]
			before := readListCounters(t, config)
			list, err := client.CoreV1().Events(tc.namespace).List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			d := readListCounters(t, config).minus(before)
			t.Logf("consistent LIST at %s: %d items; metrics: %+v", list.ResourceVersion, len(list.Items), d)
			if !d.servedFromCache(len(list.Items)) {
				t.Errorf("metrics moved by %+v, want one consistent LIST of %d items served from the cache", d, len(list.Items))
			}

			got := itemsByKey(list.Items)
			if _, ok := got["list-a/"+created.Name]; !ok {
				t.Errorf("LIST at %s misses %s created just before (at %s)", list.ResourceVersion, created.Name, created.RV)
			}
			want := etcdEventsAt(ctx, t, kv, tc.namespace, framework.RVInt(t, list.ResourceVersion))
			if !maps.Equal(got, want) {
				t.Errorf("LIST at %s:\n got  %v\n etcd %v", list.ResourceVersion, sortedKeys(got), sortedKeys(want))
			}

			// The same resource version read exactly agrees too.
			exact, err := client.CoreV1().Events(tc.namespace).List(ctx, metav1.ListOptions{
				ResourceVersion: list.ResourceVersion, ResourceVersionMatch: metav1.ResourceVersionMatchExact,
			})
			if err != nil {
				t.Fatal(err)
			}
			if e := itemsByKey(exact.Items); !maps.Equal(got, e) {
				t.Errorf("Exact LIST at %s differs:\n consistent %v\n exact      %v", list.ResourceVersion, sortedKeys(got), sortedKeys(e))
			}
		})
	}
}

// itemsByKey maps namespace/name to resource version.
func itemsByKey(items []corev1.Event) map[string]string {
	out := map[string]string{}
	for _, e := range items {
		out[e.Namespace+"/"+e.Name] = e.ResourceVersion
	}
	return out
}

// etcdEventsAt reads the Events etcd held at revision rev: namespace/name
// to mod revision, the resource version a LIST reports.
func etcdEventsAt(ctx context.Context, t *testing.T, kv *clientv3.Client, ns string, rev int64) map[string]string {
	t.Helper()
	prefix := "/registry/events/"
	if ns != "" {
		prefix += ns + "/"
	}
	resp, err := kv.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(rev), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, item := range resp.Kvs {
		out[string(item.Key[len("/registry/events/"):])] = fmt.Sprint(item.ModRevision)
	}
	return out
}

func sortedKeys(m map[string]string) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, k+"@"+m[k])
	}
	return out
}
