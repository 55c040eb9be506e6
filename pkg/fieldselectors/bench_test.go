package fieldselectors

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"testing"
	"time"

	"github.com/go-logr/logr"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/kubernetes"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	serverstorage "k8s.io/apiserver/pkg/server/storage"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/cacher"
	cachermetrics "k8s.io/apiserver/pkg/storage/cacher/metrics"
	"k8s.io/apiserver/pkg/storage/etcd3"
	"k8s.io/apiserver/pkg/storage/value/encrypt/identity"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/eventapiserver/event-apiserver/pkg/apis/core"
)

// The benchmark's Events: each Pod has eventsPerObject Events; Pods 2k and
// 2k+1 share a namespace and belong to ReplicaSet rs-k, which every odd Event
// names as Related. So each query below selects eventsPerObject Events,
// whatever N is, while the namespace and the cache around them grow with N.
const (
	eventsPerObject = 10
	namespaceCount  = 25
	targetPod       = 7
	pageSize        = 500 // kubectl's --chunk-size
	resourcePrefix  = "/events"
)

var eventResource = core.Resource("events")

func podOf(i int) int { return i / eventsPerObject }

func namespaceOf(pod int) string { return fmt.Sprintf("ns-%02d", (pod/2)%namespaceCount) }

func benchEvent(i int) *core.Event {
	pod := podOf(i)
	t := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, i%3600, 0, time.UTC))
	e := &core.Event{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespaceOf(pod), Name: fmt.Sprintf("pod-%d.%x", pod, i),
			// What the server's field manager records for a tools/record create.
			ManagedFields: []metav1.ManagedFieldsEntry{{
				Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &t,
				FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(benchManagedFields),
			}},
		},
		InvolvedObject: core.ObjectReference{
			Kind: "Pod", Namespace: namespaceOf(pod), Name: fmt.Sprintf("pod-%d", pod), UID: types.UID(benchUID("pod", pod)),
			APIVersion: "v1", ResourceVersion: "1234", FieldPath: fmt.Sprintf("spec.containers{c-%d}", pod),
		},
		Reason:              []string{"Scheduled", "Pulling", "Pulled", "Created", "Started"}[i%5],
		Message:             "Successfully pulled image \"registry.example/app:1.2.3\" in 1.2s (1.2s including waiting)",
		Source:              core.EventSource{Component: "kubelet", Host: fmt.Sprintf("node-%d", pod%100)},
		FirstTimestamp:      t,
		LastTimestamp:       t,
		Count:               1,
		Type:                "Normal",
		ReportingController: "kubelet",
		ReportingInstance:   fmt.Sprintf("node-%d", pod%100),
	}
	if i%2 == 1 {
		rs := pod / 2
		e.Related = &core.ObjectReference{
			Kind: "ReplicaSet", Namespace: namespaceOf(pod), Name: fmt.Sprintf("rs-%d", rs),
			UID: types.UID(benchUID("rs", rs)), APIVersion: "apps/v1",
		}
	}
	return e
}

// benchManagedFields is the field set of a tools/record create.
const benchManagedFields = `{"f:count":{},"f:firstTimestamp":{},"f:involvedObject":{},"f:lastTimestamp":{},"f:message":{},` +
	`"f:reason":{},"f:reportingComponent":{},"f:reportingInstance":{},"f:source":{"f:component":{},"f:host":{}},"f:type":{}}`

func benchUID(kind string, n int) string {
	return fmt.Sprintf("%s-%08d-0000-4000-8000-000000000000", kind, n)
}

