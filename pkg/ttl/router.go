package ttl

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/etcd3"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/apiserver/pkg/storage/storagebackend/factory"

	"github.com/eventapiserver/event-apiserver/pkg/etcdclient"
)

// NewRawStorage builds the etcd3 storage under the watch cache, in place of
// generic.NewRawStorage (etcdclient.NewRawStorage: the same store on a
// client that does not wait for etcd at start). With rules, writes go to one etcd3 store per TTL
// class, all on one extra etcd client: an etcd3 store's lease manager keeps a
// single reusable lease (k8s.io/apiserver storage/etcd3 leaseManager), so
// writes whose TTLs alternate would grant a new lease almost every time,
// while one store per TTL reuses each class's lease as kube-apiserver
// reuses its one. Reads, watches and deletes, which take no lease, go to the
// store etcdclient.NewRawStorage builds, as before. Keys and bytes are those of
// that store: same codec, transformer and prefix.
func (r *Rules) NewRawStorage(config *storagebackend.ConfigForResource, newFunc, newListFunc func() runtime.Object, resourcePrefix string) (storage.Interface, factory.DestroyFunc, error) {
	base, destroyBase, err := etcdclient.NewRawStorage(config, newFunc, newListFunc, resourcePrefix)
	if err != nil || r.Empty() {
		return base, destroyBase, err
	}
	client, err := etcdclient.NewKubernetes(config.Transport)
	if err != nil {
		destroyBase()
		return nil, nil, fmt.Errorf("etcd client for TTL classes: %w", err)
	}
	// As the generic etcd3 storage does, so request latency metrics cover
	// these writes too.
	client.KV = etcd3.NewETCDLatencyTracker(client.KV)
	client.Lease = countingLease{Lease: client.Lease}
	registerMetrics()

	versioner := storage.APIObjectVersioner{}
	transformer, decoder := etcdclient.TransformerAndDecoder(config, versioner)
	rt := &router{Interface: base, rules: r, classes: map[uint64]storage.Interface{}}
	for _, ttl := range r.Classes() {
		// No compactor: these stores only write; the base store's
		// compactor serves the transport.
		s, err := etcd3.New(client, nil, config.Codec, newFunc, newListFunc, config.Prefix, resourcePrefix,
			config.GroupResource, transformer, config.LeaseManagerConfig, decoder, versioner)
		if err != nil {
			_ = client.Close()
			destroyBase()
			return nil, nil, err
		}
		rt.classes[ttl] = s
		rt.closers = append(rt.closers, s.Close)
	}
	var once sync.Once
	destroy := func() {
		once.Do(func() {
			for _, c := range rt.closers {
				c()
			}
			_ = client.Close()
			destroyBase()
		})
	}
	return rt, destroy, nil
}

// router sends each write to the store of its TTL class.
type router struct {
	// The base store serves everything but Create and GuaranteedUpdate.
	storage.Interface
	rules   *Rules
	classes map[uint64]storage.Interface
	closers []func()
}

func (r *router) Create(ctx context.Context, key string, obj, out runtime.Object, ttl uint64) error {
	s, ok := r.classes[ttl]
	if !ok {
		return r.Interface.Create(ctx, key, obj, out, ttl)
	}
	return s.Create(withClass(ctx, ttl), key, obj, out, ttl)
}

// errOtherClass ends an update tried on the store of the wrong TTL class,
// before it reaches etcd.
var errOtherClass = errors.New("the update belongs to another TTL class")

// GuaranteedUpdate picks the store by the rule of the Event as it is: a
// series update or a repeat's PATCH changes none of the fields rules match
// on. Where the updated Event's TTL is another class's (a rule field
// changed, or nothing was cached, as for a create through PUT), the update
// is tried again on that class's store, as a conflict would be retried, so
// that each class keeps its one lease whatever the writes.
func (r *router) GuaranteedUpdate(ctx context.Context, key string, destination runtime.Object, ignoreNotFound bool,
	preconditions *storage.Preconditions, tryUpdate storage.UpdateFunc, cachedExistingObject runtime.Object) error {
	ttl := uint64(r.rules.Default.Seconds())
	if cachedExistingObject != nil {
		ttl = r.rules.Seconds(cachedExistingObject)
	}
	for retried := false; ; retried = true {
		s, ok := r.classes[ttl]
		if !ok {
			s = r.Interface
		}
		want := ttl
		try := func(input runtime.Object, res storage.ResponseMeta) (runtime.Object, *uint64, error) {
			out, newTTL, err := tryUpdate(input, res)
			if err == nil && !retried && newTTL != nil && *newTTL != ttl {
				if _, known := r.classes[*newTTL]; known || *newTTL == 0 {
					want = *newTTL
					return nil, nil, errOtherClass
				}
			}
			return out, newTTL, err
		}
		err := s.GuaranteedUpdate(withClass(ctx, ttl), key, destination, ignoreNotFound, preconditions, try, cachedExistingObject)
		if !errors.Is(err, errOtherClass) {
			return err
		}
		ttl = want
	}
}

type classKey struct{}

func withClass(ctx context.Context, ttl uint64) context.Context {
	return context.WithValue(ctx, classKey{}, ttl)
}

// countingLease counts the leases each class's lease manager grants: the
// lease manager passes the write's context on to Grant.
type countingLease struct {
	clientv3.Lease
}

func (l countingLease) Grant(ctx context.Context, ttl int64) (*clientv3.LeaseGrantResponse, error) {
	resp, err := l.Lease.Grant(ctx, ttl)
	if err == nil {
		if class, ok := ctx.Value(classKey{}).(uint64); ok {
			leaseGrantsTotal.WithLabelValues(classLabel(class)).Inc()
		}
	}
	return resp, err
}

func classLabel(seconds uint64) string {
	return (time.Duration(seconds) * time.Second).String()
}
