package fieldselectors

import (
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/client-go/tools/cache"

	"github.com/eventapiserver/event-apiserver/pkg/apis/core"
)

// indexed lists the indexed internal fields, finest first: the cacher uses
// the first of a predicate's IndexFields that the selector pins.
var indexed = func() []*field {
	var out []*field
	for _, f := range internalFields {
		if f.index != notIndexed {
			out = append(out, f)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].index < out[j].index })
	return out
}()

// Indexers returns the watch cache's indexes, one per indexed field, named
// storage.FieldIndex(label). An OR field's index holds an Event under the
// values of each field it consults, so one bucket is its whole answer.
//
// Empty values are not indexed: nearly every Event has no Related, and a ""
// bucket would hold all of them in each related index for no query worth
// serving. indexFields never offers an index for an empty value, so such a
// selector falls back to a scan and still sees those Events.
func Indexers() *cache.Indexers {
	indexers := cache.Indexers{}
	for _, f := range indexed {
		indexers[storage.FieldIndex(f.label)] = indexFunc(f)
	}
	return &indexers
}

func indexFunc(f *field) cache.IndexFunc {
	reads := []func(*core.Event) string{f.value}
	if f.either != nil {
		reads = reads[:0]
		for _, label := range f.either {
			reads = append(reads, byLabel[label].value)
		}
	}
	return func(obj interface{}) ([]string, error) {
		event, ok := obj.(*core.Event)
		if !ok {
			return nil, fmt.Errorf("index %s: not an event: %T", f.label, obj)
		}
		var values []string
		for _, read := range reads {
			if v := read(event); v != "" && !contains(values, v) {
				values = append(values, v)
			}
		}
		return values, nil
	}
}

func contains(values []string, v string) bool {
	for _, have := range values {
		if have == v {
			return true
		}
	}
	return false
}

// indexFields is a predicate's IndexFields: the indexed fields the selector
// pins to a non-empty value, finest first, and the trigger's field when it
// pins that, which the cacher's watch looks for there (cacher.go Watch) and
// its LIST skips, as no index bears its name. Leaving out an index whose
// value is empty keeps the cacher off buckets Indexers never fills.
func indexFields(selector fields.Selector) []string {
	if selector == nil {
		return nil
	}
	var out []string
	for _, f := range indexed {
		if v, ok := selector.RequiresExactMatch(f.label); ok && v != "" {
			out = append(out, f.label)
		}
	}
	if v, ok := selector.RequiresExactMatch(triggerLabel); ok && v != "" && !contains(out, triggerLabel) {
		out = append(out, triggerLabel)
	}
	return out
}

// WithinNamespace adapts a predicate to a list of one namespace. A
// reporter's bucket holds its Events of every namespace: for a common
// reporter it is far larger than the namespace such a list reads without it
// (BenchmarkGetList ns/reporter-indexed against ns/reporter prices the two).
// Scanning the namespace costs at most what kube-apiserver pays for every
// selector; the finer indexes stay.
func WithinNamespace(p storage.SelectionPredicate) storage.SelectionPredicate {
	var kept []string
	for _, label := range p.IndexFields {
		if f, ok := byLabel[label]; !ok || f.index != perReporter {
			kept = append(kept, label)
		}
	}
	p.IndexFields = kept
	return p
}

// triggerLabel is the field TriggerFuncs keys cache watchers on.
const triggerLabel = "involvedObject.name"

// TriggerFuncs returns the cacher's trigger (storage.IndexerFuncs; the cacher
// accepts at most one). A watch whose selector pins involvedObject.name, as
// `kubectl events --for kind/name --watch` does, is then only woken for
// Events about that name instead of for every Event.
//
// Trade-off: the trigger runs once per Event change, and once a trigger
// exists the cacher sizes the buffer of every watch NOT using it up to 1000
// events instead of 100 (watch_cache.go suggestedWatchChannelSize), so plain
// `kubectl get events -w` and informers cost more memory on a busy cache.
// Name rather than UID because that is what kubectl's watch sends; kubectl
// describe, which sends the UID, only lists.
func TriggerFuncs() storage.IndexerFuncs {
	name := byLabel[triggerLabel].value
	return storage.IndexerFuncs{
		triggerLabel: func(obj runtime.Object) string {
			if event, ok := obj.(*core.Event); ok {
				return name(event)
			}
			return ""
		},
	}
}
