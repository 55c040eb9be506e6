package core

import "k8s.io/apimachinery/pkg/runtime/schema"

// GetObjectKind reports no kind and ignores any set, which is all an
// internal object's TypeMeta would do: the scheme sets apiVersion and kind
// on the external objects it converts to and clears them on internal ones.
//
// Without TypeMeta an Event fits the runtime's 576-byte size class instead
// of 640, the class of the core/v1 Events the decoder builds and drops on
// the way to this type. So the Events the watch cache keeps are smaller and
// no longer share their spans with that garbage, which kept half-empty
// spans in use after a restart's initial list (BenchmarkCacheMemory prices
// the bytes; the benchmarks log the resident memory). The price: an
// EventList converts item by item, where matching layouts let the generated
// conversion reuse the items (BenchmarkEventListToV1 in ./install).
func (e *Event) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// OpenAPIModelName names the internal Event as the scheme would by its Go
// package and type. Without it, the method ObjectMeta's embedding promotes
// (ObjectMeta is the only embedded field) answers instead: the OpenAPI
// definition namer then tags ObjectMeta's definition with the internal
// Event's kinds, and kube-apiserver's OpenAPI aggregator, merging that into
// its own ObjectMeta, which has no extensions, panics on a nil map
// (kube-openapi's mergeSpecs) the first time it serves /openapi/v2 with
// this server behind an APIService.
func (*Event) OpenAPIModelName() string {
	return "com.github.eventapiserver.event-apiserver.pkg.apis.core.Event"
}
