// Package event holds the registry for Events: the rules a write must follow
// (strategy.go), the etcd-backed store (storage.go) and the table printed by
// kubectl get (table.go).
package event

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage/names"

	"github.com/eventapiserver/event-apiserver/pkg/apis/core"
	"github.com/eventapiserver/event-apiserver/pkg/apis/core/validation"
)

type eventStrategy struct {
	runtime.ObjectTyper
	names.NameGenerator
}

// NewStrategy returns the create, update and delete rules for Events. It
// behaves as kube-apiserver's pkg/registry/core/event strategy.
func NewStrategy(typer runtime.ObjectTyper) eventStrategy {
	return eventStrategy{ObjectTyper: typer, NameGenerator: names.SimpleNameGenerator}
}

// DefaultGarbageCollectionPolicy: Events never get finalizers from a delete.
func (eventStrategy) DefaultGarbageCollectionPolicy(ctx context.Context) rest.GarbageCollectionPolicy {
	return rest.Unsupported
}

func (eventStrategy) NamespaceScoped() bool { return true }

func (eventStrategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {}

func (eventStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {}

// Validate applies the rules of the API version the request came through:
// events.k8s.io/v1 is strict, core/v1 stays lenient for old recorders.
func (eventStrategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	return validation.ValidateEventCreate(obj.(*core.Event), requestGroupVersion(ctx))
}

func (eventStrategy) WarningsOnCreate(ctx context.Context, obj runtime.Object) []string { return nil }

func (eventStrategy) Canonicalize(obj runtime.Object) {}

// AllowCreateOnUpdate: a PUT of a missing Event creates it, as in kube-apiserver.
func (eventStrategy) AllowCreateOnUpdate() bool { return true }

func (eventStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	return validation.ValidateEventUpdate(obj.(*core.Event), old.(*core.Event), requestGroupVersion(ctx))
}

func (eventStrategy) WarningsOnUpdate(ctx context.Context, obj, old runtime.Object) []string {
	return nil
}

// AllowUnconditionalUpdate: recorders PUT and PATCH without a resourceVersion.
func (eventStrategy) AllowUnconditionalUpdate() bool { return true }

// requestGroupVersion is the API version the client spoke. Without request
// info (an internal caller) the strict rules apply, as in kube-apiserver.
func requestGroupVersion(ctx context.Context) schema.GroupVersion {
	if info, ok := genericapirequest.RequestInfoFrom(ctx); ok {
		return schema.GroupVersion{Group: info.APIGroup, Version: info.APIVersion}
	}
	return schema.GroupVersion{}
}
