package apiserver

import (
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	genericapiserver "k8s.io/apiserver/pkg/server"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	serverstorage "k8s.io/apiserver/pkg/server/storage"
	etcdmetrics "k8s.io/apiserver/pkg/storage/etcd3/metrics"
	"k8s.io/apiserver/pkg/storage/storagebackend"

	"github.com/eventapiserver/event-apiserver/pkg/apis/core"
	"github.com/eventapiserver/event-apiserver/pkg/apis/events"
	"github.com/eventapiserver/event-apiserver/pkg/etcdhealth"
	"github.com/eventapiserver/event-apiserver/pkg/expiry"
	"github.com/eventapiserver/event-apiserver/pkg/ttl"
	"github.com/eventapiserver/event-apiserver/pkg/watchresume"
)

// NewStorageFactory lays Events out in etcd exactly as kube-apiserver does:
// /registry/events/<namespace>/<name>, encoded as core/v1 for both groups,
// so the two servers can share one events etcd.
func NewStorageFactory(storageConfig storagebackend.Config, storageMediaType string) *serverstorage.DefaultStorageFactory {
	encoding := serverstorage.NewDefaultResourceEncodingConfig(Scheme)
	encoding.SetResourceEncoding(core.Resource("events"), corev1.SchemeGroupVersion, core.SchemeGroupVersion)

	enabled := serverstorage.NewResourceConfig()
	enabled.EnableVersions(corev1.SchemeGroupVersion, eventsv1.SchemeGroupVersion)

	factory := serverstorage.NewDefaultStorageFactory(storageConfig, storageMediaType, Codecs, encoding, enabled, nil)
	// events.k8s.io Events are core Events in storage.
	factory.AddCohabitatingResources(core.Resource("events"), events.Resource("events"))
	return factory
}

// ApplyStorageTo installs the Event storage stack into config. Where
// genericregistry.StorageWithCacher would put a cacher over etcd3, the Store
// of pkg/registry/event/storage gets this stack, in the order a request
// meets it:
//
//  1. watchresume.Storage, the cacher's delegator: LIST, GET and WATCH are
//     served from the watch cache, whose indexes pkg/fieldselectors declares
//     and pkg/registry/event/storage hands over (with backstop, expiry's
//     index of Events by TTL class and revision as well); writes and consistent reads
//     go to etcd through it, as in genericregistry.StorageWithCacher. A
//     WATCH from a revision older than the cache's window, which the cacher
//     would answer 410, is served from etcd's history instead, as
//     kube-apiserver's uncached Event watches are; so is a LIST while the
//     cache is still filling, which the cacher would answer 429.
//  2. The cacher (k8s.io/apiserver storage/cacher), beside it: fed by one
//     etcd watch through the layers below.
//  3. etcdhealth's gate: while etcd does not answer or is out of space
//     (NOSPACE), requests fail at once with 503 instead of waiting for etcd's
//     timeouts. The probe post-start hook "event-etcd-health-probe" makes the
//     gate follow etcd's health; it also serves the storage-monitor getter
//     (apiserver_storage_size_bytes), which would otherwise hang /metrics
//     while etcd is down, the /readyz check "etcd-writes" (what needs etcd
//     is served), and, for an external etcd, the /readyz check "etcd-space".
//  4. ttl's router: each Create and GuaranteedUpdate goes to the etcd3 store
//     of its TTL class (--event-ttl-rule), so that each class reuses one
//     lease as kube-apiserver reuses its one; everything else to the base
//     store. Without rules it is the base store alone.
//  5. The etcd3 store (generic.NewRawStorage) with the keys and encoding of
//     NewStorageFactory.
//
// backstop, when not nil, deletes Events that etcd's leases keep past their
// TTL (pkg/expiry): its post-start hook "event-ttl-backstop" reads its index
// in the cache and deletes through layer 1, preconditioned on the
// resourceVersion.
//
// The cacher's resource version, and the bookmarks clients resume from,
// advance between writes only with etcd's progress notifications; for an
// external etcd, cmd/event-apiserver warns at start when etcd sends none
// (watchresume.WarnWithoutProgressNotify).
//
// With the watch cache off (--watch-cache=false or a zero size), layers 1 and
// 2 are left out, as the generic registry leaves out its cacher.
// externalEtcd is false for the embedded etcd, which clears its own NOSPACE
// alarm (pkg/etcd).
func ApplyStorageTo(config *genericapiserver.RecommendedConfig, etcd *genericoptions.EtcdOptions, rules *ttl.Rules, externalEtcd bool, backstop *expiry.Backstop) error {
	storageFactory := NewStorageFactory(etcd.StorageConfig, etcd.DefaultStorageMediaType)
	if err := etcd.ApplyWithStorageFactoryTo(storageFactory, &config.Config); err != nil {
		return err
	}
	gate := etcdhealth.NewGate()
	// After ApplyWithStorageFactoryTo, which installs the getter that hangs.
	etcdmetrics.SetStorageMonitorGetter(gate.Monitors)
	config.AddPostStartHookOrDie("event-etcd-health-probe", func(ctx genericapiserver.PostStartHookContext) error {
		return gate.Run(ctx, etcd.StorageConfig)
	})
	config.RESTOptionsGetter = watchresume.NewRESTOptionsGetter(config.RESTOptionsGetter, rules.NewRawStorage, gate.Storage)
	if backstop != nil {
		config.RESTOptionsGetter = backstop.RESTOptionsGetter(config.RESTOptionsGetter)
		config.AddPostStartHookOrDie(expiry.PostStartHookName, backstop.PostStartHook)
	}
	config.AddReadyzChecks(gate.WritesCheck())
	if externalEtcd {
		config.AddReadyzChecks(gate.SpaceCheck())
	}
	return nil
}
