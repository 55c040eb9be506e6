// Package fieldselectors declares which field selectors each served Event
// version accepts, how they map onto the internal Event, and which of them
// the watch cache indexes.
//
// Three tables hold everything: internalFields is the vocabulary of the
// internal Event (labels spelled as core/v1 spells them, as kube-apiserver
// does), and coreV1Labels and eventsV1Labels say which label each served
// version accepts and which internal field it means. Exposing an existing
// field under a new label is one line in a version table; a new field is one
// line in internalFields plus one line per version that offers it. tables
// binds each to the resource that serves it (history's EventRecords take
// the events.k8s.io/v1 labels and their time window), and is the one
// definition of which labels have a set form (setselector.go).
//
// Absent values are empty strings, as in kube-apiserver: an Event without
// Related is selected by `related.name=` and by `related.name!=x`, like a
// zero ObjectReference (kubectl describe node relies on the same rule when it
// sends `involvedObject.namespace=`).
package fieldselectors

import (
	"fmt"
	"slices"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/storage"

	"github.com/eventapiserver/event-apiserver/pkg/apis/core"
)

// selectivity says whether the watch cache indexes a field and how finely
// its values split the Events. The cacher serves a LIST from the first
// index the selector pins (cacher/watch_cache.go listLatestRV), so Matcher
// offers indexes finest first.
type selectivity int

const (
	notIndexed selectivity = iota
	// perObject values (UIDs) name one object: a bucket is its Events.
	perObject
	// perName values recur across namespaces and kinds.
	perName
	// perReporter values are few and their buckets large: the index wins
	// for a rare reporter across namespaces but loses to the namespace scan
	// for a common one (BenchmarkGetList ns/reporter-*), so it is tried last.
	perReporter
)

// field is one selectable property of the internal Event.
type field struct {
	label string
	// value reads a plain field.
	value func(*core.Event) string
	// either names the plain fields an OR field consults: `label=v` selects
	// an Event when any of them is v, `label!=v` when none is.
	either []string
	index  selectivity
}

func plain(label string, index selectivity, value func(*core.Event) string) *field {
	return &field{label: label, value: value, index: index}
}

func either(label string, index selectivity, parts ...string) *field {
	return &field{label: label, either: parts, index: index}
}

// related returns a reader for one field of Related; an absent Related reads
// as a zero ObjectReference.
func related(get func(*core.ObjectReference) string) func(*core.Event) string {
	return func(e *core.Event) string {
		if e.Related == nil {
			return ""
		}
		return get(e.Related)
	}
}

