package watchresume

import (
	"reflect"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/cacher"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/apiserver/pkg/storage/storagebackend/factory"
	"k8s.io/client-go/tools/cache"

	"github.com/eventapiserver/event-apiserver/pkg/etcdclient"
	"github.com/eventapiserver/event-apiserver/pkg/intern"
)

// WrapEtcd wraps the etcd3 store under everything else: under the cacher
// and the watches resumed from etcd's history alike.
type WrapEtcd func(storage.Interface) storage.Interface

// NewRawStorage builds that etcd3 store: generic.NewRawStorage, or a
// replacement with the same contract (the TTL classes' router).
type NewRawStorage func(config *storagebackend.ConfigForResource, newFunc, newListFunc func() runtime.Object,
	resourcePrefix string) (storage.Interface, factory.DestroyFunc, error)

// StorageWithCacher builds what genericregistry.StorageWithCacher builds, a
// cacher and its delegator over one etcd3 store, and returns it as a Storage,
// so that watches older than the cache's history go to that etcd3 store.
func StorageWithCacher(raw NewRawStorage, wrap WrapEtcd) generic.StorageDecorator {
	return func(
		config *storagebackend.ConfigForResource,
		resourcePrefix string,
		keyFunc func(obj runtime.Object) (string, error),
		newFunc func() runtime.Object,
		newListFunc func() runtime.Object,
		getAttrsFunc storage.AttrFunc,
		triggerFuncs storage.IndexerFuncs,
		indexers *cache.Indexers,
	) (storage.Interface, factory.DestroyFunc, error) {
		// What the cacher holds is what this store decodes: interned, so
		// that cached Events share their repeated strings.
		interned := *config
		interned.Codec = intern.Codec(config.Codec)
		etcd, destroyEtcd, err := raw(&interned, newFunc, newListFunc, resourcePrefix)
		if err != nil {
			return nil, nil, err
		}
		etcd = wrap(etcd)
		c, err := cacher.NewCacherFromConfig(cacher.Config{
			Storage:             etcd,
			Versioner:           storage.APIObjectVersioner{},
			GroupResource:       config.GroupResource,
			EventsHistoryWindow: config.EventsHistoryWindow,
			ResourcePrefix:      resourcePrefix,
			KeyFunc:             keyFunc,
			NewFunc:             newFunc,
			NewListFunc:         newListFunc,
			GetAttrsFunc:        getAttrsFunc,
			IndexerFuncs:        triggerFuncs,
			Indexers:            indexers,
			Codec:               config.Codec,
		})
		if err != nil {
			destroyEtcd()
			return nil, nil, err
		}
		registerMetrics()
		delegator := cacher.NewCacheDelegator(c, etcd)
		var once sync.Once
		destroy := func() {
			once.Do(func() {
				delegator.Stop()
				c.Stop()
				destroyEtcd()
			})
		}
		return NewStorage(delegator, etcd, config.GroupResource), destroy, nil
	}
}

// NewRESTOptionsGetter wraps the getter EtcdOptions.ApplyWithStorageFactoryTo
// installs. Where it chose the watch cache for a resource, the resource gets
// StorageWithCacher instead; where it chose none (--watch-cache=false, or a
// zero --watch-cache-sizes entry), storage stays plain etcd, which resumes
// from any retained revision by itself. Either way raw builds the etcd3
// store (etcdclient.NewRawStorage when nil) and wrap wraps it.
func NewRESTOptionsGetter(getter generic.RESTOptionsGetter, raw NewRawStorage, wrap WrapEtcd) generic.RESTOptionsGetter {
	if raw == nil {
		raw = etcdclient.NewRawStorage
	}
	return restOptionsGetter{RESTOptionsGetter: getter, raw: raw, wrap: wrap}
}

type restOptionsGetter struct {
	generic.RESTOptionsGetter
	raw  NewRawStorage
	wrap WrapEtcd
}

func (g restOptionsGetter) GetRESTOptions(resource schema.GroupResource, example runtime.Object) (generic.RESTOptions, error) {
	opts, err := g.RESTOptionsGetter.GetRESTOptions(resource, example)
	if err != nil {
		return opts, err
	}
	switch {
	case opts.Decorator == nil:
	case isUndecorated(opts.Decorator):
		opts.Decorator = g.undecorated
	default:
		opts.Decorator = StorageWithCacher(g.raw, g.wrap)
	}
	return opts, nil
}

// undecorated is generic.UndecoratedStorage with the etcd3 store built by
// raw and wrapped.
func (g restOptionsGetter) undecorated(
	config *storagebackend.ConfigForResource,
	resourcePrefix string,
	keyFunc func(obj runtime.Object) (string, error),
	newFunc func() runtime.Object,
	newListFunc func() runtime.Object,
	getAttrsFunc storage.AttrFunc,
	triggerFuncs storage.IndexerFuncs,
	indexers *cache.Indexers,
) (storage.Interface, factory.DestroyFunc, error) {
	etcd, destroy, err := g.raw(config, newFunc, newListFunc, resourcePrefix)
	if err != nil {
		return nil, nil, err
	}
	return g.wrap(etcd), destroy, nil
}

// isUndecorated reports whether d is generic.UndecoratedStorage. The options
// getter picks between that function and the closure
// genericregistry.StorageWithCacher returns and does not say which; a plain
// function is identified by its code pointer.
func isUndecorated(d generic.StorageDecorator) bool {
	return reflect.ValueOf(d).Pointer() == reflect.ValueOf(generic.UndecoratedStorage).Pointer()
}
