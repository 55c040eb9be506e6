// Package apiserver assembles the Event API server: one Event store served
// as core/v1 and as events.k8s.io/v1 on a k8s.io/apiserver generic server.
// ApplyStorageTo (storage.go) describes the storage stack under that store,
// layer by layer.
package apiserver

import (
	"fmt"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	genericfeatures "k8s.io/apiserver/pkg/features"
	"k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/healthz"
	utilfeature "k8s.io/apiserver/pkg/util/feature"

	"github.com/eventapiserver/event-apiserver/pkg/apis/events"
	"github.com/eventapiserver/event-apiserver/pkg/eventmetrics"
	eventstorage "github.com/eventapiserver/event-apiserver/pkg/registry/event/storage"
	"github.com/eventapiserver/event-apiserver/pkg/ttl"
)

// WatchCacheCheckName is the /readyz check that passes while the Events
// watch cache is initialized and serving.
const WatchCacheCheckName = "watch-cache"

// ExtraConfig holds what is specific to the Event server.
type ExtraConfig struct {
	// TTL says how long an Event lives after its last write: --event-ttl
	// (zero keeps Events forever), or the first --event-ttl-rule it matches.
	TTL *ttl.Rules
	// History, when set, keeps Event versions beyond the TTL.
	History *HistoryConfig
	// Mode says which APIs New installs: HistoryOnly serves History alone,
	// with no Events API and no etcd.
	Mode Mode
	// EventMetrics counts the Events the Events API stores; nil counts
	// nothing. (History-only, capture counts them: capture.KubernetesConfig.)
	EventMetrics *eventmetrics.Counter
}

type Config struct {
	GenericConfig *genericapiserver.RecommendedConfig
	ExtraConfig   ExtraConfig
}

// EventServer is the running server's handle.
type EventServer struct {
	GenericAPIServer *genericapiserver.GenericAPIServer
}

type completedConfig struct {
	GenericConfig genericapiserver.CompletedConfig
	ExtraConfig   *ExtraConfig
}

// CompletedConfig can only be made by Complete, so New never sees a
// half-filled configuration.
type CompletedConfig struct {
	*completedConfig
}

func (cfg *Config) Complete() CompletedConfig {
	return CompletedConfig{&completedConfig{
		GenericConfig: cfg.GenericConfig.Complete(),
		ExtraConfig:   &cfg.ExtraConfig,
	}}
}

// New installs the Event store in both API groups.
func (c CompletedConfig) New() (*EventServer, error) {
	genericServer, err := c.GenericConfig.New("event-apiserver", genericapiserver.NewEmptyDelegate())
	if err != nil {
		return nil, err
	}

	if !c.ExtraConfig.Mode.ServesEvents() {
		if c.ExtraConfig.History == nil {
			return nil, fmt.Errorf("a history-only server needs a history store")
		}
		if err := installHistory(genericServer, c.ExtraConfig.History, c.GenericConfig.Authorization.Authorizer, func() error { return nil }, time.Minute, true); err != nil {
			return nil, fmt.Errorf("installing history.eventapiserver.io: %w", err)
		}
		return &EventServer{GenericAPIServer: genericServer}, nil
	}

	store, err := eventstorage.NewREST(Scheme, c.GenericConfig.RESTOptionsGetter, c.ExtraConfig.TTL, c.ExtraConfig.EventMetrics)
	if err != nil {
		return nil, fmt.Errorf("creating Event storage: %w", err)
	}
	storage := map[string]rest.Storage{"events": store}

	legacy := genericapiserver.APIGroupInfo{
		PrioritizedVersions:          Scheme.PrioritizedVersionsForGroup(corev1.GroupName),
		VersionedResourcesStorageMap: map[string]map[string]rest.Storage{corev1.SchemeGroupVersion.Version: storage},
		Scheme:                       Scheme,
		ParameterCodec:               metav1.ParameterCodec,
		NegotiatedSerializer:         Codecs,
	}
	if err := genericServer.InstallLegacyAPIGroup(genericapiserver.DefaultLegacyAPIPrefix, &legacy); err != nil {
		return nil, fmt.Errorf("installing core/v1: %w", err)
	}

	eventsGroup := genericapiserver.NewDefaultAPIGroupInfo(events.GroupName, Scheme, metav1.ParameterCodec, Codecs)
	// The scheme also knows v1beta1, to decode bodies as kube-apiserver
	// does (kinds.go); it is not served.
	eventsGroup.PrioritizedVersions = []schema.GroupVersion{eventsv1.SchemeGroupVersion}
	eventsGroup.VersionedResourcesStorageMap[eventsv1.SchemeGroupVersion.Version] = storage
	if err := genericServer.InstallAPIGroup(&eventsGroup); err != nil {
		return nil, fmt.Errorf("installing events.k8s.io/v1: %w", err)
	}

	if c.ExtraConfig.History != nil {
		err = installHistory(genericServer, c.ExtraConfig.History, c.GenericConfig.Authorization.Authorizer, store.ReadinessCheck, c.GenericConfig.StorageInitializationTimeout, false)
	} else {
		err = installHistoryOff(genericServer)
	}
	if err != nil {
		return nil, fmt.Errorf("installing history.eventapiserver.io: %w", err)
	}

	// Unlike poststarthook/storage-readiness below, which gives up waiting
	// after --storage-initialization-timeout and then passes for good, this
	// check holds for the server's whole life: a replica is worth a place in
	// its Service while its watch cache serves (lists and watches at
	// resourceVersion=0 and open watches, which need no etcd), and only
	// then. A replica started while etcd is down fails it until etcd
	// answers; a running one keeps passing through an outage as long as the
	// cache's etcd watch holds. "etcd-writes" (pkg/etcdhealth) says whether
	// what needs etcd is served; a readiness probe excludes that one (and
	// the generic server's etcd checks), not this one. With the watch cache
	// off it always passes: then every read needs etcd and the probe should
	// not exclude etcd.
	if err := genericServer.AddReadyzChecks(healthz.NamedCheck(WatchCacheCheckName, func(*http.Request) error {
		return store.ReadinessCheck()
	})); err != nil {
		return nil, err
	}

	// As kube-apiserver does: /readyz waits until the watch cache is filled,
	// so a restarted server is not sent traffic it would answer with 429.
	if utilfeature.DefaultFeatureGate.Enabled(genericfeatures.WatchCacheInitializationPostStartHook) {
		genericServer.AddPostStartHookOrDie("storage-readiness", genericServer.StorageReadinessHook.Hook)
	}

	return &EventServer{GenericAPIServer: genericServer}, nil
}