// internalFields is the internal vocabulary. The first thirteen are
// kube-apiserver's ToSelectableFields (pkg/registry/core/event/strategy.go);
// the rest are ours. Index order within a selectivity follows this list.
//
// The references are indexed through their OR fields only: the bucket of
// involvedObjectOrRelated.uid=U holds every Event whose involvedObject.uid
// or related.uid is U, so it also answers `involvedObject.uid=U` and
// `related.uid=U`, with the few Events that name U in the other reference
// filtered out. An exact index per plain field as well cost 156 more bytes
// a cached Event, 10% of the cache (BenchmarkCacheMemory indexes=exact).
var internalFields = []*field{
	plain("metadata.name", notIndexed, func(e *core.Event) string { return e.Name }),
	plain("metadata.namespace", notIndexed, func(e *core.Event) string { return e.Namespace }),
	plain("involvedObject.kind", notIndexed, func(e *core.Event) string { return e.InvolvedObject.Kind }),
	plain("involvedObject.namespace", notIndexed, func(e *core.Event) string { return e.InvolvedObject.Namespace }),
	plain("involvedObject.name", notIndexed, func(e *core.Event) string { return e.InvolvedObject.Name }),
	plain("involvedObject.uid", notIndexed, func(e *core.Event) string { return string(e.InvolvedObject.UID) }),
	plain("involvedObject.apiVersion", notIndexed, func(e *core.Event) string { return e.InvolvedObject.APIVersion }),
	plain("involvedObject.resourceVersion", notIndexed, func(e *core.Event) string { return e.InvolvedObject.ResourceVersion }),
	plain("involvedObject.fieldPath", notIndexed, func(e *core.Event) string { return e.InvolvedObject.FieldPath }),
	plain("reason", notIndexed, func(e *core.Event) string { return e.Reason }),
	plain("reportingComponent", perReporter, func(e *core.Event) string { return e.ReportingController }),
	plain("source", notIndexed, eventSource),
	plain("type", notIndexed, func(e *core.Event) string { return e.Type }),

	plain("action", notIndexed, func(e *core.Event) string { return e.Action }),
	plain("reportingInstance", notIndexed, func(e *core.Event) string { return e.ReportingInstance }),
	plain("related.kind", notIndexed, related(func(r *core.ObjectReference) string { return r.Kind })),
	plain("related.namespace", notIndexed, related(func(r *core.ObjectReference) string { return r.Namespace })),
	plain("related.name", notIndexed, related(func(r *core.ObjectReference) string { return r.Name })),
	plain("related.uid", notIndexed, related(func(r *core.ObjectReference) string { return string(r.UID) })),
	plain("related.apiVersion", notIndexed, related(func(r *core.ObjectReference) string { return r.APIVersion })),
	plain("related.fieldPath", notIndexed, related(func(r *core.ObjectReference) string { return r.FieldPath })),

	either("involvedObjectOrRelated.kind", notIndexed, "involvedObject.kind", "related.kind"),
	either("involvedObjectOrRelated.namespace", notIndexed, "involvedObject.namespace", "related.namespace"),
	either("involvedObjectOrRelated.name", perName, "involvedObject.name", "related.name"),
	either("involvedObjectOrRelated.uid", perObject, "involvedObject.uid", "related.uid"),
}

// coreV1Labels is what /api/v1 accepts, each label to its internal field.
// The first thirteen are kube-apiserver's (pkg/apis/core/v1/conversion.go
// AddFieldLabelConversionsForEvent).
var coreV1Labels = map[string]string{
	"involvedObject.kind":            "involvedObject.kind",
	"involvedObject.namespace":       "involvedObject.namespace",
	"involvedObject.name":            "involvedObject.name",
	"involvedObject.uid":             "involvedObject.uid",
	"involvedObject.apiVersion":      "involvedObject.apiVersion",
	"involvedObject.resourceVersion": "involvedObject.resourceVersion",
	"involvedObject.fieldPath":       "involvedObject.fieldPath",
	"reason":                         "reason",
	"reportingComponent":             "reportingComponent",
	"source":                         "source",
	"type":                           "type",
	"metadata.namespace":             "metadata.namespace",
	"metadata.name":                  "metadata.name",

	"action":                            "action",
	"reportingInstance":                 "reportingInstance",
	"related.kind":                      "related.kind",
	"related.namespace":                 "related.namespace",
	"related.name":                      "related.name",
	"related.uid":                       "related.uid",
	"related.apiVersion":                "related.apiVersion",
	"related.fieldPath":                 "related.fieldPath",
	"involvedObjectOrRelated.kind":      "involvedObjectOrRelated.kind",
	"involvedObjectOrRelated.namespace": "involvedObjectOrRelated.namespace",
	"involvedObjectOrRelated.name":      "involvedObjectOrRelated.name",
	"involvedObjectOrRelated.uid":       "involvedObjectOrRelated.uid",
}