// BenchmarkGetList lists Events through the watch cache as the registry will:
// a real cacher (with Indexers, TriggerFuncs and GetAttrs) in front of real
// etcd3 storage on an embedded etcd, read through the CacheDelegator with
// RV "" and limit 500. Most queries select 10 Events. "fetched/op" is how
// many Events the cacher ran the selector over (its
// apiserver_cache_list_fetched_objects_total metric, labelled with the index
// used, which the benchmark checks): 10 when an index answered, the whole
// namespace or cache when it scanned.
func BenchmarkGetList(b *testing.B) {
	klog.SetLogger(logr.Discard())
	cachermetrics.Register()
	ctx := context.Background()
	scheme := newScheme(b)
	codec := storageCodec(b, scheme)
	client := startEtcd(b)

	pod := targetPod
	ns := namespaceOf(pod)
	queries := []struct {
		name     string
		gvk      schema.GroupVersionKind
		key      string
		selector string
		index    string // the index the cacher must use; "" for a scan
		// wholeNamespace queries select every Event of the namespace (up to
		// the page size) instead of one object's.
		wholeNamespace bool
		// withinNamespace applies WithinNamespace, as the registry does for
		// a list of one namespace.
		withinNamespace bool
	}{
		{"ns/describe-pod", coreV1GVK, resourcePrefix + "/" + ns,
			fmt.Sprintf("involvedObject.name=pod-%d,involvedObject.namespace=%s,involvedObject.uid=%s", pod, ns, benchUID("pod", pod)),
			storage.FieldIndex("involvedObjectOrRelated.uid"), false, true},
		{"ns/fieldPath-unindexed", coreV1GVK, resourcePrefix + "/" + ns,
			fmt.Sprintf("involvedObject.fieldPath=spec.containers{c-%d}", pod), "", false, true},
		{"ns/regardingOrRelated.uid", eventsV1GVK, resourcePrefix + "/" + ns,
			"regardingOrRelated.uid=" + benchUID("rs", pod/2), storage.FieldIndex("involvedObjectOrRelated.uid"), false, true},
		{"all/involvedObject.name", coreV1GVK, resourcePrefix,
			fmt.Sprintf("involvedObject.name=pod-%d", pod), storage.FieldIndex("involvedObjectOrRelated.name"), false, false},
		{"all/fieldPath-unindexed", coreV1GVK, resourcePrefix,
			fmt.Sprintf("involvedObject.fieldPath=spec.containers{c-%d}", pod), "", false, false},
		// The price of the coarse reporter index: every benchmark Event is
		// the kubelet's, so its bucket is the whole cache, against a scan of
		// one namespace for the same answer, which WithinNamespace chooses.
		{"ns/reporter-indexed", coreV1GVK, resourcePrefix + "/" + ns,
			"reportingComponent=kubelet", storage.FieldIndex("reportingComponent"), true, false},
		{"ns/reporter", coreV1GVK, resourcePrefix + "/" + ns,
			"reportingComponent=kubelet", "", true, true},
	}

	loaded := 0
	for _, n := range []int{1_000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("events=%d", n), func(b *testing.B) {
			if n > 10_000 && testing.Short() {
				b.Skip("skipped under -short: loading 100k Events into etcd takes a while")
			}
			start := time.Now()
			// Fresh storage per size (the cacher claims its storage's size
			// estimator) over the same etcd, which keeps the smaller sizes' Events.
			etcd := newEtcdStorage(b, client, codec)
			load(b, etcd, loaded, n)
			loaded = n
			// The cacher's initial LIST fills its store and indexes from etcd,
			// as after a server start.
			store := newCachedStorage(b, etcd, codec)
			b.Logf("%d Events in etcd and in the watch cache after %v", n, time.Since(start).Round(time.Millisecond))

			// RV "" is what kubectl sends: a consistent read, which costs one
			// etcd round trip for the current revision before the cache
			// answers. RV "0" is answered from the cache alone, which isolates
			// what the index saves.
			for _, rv := range []struct{ name, value string }{{"consistent", ""}, {"rv=0", "0"}} {
				for _, q := range queries {
					b.Run(rv.name+"/"+q.name, func(b *testing.B) {
						selector, err := convert(scheme, q.gvk, q.selector)
						if err != nil {
							b.Fatal(err)
						}
						predicate := Matcher(labels.Everything(), selector)
						if q.withinNamespace {
							predicate = WithinNamespace(predicate)
						}
						opts := storage.ListOptions{ResourceVersion: rv.value, Recursive: true, Predicate: predicate}
						opts.Predicate.Limit = pageSize
						want := eventsPerObject
						if q.wholeNamespace {
							want = n / namespaceCount
							if rv.value == "" {
								// The cacher ignores the limit for RV "0" (cacher.go computeListLimit).
								want = min(pageSize, want)
							}
						}
						before := fetched(b, q.index)
						b.ResetTimer()
						for i := 0; i < b.N; i++ {
							list := &core.EventList{}
							if err := store.GetList(ctx, q.key, opts, list); err != nil {
								b.Fatal(err)
							}
							if len(list.Items) != want {
								b.Fatalf("got %d Events, want %d", len(list.Items), want)
							}
						}
						b.StopTimer()
						perOp := (fetched(b, q.index) - before) / float64(b.N)
						if perOp == 0 {
							b.Fatalf("the cacher never served this query with index %q", q.index)
						}
						b.ReportMetric(perOp, "fetched/op")
					})
				}
			}
		})
	}
}

// storageCodec is the codec the server stores Events with: core/v1 protobuf
// on the wire, the internal Event in memory.
func storageCodec(b *testing.B, scheme *runtime.Scheme) runtime.Codec {
	codec, _, err := serverstorage.NewStorageCodec(serverstorage.StorageCodecConfig{
		StorageMediaType:  runtime.ContentTypeProtobuf,
		StorageSerializer: serializer.NewCodecFactory(scheme),
		StorageVersion:    corev1.SchemeGroupVersion,
		MemoryVersion:     core.SchemeGroupVersion,
	})
	if err != nil {
		b.Fatal(err)
	}
	return codec
}

func newEvent() runtime.Object     { return &core.Event{} }
func newEventList() runtime.Object { return &core.EventList{} }

func eventKey(obj runtime.Object) (string, error) {
	return storage.NamespaceKeyFunc(resourcePrefix+"/", obj)
}

