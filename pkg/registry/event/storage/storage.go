// Package storage builds the Event store: the registry's generic Store
// over etcd with the strategy, the selectable fields and their indexes, the
// TTL and the table of pkg/registry/event, as kube-apiserver's
// pkg/registry/core/event/storage does.
package storage

import (
	"context"

	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/eventapiserver/event-apiserver/pkg/apis/core"
	"github.com/eventapiserver/event-apiserver/pkg/fieldselectors"
	"github.com/eventapiserver/event-apiserver/pkg/registry/event"
	"github.com/eventapiserver/event-apiserver/pkg/ttl"
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

// NewREST builds the store. Every write is attached to an etcd lease of the
// Event's TTL (--event-ttl, or its --event-ttl-rule); zero means never
// expire.
func NewREST(scheme *runtime.Scheme, optsGetter generic.RESTOptionsGetter, ttlRules *ttl.Rules) (*REST, error) {
	strategy := event.NewStrategy(scheme)
	store := &genericregistry.Store{
		NewFunc:                   func() runtime.Object { return &core.Event{} },
		NewListFunc:               func() runtime.Object { return &core.EventList{} },
		PredicateFunc:             fieldselectors.Matcher,
		TTLFunc:                   ttlRules.TTLFunc,
		DefaultQualifiedResource:  core.Resource("events"),
		SingularQualifiedResource: core.Resource("event"),

		CreateStrategy: strategy,
		UpdateStrategy: strategy,
		DeleteStrategy: strategy,

		TableConvertor: event.TableConvertor{},
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

// List is the Store's List with two changes for a list of one namespace.
//
// A list across all namespaces whose field selector pins one namespace is
// read as a list of that namespace. k8s.io/apiserver narrows only the first
// page of such a list to the namespace's keys, so the continue token it hands
// out is read against the wrong prefix on the next page and items are lost or
// repeated (kube-apiserver v1.36.3 has the same bug). Narrowing every page the
// same way keeps paging consistent; the result is otherwise the same.
//
// A list of one namespace scans the namespace rather than use a reporter's
// index bucket (fieldselectors.WithinNamespace).
func (r *REST) List(ctx context.Context, options *metainternalversion.ListOptions) (runtime.Object, error) {
	ctx = withSelectedNamespace(ctx, options)
	if namespace, _ := genericapirequest.NamespaceFrom(ctx); namespace == "" {
		return r.Store.List(ctx, options)
	}
	label, field := labels.Everything(), fields.Everything()
	if options != nil && options.LabelSelector != nil {
		label = options.LabelSelector
	}
	if options != nil && options.FieldSelector != nil {
		field = options.FieldSelector
	}
	out, err := r.ListPredicate(ctx, fieldselectors.WithinNamespace(r.PredicateFunc(label, field)), options)
	if err != nil {
		return nil, err
	}
	if r.Decorator != nil {
		r.Decorator(out)
	}
	return out, nil
}

func withSelectedNamespace(ctx context.Context, options *metainternalversion.ListOptions) context.Context {
	if namespace, ok := genericapirequest.NamespaceFrom(ctx); ok && namespace != "" {
		return ctx
	}
	if options == nil || options.FieldSelector == nil {
		return ctx
	}
	// Only a valid name narrows the list, as in the Store's ListPredicate:
	// another value ("..", "a/b") would make an invalid storage key and
	// answer 500, where kube-apiserver filters by it and finds nothing.
	namespace, found := options.FieldSelector.RequiresExactMatch("metadata.namespace")
	if found && namespace != "" && len(apivalidation.ValidateNamespaceName(namespace, false)) == 0 {
		return genericapirequest.WithNamespace(ctx, namespace)
	}
	return ctx
}