// eventsV1Labels is what /apis/events.k8s.io/v1 accepts. The first twelve are
// kube-apiserver's (pkg/apis/events/v1/conversion.go); there is no `source`.
var eventsV1Labels = map[string]string{
	"reason":                    "reason",
	"regarding.kind":            "involvedObject.kind",
	"regarding.namespace":       "involvedObject.namespace",
	"regarding.name":            "involvedObject.name",
	"regarding.uid":             "involvedObject.uid",
	"regarding.apiVersion":      "involvedObject.apiVersion",
	"regarding.resourceVersion": "involvedObject.resourceVersion",
	"regarding.fieldPath":       "involvedObject.fieldPath",
	"reportingController":       "reportingComponent",
	"type":                      "type",
	"metadata.namespace":        "metadata.namespace",
	"metadata.name":             "metadata.name",

	"action":                       "action",
	"reportingInstance":            "reportingInstance",
	"related.kind":                 "related.kind",
	"related.namespace":            "related.namespace",
	"related.name":                 "related.name",
	"related.uid":                  "related.uid",
	"related.apiVersion":           "related.apiVersion",
	"related.fieldPath":            "related.fieldPath",
	"regardingOrRelated.kind":      "involvedObjectOrRelated.kind",
	"regardingOrRelated.namespace": "involvedObjectOrRelated.namespace",
	"regardingOrRelated.name":      "involvedObjectOrRelated.name",
	"regardingOrRelated.uid":       "involvedObjectOrRelated.uid",
}

// byLabel finds an internal field by its label.
var byLabel = func() map[string]*field {
	m := make(map[string]*field, len(internalFields))
	for _, f := range internalFields {
		m[f.label] = f
	}
	return m
}()

// A table is the field selector vocabulary of one served resource: the
// labels its kind's field label conversion accepts, and with that which
// requests the set grammar serves (setselector.go).
type table struct {
	resource schema.GroupVersionResource
	kind     schema.GroupVersionKind
	// fields maps each field label to the internal field it means. Every
	// field label has a set form: `label in (...)`, `label notin (...)`.
	fields map[string]string
	// window lists the labels the resource reads itself (history's time
	// window and text search): `=` only, passed through conversion
	// unchanged, no set form.
	window []string
	// own lists labels that no Event field here means, which the resource
	// answers itself (history's own columns): `=`, `!=` and the set form,
	// passed through conversion unchanged (with a set's operator).
	own []string
}

// tables is every resource with field selectors, one entry each.
var tables = []*table{
	{resource: corev1.SchemeGroupVersion.WithResource("events"), kind: corev1.SchemeGroupVersion.WithKind("Event"), fields: coreV1Labels},
	{resource: eventsv1.SchemeGroupVersion.WithResource("events"), kind: eventsv1.SchemeGroupVersion.WithKind("Event"), fields: eventsV1Labels},
	eventRecords,
}

// setForm reports whether the set grammar serves `label in (...)`.
func (t *table) setForm(label string) bool {
	_, ok := t.fields[label]
	return ok || slices.Contains(t.own, label)
}

// plainForm reports whether the resource accepts `label=value`.
func (t *table) plainForm(label string) bool {
	return t.setForm(label) || slices.Contains(t.window, label)
}

// tableFor returns the table of a resource, or nil.
func tableFor(resource schema.GroupVersionResource) *table {
	for _, t := range tables {
		if t.resource == resource {
			return t
		}
	}
	return nil
}

// Labels returns the labels a resource accepts in field selectors: those
// with a set form, and those with `=` only. Tests generate their cases from
// it, so that a new label cannot miss its case.
func Labels(resource schema.GroupVersionResource) (sets, plainOnly []string) {
	t := tableFor(resource)
	if t == nil {
		return nil, nil
	}
	for label := range t.fields {
		sets = append(sets, label)
	}
	sets = append(sets, t.own...)
	slices.Sort(sets)
	return sets, slices.Clone(t.window)
}

// eventSource is kube-apiserver's `source`: the legacy Source.Component, or
// for events.k8s.io-style Events that have none, the reporting controller.
func eventSource(e *core.Event) string {
	if e.Source.Component != "" {
		return e.Source.Component
	}
	return e.ReportingController
}

