package app

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/eventapiserver/event-apiserver/cmd/kubectl-timeline/web"
)

// maxLookup bounds the objects of one name a lookup reads (one a
// namespace: with -A, at most this many namespaces).
const maxLookup = 500

// maxTreeListed bounds the objects of one kind read to find one owner's:
// those its selector matches, in pages.
const maxTreeListed = 2000

// ownedKind is a kind of object a controller owns, as its ownerReferences
// say.
type ownedKind struct {
	resource schema.GroupVersionResource
	kind     string
}

var (
	pods        = ownedKind{schema.GroupVersionResource{Version: "v1", Resource: "pods"}, "Pod"}
	replicaSets = ownedKind{schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "replicasets"}, "ReplicaSet"}
	jobs        = ownedKind{schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}, "Job"}
)

// owns is what the built-in controllers create, and so what the page
// follows down from an object: a generic walk would list every resource
// of the namespace to find the few an object owns.
var owns = map[schema.GroupKind][]ownedKind{
	{Group: "apps", Kind: "Deployment"}:  {replicaSets},
	{Group: "apps", Kind: "ReplicaSet"}:  {pods},
	{Group: "apps", Kind: "StatefulSet"}: {pods},
	{Group: "apps", Kind: "DaemonSet"}:   {pods},
	{Group: "batch", Kind: "Job"}:        {pods},
	{Group: "batch", Kind: "CronJob"}:    {jobs},
	{Kind: "ReplicationController"}:      {pods},
}

// lookup asks the cluster, by metadata only, for the objects of q's kind
// and name: which incarnations still exist.
func (b *webBackend) lookup(ctx context.Context, q web.Query) ([]web.Object, error) {
	if b.mapper == nil {
		return nil, errors.New("the cluster's discovery could not be read")
	}
	mapping, err := b.mapper.RESTMapping(schema.GroupKind{Group: q.Group, Kind: q.Kind})
	if err != nil {
		return nil, fmt.Errorf("the cluster serves no %s", q.Kind)
	}
	resource := b.metadata.Resource(mapping.Resource)
	opts := metav1.ListOptions{FieldSelector: "metadata.name=" + q.Name, Limit: maxLookup}
	var list *metav1.PartialObjectMetadataList
	if mapping.Scope.Name() == meta.RESTScopeNameRoot || q.All {
		list, err = resource.List(ctx, opts)
	} else {
		list, err = resource.Namespace(q.Namespace).List(ctx, opts)
	}
	if err != nil {
		return nil, err
	}
	if list.Continue != "" {
		return nil, fmt.Errorf("more than %d objects are named %s", maxLookup, q.Name)
	}
	out := make([]web.Object, 0, len(list.Items))
	for _, item := range list.Items {
		out = append(out, objectOf(mapping.GroupVersionKind, &item, ""))
	}
	return out, nil
}

func objectOf(gvk schema.GroupVersionKind, m *metav1.PartialObjectMetadata, owner string) web.Object {
	return web.Object{
		APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind,
		Namespace: m.Namespace, Name: m.Name, UID: string(m.UID), Owner: owner,
	}
}

// tree finds what roots own, breadth first through owns, at most
// web.MaxOwned objects. It cannot find what they owned that is gone: the
// cluster no longer has it, and an Event does not name its object's owner.
func (b *webBackend) tree(ctx context.Context, roots []web.Object) ([]web.Object, *web.Tree) {
	tree := &web.Tree{Limit: web.MaxOwned, Kinds: []string{}}
	kinds := map[string]bool{}
	var owned []web.Object
	queue := append([]web.Object{}, roots...)
	for len(queue) > 0 && !tree.Truncated {
		parent := queue[0]
		queue = queue[1:]
		gk := schema.FromAPIVersionAndKind(parent.APIVersion, parent.Kind).GroupKind()
		for _, child := range owns[gk] {
			if !kinds[child.kind] {
				kinds[child.kind] = true
				tree.Kinds = append(tree.Kinds, child.kind)
			}
			children, err := b.ownedBy(ctx, parent, gk, child)
			if err != nil {
				tree.Reason = err.Error()
				continue
			}
			for _, c := range children {
				if len(owned) == web.MaxOwned {
					tree.Truncated = true
					break
				}
				owned = append(owned, c)
				queue = append(queue, c)
			}
		}
	}
	return owned, tree
}

// ownedBy lists the objects of kind child that parent owns: those its
// selector matches (a Deployment's ReplicaSets carry its labels), kept
// when an ownerReference names parent's uid, as the garbage collector
// reads ownership.
func (b *webBackend) ownedBy(ctx context.Context, parent web.Object, gk schema.GroupKind, child ownedKind) ([]web.Object, error) {
	selector, err := b.selectorOf(ctx, parent, gk)
	if err != nil {
		return nil, err
	}
	opts := metav1.ListOptions{LabelSelector: selector.String(), Limit: 500}
	var out []web.Object
	for listed := 0; listed < maxTreeListed; {
		list, err := b.metadata.Resource(child.resource).Namespace(parent.Namespace).List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("the %ss %s/%s owns could not be listed: %w", child.kind, parent.Kind, parent.Name, err)
		}
		listed += len(list.Items)
		for i := range list.Items {
			for _, ref := range list.Items[i].OwnerReferences {
				if string(ref.UID) == parent.UID {
					out = append(out, objectOf(child.resource.GroupVersion().WithKind(child.kind), &list.Items[i], parent.UID))
					break
				}
			}
		}
		if list.Continue == "" {
			break
		}
		opts.Continue = list.Continue
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// selectorOf is the label selector parent's controller uses to find what
// it owns; everything for a CronJob, whose Jobs carry no selector of it.
func (b *webBackend) selectorOf(ctx context.Context, parent web.Object, gk schema.GroupKind) (labels.Selector, error) {
	if gk.Kind == "CronJob" {
		return labels.Everything(), nil
	}
	mapping, err := b.mapper.RESTMapping(gk)
	if err != nil {
		return nil, err
	}
	u, err := b.dynamic.Resource(mapping.Resource).Namespace(parent.Namespace).Get(ctx, parent.Name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("%s/%s could not be read: %w", parent.Kind, parent.Name, err)
	}
	if gk.Kind == "ReplicationController" {
		// Its selector is a plain map, as in core/v1.
		set, _, err := unstructured.NestedStringMap(u.Object, "spec", "selector")
		if err != nil {
			return nil, err
		}
		return labels.SelectorFromSet(set), nil
	}
	raw, found, err := unstructured.NestedMap(u.Object, "spec", "selector")
	if err != nil || !found {
		return labels.Everything(), err
	}
	var selector metav1.LabelSelector
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &selector); err != nil {
		return nil, err
	}
	return metav1.LabelSelectorAsSelector(&selector)
}
