package integration

import (
	"context"
	"fmt"
	"sync"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/eventapiserver/event-apiserver/internal/pgtest"
	historyv1alpha1 "github.com/eventapiserver/event-apiserver/pkg/apis/history/v1alpha1"
	historyclient "github.com/eventapiserver/event-apiserver/pkg/generated/clientset/versioned/typed/history/v1alpha1"
)

const eventsPrefix = "/registry/events/"

// historyStores are the stores every history test runs against; args
// starts what a store needs and returns the server flags that select it.
var historyStores = []struct {
	name string
	args func(t *testing.T) []string
}{
	{"sqlite", func(*testing.T) []string { return nil }},
	{"postgres", func(t *testing.T) []string {
		return []string{"--history-store=postgres", "--history-dsn=" + pgtest.Start(t)}
	}},
}

// versionKey names one Event version: uid and resourceVersion (etcd revision).
type versionKey struct {
	uid string
	rv  string
}

// etcdTruth is every Event version and deletion etcd held, collected by the
// test's own watch from revision 1: what history must hold.
type etcdTruth struct {
	mu       sync.Mutex
	versions map[versionKey]*corev1.Event
	deleted  map[string]bool
	revision int64
	errs     []error
}

// watchEtcdTruth follows the Events prefix from the first revision until
// the test ends.
func watchEtcdTruth(t *testing.T, client *clientv3.Client) *etcdTruth {
	t.Helper()
	truth := &etcdTruth{versions: map[versionKey]*corev1.Event{}, deleted: map[string]bool{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	watch := client.Watch(ctx, eventsPrefix, clientv3.WithPrefix(), clientv3.WithPrevKV(), clientv3.WithRev(1))
	go func() {
		defer close(done)
		for resp := range watch {
			truth.mu.Lock()
			if err := resp.Err(); err != nil && ctx.Err() == nil {
				truth.errs = append(truth.errs, err)
			}
			for _, ev := range resp.Events {
				value := ev.Kv.Value
				if ev.Type == clientv3.EventTypeDelete {
					value = ev.PrevKv.Value
				}
				obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(value, nil, &corev1.Event{})
				if err != nil {
					truth.errs = append(truth.errs, fmt.Errorf("decoding %s: %w", ev.Kv.Key, err))
					continue
				}
				event := obj.(*corev1.Event)
				if ev.Type == clientv3.EventTypeDelete {
					truth.deleted[string(event.UID)] = true
					continue
				}
				event.ResourceVersion = fmt.Sprint(ev.Kv.ModRevision)
				truth.versions[versionKey{string(event.UID), event.ResourceVersion}] = event
			}
			truth.revision = resp.Header.Revision
			truth.mu.Unlock()
		}
	}()
	return truth
}

func (e *etcdTruth) snapshot(t *testing.T) (map[versionKey]*corev1.Event, map[string]bool) {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.errs) > 0 {
		t.Fatalf("etcd truth watch: %v", e.errs)
	}
	versions := make(map[versionKey]*corev1.Event, len(e.versions))
	for k, v := range e.versions {
		versions[k] = v
	}
	deleted := make(map[string]bool, len(e.deleted))
	for k := range e.deleted {
		deleted[k] = true
	}
	return versions, deleted
}

const eventRecordsPath = "/apis/history.eventapiserver.io/v1alpha1"

// historyClient is the typed history.eventapiserver.io client over c's
// connection: its server, credentials and TLS.
func historyClient(t *testing.T, c *rawClient) historyclient.HistoryV1alpha1Interface {
	t.Helper()
	client, err := historyclient.NewForConfig(&rest.Config{Host: c.baseURL, BearerToken: c.token, Transport: c.client.Transport, Timeout: c.client.Timeout})
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// listAllEventRecords follows continue tokens with pages of limit;
// namespace "" lists all namespaces.
func listAllEventRecords(t *testing.T, c *rawClient, namespace, fieldSelector string, limit int) []historyv1alpha1.EventRecord {
	t.Helper()
	records := historyClient(t, c).EventRecords(namespace)
	var out []historyv1alpha1.EventRecord
	opts := metav1.ListOptions{FieldSelector: fieldSelector, Limit: int64(limit)}
	for pages := 0; ; pages++ {
		if pages > 10000 {
			t.Fatal("more than 10000 pages: the continue token does not advance")
		}
		list, err := records.List(context.Background(), opts)
		if err != nil {
			t.Fatalf("listing eventrecords %q: %v", fieldSelector, err)
		}
		if limit > 0 && len(list.Items) > limit {
			t.Fatalf("page of %d records for limit %d", len(list.Items), limit)
		}
		out = append(out, list.Items...)
		if list.Continue == "" {
			return out
		}
		opts.Continue = list.Continue
	}
}

func recordKeys(records []historyv1alpha1.EventRecord) []versionKey {
	keys := make([]versionKey, 0, len(records))
	for _, r := range records {
		keys = append(keys, versionKey{string(r.Event.UID), r.Event.ResourceVersion})
	}
	return keys
}