// AddFieldLabelConversions registers, for every kind with field selectors
// (both Event kinds and history's EventRecord), the conversion of its field
// labels to the internal vocabulary. Labels a resource does not offer fail
// with kube-apiserver's message, which the handler turns into a 400.
func AddFieldLabelConversions(scheme *runtime.Scheme) error {
	for _, t := range tables {
		for label, internal := range t.fields {
			if byLabel[internal] == nil {
				return fmt.Errorf("%v field label %q maps to unknown internal field %q", t.kind, label, internal)
			}
		}
		if err := scheme.AddFieldLabelConversionFunc(t.kind, t.convert); err != nil {
			return err
		}
	}
	return nil
}

// convert is a table's field label conversion. A set requirement keeps its
// operator in the label (setselector.go); the error names the label as the
// client spelled it.
func (t *table) convert(label, value string) (string, string, error) {
	if slices.Contains(t.window, label) {
		return label, value, nil
	}
	base, set := splitSetLabel(label)
	if slices.Contains(t.own, base) {
		return label, value, nil
	}
	internal, ok := t.fields[base]
	if !ok {
		return "", "", fmt.Errorf("field label not supported: %s", labelAsSent(label))
	}
	return internal + set, value, nil
}

// SelectableFields returns the plain internal fields of an Event: kube-apiserver's
// ToSelectableFields plus ours. OR fields are not in the set; the selector
// Matcher builds reads their parts. Empty values are left out: a field
// selector reads a missing field as "", so matching is the same.
func SelectableFields(event *core.Event) fields.Set {
	set := fields.Set{}
	for _, f := range internalFields {
		if f.value == nil {
			continue
		}
		if v := f.value(event); v != "" {
			set[f.label] = v
		}
	}
	return set
}

// eventLabel keys the Event itself in the set GetAttrs returns. No field
// label can be spelled with a NUL, so no selector names it.
const eventLabel = "\x00event"

// GetAttrs is the storage.AttrFunc for Events. The watch cache keeps the set
// it returns beside every Event it holds (cacher store.Element.Fields, and
// twice per change in its event history); as SelectableFields, that set was
// the largest single cost per cached Event (a Go map of 13 to 19 entries,
// BenchmarkCacheMemory). So the set holds only what the cacher reads itself,
// metadata.namespace and metadata.name (cacher.dispatchEvent routes events
// by them), and the Event, and the selectors Matcher builds read every
// other field from that Event when they are matched. Objects in the watch
// cache are never modified, so a value read at match time is the one
// GetAttrs would have stored.
//
// The Event rides in the set as a string whose data pointer is the Event: a
// fields.Set is a map of strings, and a string's data pointer is traced by
// the garbage collector, so the set keeps its Event alive as the stored
// field set would have kept its values. eventIn turns it back.
func GetAttrs(obj runtime.Object) (labels.Set, fields.Set, error) {
	event, ok := obj.(*core.Event)
	if !ok {
		return nil, nil, fmt.Errorf("not an event")
	}
	return labels.Set(event.Labels), fields.Set{
		"metadata.namespace": event.Namespace,
		"metadata.name":      event.Name,
		eventLabel:           unsafe.String((*byte)(unsafe.Pointer(event)), unsafe.Sizeof(*event)),
	}, nil
}

// eventIn returns the Event a set from GetAttrs carries, or nil for any
// other set (one SelectableFields built, or a caller's own).
func eventIn(set fields.Fields) *core.Event {
	s := set.Get(eventLabel)
	if len(s) != int(unsafe.Sizeof(core.Event{})) {
		return nil
	}
	return (*core.Event)(unsafe.Pointer(unsafe.StringData(s)))
}

// Matcher is the registry's PredicateFunc. It gets a selector already in
// internal labels and wraps it (eventSelector), so that every consumer (etcd3
// store, cacher, cache watchers) evaluates OR fields and reads fields from
// the Event GetAttrs carries.
func Matcher(label labels.Selector, field fields.Selector) storage.SelectionPredicate {
	field = wrapSelector(field)
	return storage.SelectionPredicate{
		Label:       label,
		Field:       field,
		GetAttrs:    GetAttrs,
		IndexFields: indexFields(field),
	}
}
