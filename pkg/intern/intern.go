// Package intern makes the Events the watch cache holds share what repeats
// across them.
//
// Decoding an Event from etcd allocates every string anew, so a cache of a
// million Events holds a million copies of "kubelet", "Normal", "v1", the
// namespace, the reporter's host, the pod's UID (one per Event about that
// pod), and the same managedFields bytes (identical for every Event of one
// recorder). Interning them at decode time, in the codec of the etcd3 store
// under the cacher, keeps one copy per value instead (BenchmarkCacheMemory in
// pkg/fieldselectors prices it: indexes=shipped against
// indexes=shipped,intern=none).
//
// The table is Go's unique package: safe for concurrent use, and bounded by
// the garbage collector. It holds its canonical copies weakly, through the
// Handles unique.Make returns, and this package keeps no Handle: an entry
// lives until the next collection finds it unused, so the table never holds
// more than what was decoded since the last GC, and values that no cached
// Event uses any more are never kept. A value decoded again after a
// collection gets a new canonical copy, which later Events share.
package intern

import (
	"unique"
	"unsafe"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/eventapiserver/event-apiserver/pkg/apis/core"
)

// Codec returns c with a Decode that interns each decoded *core.Event (any
// other object is returned as c decoded it).
func Codec(c runtime.Codec) runtime.Codec {
	return codec{Codec: c}
}

type codec struct {
	runtime.Codec
}

func (c codec) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	obj, gvk, err := c.Codec.Decode(data, defaults, into)
	if event, ok := obj.(*core.Event); ok && err == nil {
		Event(event)
	}
	return obj, gvk, err
}

// Event replaces, in place, the strings of e that recur across Events (all
// but its own name, UID and resourceVersion) and its managedFields bytes by
// their canonical copies. e must not be shared yet: Event writes it.
func Event(e *core.Event) {
	str(&e.Namespace)
	str(&e.GenerateName)
	for i := range e.ManagedFields {
		m := &e.ManagedFields[i]
		str(&m.Manager)
		str(&m.Operation)
		str(&m.APIVersion)
		str(&m.FieldsType)
		str(&m.Subresource)
		if m.FieldsV1 != nil {
			// The field itself, not SetRawBytes, which clones: sharing
			// the array is the point.
			m.FieldsV1.Raw = bytes(m.FieldsV1.GetRawBytes()) //lint:ignore SA1019 SetRawBytes would copy what this shares
		}
	}
	reference(&e.InvolvedObject)
	if e.Related != nil {
		reference(e.Related)
	}
	str(&e.Reason)
	str(&e.Message)
	str(&e.Source.Component)
	str(&e.Source.Host)
	str(&e.Type)
	str(&e.Action)
	str(&e.ReportingController)
	str(&e.ReportingInstance)
}

func reference(r *core.ObjectReference) {
	str(&r.Kind)
	str(&r.Namespace)
	str(&r.Name)
	str(&r.UID)
	str(&r.APIVersion)
	str(&r.ResourceVersion)
	str(&r.FieldPath)
}

func str[S ~string](p *S) {
	if *p != "" {
		*p = S(unique.Make(string(*p)).Value())
	}
}

// bytes returns the canonical copy of b. The slice shares its array with
// every other Event's equal bytes, which is safe because nothing writes the
// bytes of a decoded object in place: a writer deep-copies the object first
// (FieldsV1.DeepCopyInto copies Raw). Its capacity is its length, so an
// append copies too.
func bytes(b []byte) []byte {
	if len(b) == 0 {
		return b
	}
	// unique.Make copies a string it keeps, so b's bytes can be looked up
	// in place: string(b) would copy every Event's managedFields once more
	// only to find them there.
	s := unique.Make(unsafe.String(unsafe.SliceData(b), len(b))).Value()
	return unsafe.Slice(unsafe.StringData(s), len(s))
}
