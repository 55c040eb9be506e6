package event

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/eventapiserver/event-apiserver/pkg/apis/core"
	"github.com/eventapiserver/event-apiserver/pkg/fieldselectors"
)

// REST is the one Event store. It is installed in both core/v1 and
// events.k8s.io/v1, so both groups share one watch cache and its indexes.
type REST struct {
	*genericregistry.Store
}

var (
	_ rest.ShortNamesProvider = &REST{}
	_ rest.StandardStorage    = &REST{}
)

// NewREST builds the store. ttlSeconds is attached to every write as an etcd
// lease; zero means Events never expire.
func NewREST(scheme *runtime.Scheme, optsGetter generic.RESTOptionsGetter, ttlSeconds uint64) (*REST, error) {
	strategy := NewStrategy(scheme)
	store := &genericregistry.Store{
		NewFunc:       func() runtime.Object { return &core.Event{} },
		NewListFunc:   func() runtime.Object { return &core.EventList{} },
		PredicateFunc: fieldselectors.Matcher,
		// kube-apiserver restarts the full TTL on every write, creates and updates alike.
		TTLFunc: func(runtime.Object, uint64, bool) (uint64, error) {
			return ttlSeconds, nil
		},
		DefaultQualifiedResource:  core.Resource("events"),
		SingularQualifiedResource: core.Resource("event"),

		CreateStrategy: strategy,
		UpdateStrategy: strategy,
		DeleteStrategy: strategy,

		TableConvertor: tableConvertor{},
	}
	options := &generic.StoreOptions{
		RESTOptions: optsGetter,
		AttrFunc:    fieldselectors.GetAttrs,
		Indexers:    fieldselectors.Indexers(),
		TriggerFunc: fieldselectors.TriggerFuncs(),
	}
	if err := store.CompleteWithOptions(options); err != nil {
		return nil, err
	}
	return &REST{store}, nil
}

// ShortNames makes "kubectl get ev" work in both groups.
func (r *REST) ShortNames() []string {
	return []string{"ev"}
}
