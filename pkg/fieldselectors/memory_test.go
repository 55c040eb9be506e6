package fieldselectors

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/eventapiserver/event-apiserver/pkg/expiry"
	"github.com/eventapiserver/event-apiserver/pkg/intern"
	"github.com/eventapiserver/event-apiserver/pkg/ttl"
)

// BenchmarkCacheMemory measures what the watch cache holds per Event: the
// live heap a cacher adds once its initial LIST has filled its store and
// indexes, over the benchmark's Events in a real etcd, divided by the number
// of Events ("B/event"), and that over their average protobuf size in etcd
// ("x-protobuf"). Each index is one configuration; comparing them prices it.
//
//	go test -run '^$' -bench CacheMemory -benchtime 3x ./pkg/fieldselectors/
//
// The heap is read after two forced GCs before the cacher starts and after it
// is ready; the embedded etcd runs in the same process, so a few percent of
// noise is expected. -short skips 50k and 100k Events.
func BenchmarkCacheMemory(b *testing.B) {
	klog.SetLogger(logr.Discard())
	scheme := newScheme(b)
	codec := storageCodec(b, scheme)
	client := startEtcd(b)

	indexes := func(names ...string) func() *cache.Indexers {
		return func() *cache.Indexers {
			indexers := cache.Indexers{}
			for _, label := range names {
				indexers[storage.FieldIndex(label)] = indexFunc(byLabel[label])
			}
			return &indexers
		}
	}
	noFields := func(k8sruntime.Object) (labels.Set, fields.Set, error) { return nil, nil, nil }
	hourTTL, err := ttl.Parse(nil, time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	interned := intern.Codec(codec)
	configs := []struct {
		name     string
		indexers func() *cache.Indexers
		attrs    storage.AttrFunc
		codec    k8sruntime.Codec
	}{
		{"indexes=shipped", Indexers, GetAttrs, interned},
		// With the TTL backstop's index (pkg/expiry), as the server runs
		// unless --event-ttl-backstop-interval=0.
		{"indexes=shipped+expiry", func() *cache.Indexers {
			indexers := *Indexers()
			indexers[expiry.IndexName] = expiry.IndexFunc(hourTTL)
			return &indexers
		}, GetAttrs, interned},
		// The server's cache without interning, to price it.
		{"indexes=shipped,intern=none", Indexers, GetAttrs, codec},
		// An exact index for each plain reference field as well, which the
		// OR indexes' buckets serve instead: what that would cost.
		{"indexes=exact", indexes("involvedObject.uid", "related.uid", "involvedObjectOrRelated.uid",
			"involvedObject.name", "related.name", "involvedObjectOrRelated.name", "reportingComponent"), GetAttrs, interned},
		{"indexes=none", indexes(), GetAttrs, interned},
		// Not servable (the cacher would route no event by namespace): the
		// floor, to price the set GetAttrs returns against indexes=none.
		// That set is a Go map of three
		// entries, one 8-slot group, whatever the Event holds.
		{"indexes=none,fields=none", indexes(), noFields, interned},
	}

	loaded := 0
	for _, n := range []int{10_000, 50_000, 100_000} {
		b.Run(fmt.Sprintf("events=%d", n), func(b *testing.B) {
			if n > 10_000 && testing.Short() {
				b.Skip("skipped under -short")
			}
			etcd := newEtcdStorage(b, client, codec)
			load(b, etcd, loaded, n)
			loaded = n
			protobuf := 0
			for i := 0; i < n; i++ {
				data, err := k8sruntime.Encode(codec, benchEvent(i))
				if err != nil {
					b.Fatal(err)
				}
				protobuf += len(data)
			}
			perEventProtobuf := float64(protobuf) / float64(n)
			b.Logf("%d Events, %.0f bytes of protobuf each", n, perEventProtobuf)

			for _, config := range configs {
				b.Run(config.name, func(b *testing.B) {
					var grown int64
					for i := 0; i < b.N; i++ {
						// A fresh storage per cacher: the cacher registers
						// itself with its storage's size estimator, which
						// would keep it alive.
						s, stop := openEtcdStorage(b, client, config.codec)
						before := liveHeap()
						c := startCacher(b, s, codec, config.indexers(), config.attrs)
						grown += liveHeap() - before
						c.Stop()
						stop()
					}
					perEvent := float64(grown) / float64(b.N) / float64(n)
					b.ReportMetric(perEvent, "B/event")
					b.ReportMetric(perEvent/perEventProtobuf, "x-protobuf")
				})
			}
		})
	}
}

func liveHeap() int64 {
	var stats runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&stats)
	return int64(stats.HeapAlloc)
}
