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
	"hash/maphash"
	"sync/atomic"
	"unique"
	"unsafe"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

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
// their canonical copies, and gathers its name and UID (ownStrings). e must
// not be shared yet: Event writes it.
func Event(e *core.Event) {
	ownStrings(e)
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
	managedFields(e)
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

// ownStrings copies the strings only e has, its name and UID, into one
// allocation of its own. The decoder allocated each string of the Event
// apart, side by side with those that Event then replaces by their canonical
// copies and that die at once: the two survivors were left scattered over
// mostly empty spans of the small size classes, which the heap keeps in use.
// Over 100k Events after a restart (six restarts each, two forced GCs, 6 s
// after): heap in use 174-186 MiB, median 178, for a live heap of 141; with
// one allocation 172-180, median 174, the live heap 139 (the size classes'
// rounding), and the RSS outside the binary's pages 218 MiB against 230
// (medians).
func ownStrings(e *core.Event) {
	if e.Name == "" && e.UID == "" {
		return
	}
	buf := make([]byte, 0, len(e.Name)+len(e.UID))
	buf = append(buf, e.Name...)
	buf = append(buf, e.UID...)
	s := unsafe.String(unsafe.SliceData(buf), len(buf))
	e.Name, e.UID = s[:len(e.Name)], types.UID(s[len(e.Name):])
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

// recentManagedFields holds the managedFields entries of Events decoded
// lately, one per slot, for the Events decoded next to share. An Event's
// managedFields is nearly always one entry: its writer's, stamped with the
// second of its last write. So the Events one manager writes within a
// second ("kubelet" is every node's) carry equal entries, and sharing one
// saves each of them the entry, its Time and its FieldsV1 (144 bytes). The
// table is a fixed array, so what it keeps alive is bounded (at most its
// length in entries, 2.4 MB at most) and a miss costs no memory: the
// Event keeps its own entry, which takes the slot. It is sized for the
// initial LIST, which decodes Events in key order, not by time, over every
// second of the TTL.
var recentManagedFields [1 << 14]atomic.Pointer[metav1.ManagedFieldsEntry]

var managedFieldsSeed = maphash.MakeSeed()

// managedFieldsKey is what decides which slot an entry takes. Its strings
// and FieldsV1 bytes are already canonical, so the bytes are identified by
// their array.
type managedFieldsKey struct {
	manager, operation, apiVersion, fieldsType, subresource string
	fields                                                  *byte
	time                                                    int64
}

func keyOf(m *metav1.ManagedFieldsEntry) managedFieldsKey {
	k := managedFieldsKey{
		manager: m.Manager, operation: string(m.Operation), apiVersion: m.APIVersion,
		fieldsType: m.FieldsType, subresource: m.Subresource,
	}
	if m.FieldsV1 != nil {
		k.fields = unsafe.SliceData(m.FieldsV1.GetRawBytes())
	}
	if m.Time != nil {
		k.time = m.Time.Unix()
	}
	return k
}

// equalEntries reports whether a and b hold the same values, bit for bit
// where a value could differ in its representation alone (the time's
// location, FieldsV1's length and array), so that sharing changes nothing a
// reader could see.
func equalEntries(a, b *metav1.ManagedFieldsEntry) bool {
	if a.Manager != b.Manager || a.Operation != b.Operation || a.APIVersion != b.APIVersion ||
		a.FieldsType != b.FieldsType || a.Subresource != b.Subresource {
		return false
	}
	if (a.Time == nil) != (b.Time == nil) || a.Time != nil && a.Time.Time != b.Time.Time {
		return false
	}
	if (a.FieldsV1 == nil) != (b.FieldsV1 == nil) {
		return false
	}
	if a.FieldsV1 == nil {
		return true
	}
	ra, rb := a.FieldsV1.GetRawBytes(), b.FieldsV1.GetRawBytes()
	return len(ra) == len(rb) && unsafe.SliceData(ra) == unsafe.SliceData(rb)
}

// managedFields makes e share a recently decoded Event's managedFields when
// it is one entry equal to that Event's. Shared entries are never written:
// as with the bytes, a writer deep-copies the object first.
func managedFields(e *core.Event) {
	if len(e.ManagedFields) != 1 {
		return
	}
	m := &e.ManagedFields[0]
	slot := &recentManagedFields[maphash.Comparable(managedFieldsSeed, keyOf(m))%uint64(len(recentManagedFields))]
	if shared := slot.Load(); shared != nil && equalEntries(shared, m) {
		e.ManagedFields = unsafe.Slice(shared, 1)
		return
	}
	// A capacity of one, as a shared entry has: an append copies.
	e.ManagedFields = e.ManagedFields[:1:1]
	slot.Store(m)
}