// startEtcd runs an embedded etcd in a temporary directory on free loopback
// ports. (k8s.io/apiserver's etcd3/testserver does the same, but pulls in
// test-only modules this module does not require.)
func startEtcd(b *testing.B) *kubernetes.Client {
	cfg := embed.NewConfig()
	cfg.Dir = b.TempDir()
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	// A throw-away single member: durability is not what is measured, and
	// fsync would make loading 100k Events take many minutes.
	cfg.UnsafeNoFsync = true
	clientURL, peerURL := freeLoopbackURL(b), freeLoopbackURL(b)
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{clientURL}, []url.URL{clientURL}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peerURL}, []url.URL{peerURL}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(e.Close)
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(time.Minute):
		b.Fatal("embedded etcd did not become ready within a minute")
	}
	client, err := kubernetes.New(clientv3.Config{Endpoints: []string{clientURL.String()}, DialTimeout: 10 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = client.Close() })
	return client
}

// freeLoopbackURL picks a port nobody listens on; another process could take
// it before etcd binds it, which is unlikely enough for a benchmark.
func freeLoopbackURL(b *testing.B) url.URL {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	return url.URL{Scheme: "http", Host: l.Addr().String()}
}

func newEtcdStorage(b *testing.B, client *kubernetes.Client, codec runtime.Codec) storage.Interface {
	s, stop := openEtcdStorage(b, client, codec)
	b.Cleanup(stop)
	return s
}

// openEtcdStorage is newEtcdStorage for a caller that stops the storage
// itself, so that it and what it refers to can be collected before the
// benchmark ends.
func openEtcdStorage(b *testing.B, client *kubernetes.Client, codec runtime.Codec) (storage.Interface, func()) {
	versioner := storage.APIObjectVersioner{}
	compactor := etcd3.NewCompactor(client.Client, 0, clock.RealClock{}, nil)
	s, err := etcd3.New(client, compactor, codec, newEvent, newEventList, "/registry", resourcePrefix, eventResource,
		identity.NewEncryptCheckTransformer(), etcd3.NewDefaultLeaseManagerConfig(), etcd3.NewDefaultDecoder(codec, versioner), versioner)
	if err != nil {
		compactor.Stop()
		b.Fatal(err)
	}
	return s, func() { s.Close(); compactor.Stop() }
}

// newCachedStorage mirrors k8s.io/apiserver's registry.StorageWithCacher,
// with this package's indexes, trigger and attributes.
func newCachedStorage(b *testing.B, etcd storage.Interface, codec runtime.Codec) storage.Interface {
	c := startCacher(b, etcd, codec, Indexers(), GetAttrs)
	b.Cleanup(c.Stop)
	delegator := cacher.NewCacheDelegator(c, etcd)
	b.Cleanup(delegator.Stop)
	return delegator
}

// startCacher starts a cacher over etcd with the given indexes and
// attributes and this package's trigger, and waits until its initial LIST
// has filled it. The caller stops it.
func startCacher(b *testing.B, etcd storage.Interface, codec runtime.Codec, indexers *cache.Indexers, attrs storage.AttrFunc) *cacher.Cacher {
	c, err := cacher.NewCacherFromConfig(cacher.Config{
		Storage:             etcd,
		Versioner:           storage.APIObjectVersioner{},
		GroupResource:       eventResource,
		EventsHistoryWindow: cacher.DefaultEventFreshDuration,
		ResourcePrefix:      resourcePrefix,
		KeyFunc:             eventKey,
		NewFunc:             newEvent,
		NewListFunc:         newEventList,
		GetAttrsFunc:        attrs,
		IndexerFuncs:        TriggerFuncs(),
		Indexers:            indexers,
		Codec:               codec,
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := c.Wait(ctx); err != nil {
		c.Stop()
		b.Fatal(err)
	}
	return c
}

// load creates Events from..to-1 through the etcd3 store, a few at a time:
// etcd takes concurrent writes far faster than one after the other. No TTL:
// leases are not what is measured.
func load(b *testing.B, s storage.Interface, from, to int) {
	g, ctx := errgroup.WithContext(context.Background())
	g.SetLimit(32)
	for i := from; i < to; i++ {
		g.Go(func() error {
			e := benchEvent(i)
			key, err := eventKey(e)
			if err != nil {
				return err
			}
			return s.Create(ctx, key, e, &core.Event{}, 0)
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
}

// fetched reads how many objects the Events cacher has taken out of its store
// for LISTs served with the given index ("" for none).
func fetched(b *testing.B, index string) float64 {
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		b.Fatal(err)
	}
	var total float64
	for _, family := range families {
		if family.GetName() != "apiserver_cache_list_fetched_objects_total" {
			continue
		}
		for _, m := range family.GetMetric() {
			want := map[string]string{"group": eventResource.Group, "resource": eventResource.Resource, "index": index}
			matched := 0
			for _, l := range m.GetLabel() {
				if v, ok := want[l.GetName()]; ok && v == l.GetValue() {
					matched++
				}
			}
			if matched == len(want) {
				total += m.GetCounter().GetValue()
			}
		}
	}
	return total
}
