// Package storage builds the Event store: the registry's generic Store
// over etcd with the strategy, the selectable fields and their indexes, the
// TTL and the table of pkg/registry/event, as kube-apiserver's
// pkg/registry/core/event/storage does.
package storage

import (
	"context"
	"slices"
	"sort"

	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/util/dryrun"

	"github.com/eventapiserver/event-apiserver/pkg/apis/core"
	"github.com/eventapiserver/event-apiserver/pkg/eventmetrics"
	"github.com/eventapiserver/event-apiserver/pkg/fieldselectors"
	"github.com/eventapiserver/event-apiserver/pkg/registry/event"
	"github.com/eventapiserver/event-apiserver/pkg/ttl"
)

// REST is the one Event store. It is installed in both core/v1 and
// events.k8s.io/v1, so both groups share one watch cache and its indexes.
type REST struct {
	*genericregistry.Store
	// events counts what the store writes; nil counts nothing.
	events *eventmetrics.Counter
}

var (
	_ rest.ShortNamesProvider = &REST{}
	_ rest.StandardStorage    = &REST{}
)

// NewREST builds the store. Every write is attached to an etcd lease of the
// Event's TTL (--event-ttl, or its --event-ttl-rule); zero means never
// expire. Every write stored is counted in events (Create, Update).
func NewREST(scheme *runtime.Scheme, optsGetter generic.RESTOptionsGetter, ttlRules *ttl.Rules, events *eventmetrics.Counter) (*REST, error) {
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
	return &REST{Store: store, events: events}, nil
}

// Create is the Store's Create, counted once stored.
func (r *REST) Create(ctx context.Context, obj runtime.Object, createValidation rest.ValidateObjectFunc, options *metav1.CreateOptions) (runtime.Object, error) {
	out, err := r.Store.Create(ctx, obj, createValidation, options)
	if err == nil && !dryrun.IsDryRun(options.DryRun) {
		r.events.Written(nil, out.(*core.Event))
	}
	return out, err
}

// Update is the Store's Update (PUT, and every PATCH, server-side apply
// included), counted once stored against the Event it replaced: the
// occurrences an update adds are the rise of its count. The Store's
// AfterUpdate hook has no old object, and its BeginUpdate finishes before
// the write is tried, so the Event replaced is taken where the Store hands
// it to the request's update: the last call is the attempt that was
// stored, as GuaranteedUpdate calls again after a conflict.
func (r *REST) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, createValidation rest.ValidateObjectFunc,
	updateValidation rest.ValidateObjectUpdateFunc, forceAllowCreate bool, options *metav1.UpdateOptions) (runtime.Object, bool, error) {
	info := &replacing{UpdatedObjectInfo: objInfo}
	out, created, err := r.Store.Update(ctx, name, info, createValidation, updateValidation, forceAllowCreate, options)
	if err == nil && !dryrun.IsDryRun(options.DryRun) {
		var old *core.Event
		if !created {
			old = info.old
		}
		r.events.Written(old, out.(*core.Event))
	}
	return out, created, err
}

// replacing remembers the stored Event an update was computed from.
type replacing struct {
	rest.UpdatedObjectInfo
	old *core.Event
}

func (r *replacing) UpdatedObject(ctx context.Context, existing runtime.Object) (runtime.Object, error) {
	// The fields counted, not the object: the update may change it.
	r.old = nil
	if e, ok := existing.(*core.Event); ok {
		r.old = &core.Event{Count: e.Count}
		if e.Series != nil {
			r.old.Series = &core.EventSeries{Count: e.Series.Count}
		}
	}
	return r.UpdatedObjectInfo.UpdatedObject(ctx, existing)
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
	if out, ok, err := r.listSetByIndex(ctx, options); ok || err != nil {
		return out, err
	}
	return r.list(ctx, options)
}

// listSetByIndex answers a list whose field selector has an `in` over an
// indexed field (`involvedObject.uid in (a,b)`) with one index lookup per
// value, merged in key order, as the answer would come from one list; the
// selector's other requirements, sets included, filter each lookup. Which
// set qualifies is fieldselectors.IndexedSet's to say: a reporter's bucket
// serves a list across namespaces only, as within one namespace a lookup
// per value would scan the namespace once per value, where the fallback
// scans it once (fieldselectors.WithinNamespace). It answers only when
// every lookup was served at one resourceVersion (a consistent snapshot;
// it retries up to the newest twice) and the whole answer fits the
// request's limit; otherwise (writes racing the lookups, a larger answer, a
// continue token, an exact resourceVersion) ok is false and the list scans
// its scope as before.
//
// A `notin` is never split: see fieldselectors' setselector.go for why no
// index answers it for less than the scan.
func (r *REST) listSetByIndex(ctx context.Context, options *metainternalversion.ListOptions) (runtime.Object, bool, error) {
	if options == nil || options.FieldSelector == nil || options.Continue != "" ||
		options.ResourceVersionMatch == metav1.ResourceVersionMatchExact {
		return nil, false, nil
	}
	namespaced := false
	if namespace, _ := genericapirequest.NamespaceFrom(withSelectedNamespace(ctx, options)); namespace != "" {
		namespaced = true
	}
	set, rest, ok := fieldselectors.IndexedSet(options.FieldSelector, namespaced)
	if !ok {
		return nil, false, nil
	}
	rv, match := options.ResourceVersion, options.ResourceVersionMatch
	for attempt := 0; attempt < 3; attempt++ {
		var items []core.Event
		seen := map[string]bool{}
		versions := map[string]bool{}
		newest := ""
		for _, value := range set.Values {
			sub := *options
			sub.FieldSelector = fieldselectors.Selector(append(slices.Clip(rest), fieldselectors.Requirement{Field: set.Field, Values: []string{value}}))
			sub.ResourceVersion, sub.ResourceVersionMatch = rv, match
			obj, err := r.list(ctx, &sub)
			if err != nil {
				return nil, false, err
			}
			list := obj.(*core.EventList)
			if list.Continue != "" {
				return nil, false, nil
			}
			versions[list.ResourceVersion] = true
			if newest == "" || len(list.ResourceVersion) > len(newest) || (len(list.ResourceVersion) == len(newest) && list.ResourceVersion > newest) {
				newest = list.ResourceVersion
			}
			for _, e := range list.Items {
				if key := e.Namespace + "/" + e.Name; !seen[key] {
					seen[key] = true
					items = append(items, e)
				}
			}
		}
		if options.Limit > 0 && int64(len(items)) > options.Limit {
			return nil, false, nil
		}
		if len(versions) == 1 {
			sort.Slice(items, func(i, j int) bool {
				if items[i].Namespace != items[j].Namespace {
					return items[i].Namespace < items[j].Namespace
				}
				return items[i].Name < items[j].Name
			})
			return &core.EventList{ListMeta: metav1.ListMeta{ResourceVersion: newest}, Items: items}, true, nil
		}
		rv, match = newest, metav1.ResourceVersionMatchNotOlderThan
	}
	return nil, false, nil
}

func (r *REST) list(ctx context.Context, options *metainternalversion.ListOptions) (runtime.Object, error) {
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
