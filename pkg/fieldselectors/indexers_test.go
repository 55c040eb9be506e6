package fieldselectors

import (
	"context"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apiserver/pkg/storage"

	"github.com/eventapiserver/event-apiserver/pkg/apis/core"
)

func TestIndexers(t *testing.T) {
	noRelated := podEvent()
	noRelated.Related = nil
	selfRelated := podEvent()
	selfRelated.Related = selfRelated.InvolvedObject.DeepCopy()

	tests := []struct {
		name  string
		event *core.Event
		want  map[string][]string
	}{
		{"regarding and related", podEvent(), map[string][]string{
			"involvedObjectOrRelated.uid":  {"uid-pod", "uid-rs"},
			"involvedObjectOrRelated.name": {"web-0", "web-5d4"},
			"reportingComponent":           {"kubernetes.io/kubelet"},
		}},
		// Empty values are left out of every index.
		{"no related", noRelated, map[string][]string{
			"involvedObjectOrRelated.uid":  {"uid-pod"},
			"involvedObjectOrRelated.name": {"web-0"},
			"reportingComponent":           {"kubernetes.io/kubelet"},
		}},
		{"related is regarding", selfRelated, map[string][]string{
			"involvedObjectOrRelated.uid":  {"uid-pod"},
			"involvedObjectOrRelated.name": {"web-0"},
			"reportingComponent":           {"kubernetes.io/kubelet"},
		}},
	}
	indexers := *Indexers()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if len(indexers) != len(tc.want) {
				t.Fatalf("got %d indexes, want %d", len(indexers), len(tc.want))
			}
			for label, want := range tc.want {
				index := indexers[storage.FieldIndex(label)]
				if index == nil {
					t.Fatalf("no index %s", storage.FieldIndex(label))
				}
				got, err := index(tc.event)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("%s: got %q, want %q", label, got, want)
				}
			}
		})
	}

	if _, err := indexers[storage.FieldIndex("involvedObjectOrRelated.uid")](&core.EventList{}); err == nil {
		t.Error("an index accepted a non-Event")
	}
}

// TestIndexesAreComplete checks the property the cacher relies on: an index
// bucket holds every Event the selector `label=value` matches, so serving a
// LIST from it loses nothing; for an OR field's own label it holds exactly
// those, and for a field it consults, at least those.
func TestIndexesAreComplete(t *testing.T) {
	noRelated := podEvent()
	noRelated.Related = nil
	events := []*core.Event{podEvent(), otherEvent(), noRelated}
	indexers := *Indexers()
	for _, f := range indexed {
		index := indexers[storage.FieldIndex(f.label)]
		// Every value any event could be selected by: all indexed values of all events.
		candidates := map[string]bool{}
		for _, e := range events {
			values, _ := index(e)
			for _, v := range values {
				candidates[v] = true
			}
		}
		for _, label := range append([]string{f.label}, f.either...) {
			for _, e := range events {
				values, _ := index(e)
				for v := range candidates {
					p := Matcher(labels.Everything(), wrapSelector(fields.OneTermEqualSelector(label, v)))
					matches, err := p.Matches(e)
					if err != nil {
						t.Fatal(err)
					}
					if matches && !contains(values, v) || label == f.label && matches != contains(values, v) {
						t.Errorf("%s=%s on %s: selector matches %v, index %s has it %v", label, v, e.Name, matches, f.label, contains(values, v))
					}
				}
			}
		}
	}
}

func TestIndexFields(t *testing.T) {
	tests := []struct {
		name     string
		selector string
		want     []string
	}{
		{"describe pod: uid before name, then the trigger", "involvedObject.name=web-0,involvedObject.namespace=shop,involvedObject.uid=uid-pod",
			[]string{"involvedObjectOrRelated.uid", "involvedObjectOrRelated.name", "involvedObject.name"}},
		{"events --for: name", "involvedObject.kind=Pod,involvedObject.apiVersion=v1,involvedObject.name=web-0",
			[]string{"involvedObjectOrRelated.name", "involvedObject.name"}},
		{"or uid", "involvedObjectOrRelated.uid=u", []string{"involvedObjectOrRelated.uid"}},
		{"related uid", "related.uid=r", []string{"involvedObjectOrRelated.uid"}},
		{"uids before names before reporter", "reportingComponent=kubelet,related.name=n,involvedObjectOrRelated.uid=u,related.uid=r",
			[]string{"involvedObjectOrRelated.uid", "involvedObjectOrRelated.name", "reportingComponent"}},
		{"empty value is not looked up", "involvedObject.uid=,involvedObject.name=web-0",
			[]string{"involvedObjectOrRelated.name", "involvedObject.name"}},
		{"empty trigger value is not looked up", "involvedObject.name=", nil},
		{"!= is not looked up", "involvedObject.uid!=u", nil},
		{"unindexed", "reason=BackOff,metadata.namespace=shop", nil},
		{"everything", "", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			selector, err := fields.ParseSelector(tc.selector)
			if err != nil {
				t.Fatal(err)
			}
			p := Matcher(labels.Everything(), selector)
			if !reflect.DeepEqual(p.IndexFields, tc.want) {
				t.Fatalf("IndexFields: got %q, want %q", p.IndexFields, tc.want)
			}
			// What the cacher will look up first (watch_cache.go listLatestRV).
			// The trigger's field has no index: its name is skipped there.
			var got []string
			for _, mv := range p.MatcherIndex(context.Background()) {
				got = append(got, mv.IndexName)
			}
			var want []string
			for _, label := range tc.want {
				want = append(want, storage.FieldIndex(label))
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("MatcherIndex: got %q, want %q", got, want)
			}
			indexers := *Indexers()
			for _, name := range got {
				if indexers[name] == nil && name != storage.FieldIndex(triggerLabel) {
					t.Errorf("MatcherIndex names %s, which is neither an index nor the trigger's", name)
				}
			}
		})
	}
}

func TestWithinNamespace(t *testing.T) {
	tests := []struct {
		name     string
		selector string
		want     []string
	}{
		{"reporter alone: scan the namespace", "reportingComponent=kubelet", nil},
		{"finer indexes stay", "reportingComponent=kubelet,involvedObject.uid=u", []string{"involvedObjectOrRelated.uid"}},
		{"describe pod unchanged", "involvedObject.name=web-0,involvedObject.uid=u",
			[]string{"involvedObjectOrRelated.uid", "involvedObjectOrRelated.name", "involvedObject.name"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			selector, err := fields.ParseSelector(tc.selector)
			if err != nil {
				t.Fatal(err)
			}
			p := WithinNamespace(Matcher(labels.Everything(), selector))
			if !reflect.DeepEqual(p.IndexFields, tc.want) {
				t.Fatalf("IndexFields: got %q, want %q", p.IndexFields, tc.want)
			}
			if !p.Field.Matches(fields.Set{"reportingComponent": "kubelet", "involvedObject.uid": "u", "involvedObject.name": "web-0"}) {
				t.Errorf("the selector itself changed: %v", p.Field)
			}
		})
	}
}

func TestIndexOrder(t *testing.T) {
	var got []string
	for _, f := range indexed {
		got = append(got, f.label)
	}
	want := []string{"involvedObjectOrRelated.uid", "involvedObjectOrRelated.name", "reportingComponent"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	indexers := *Indexers()
	for _, label := range want {
		if indexers[storage.FieldIndex(label)] == nil {
			t.Errorf("Indexers lacks %s", storage.FieldIndex(label))
		}
	}
	if len(indexers) != len(want) {
		t.Errorf("Indexers has %d indexes, want %d", len(indexers), len(want))
	}
}

func TestTriggerFuncs(t *testing.T) {
	triggers := TriggerFuncs()
	if len(triggers) != 1 {
		t.Fatalf("the cacher accepts one trigger, got %d", len(triggers))
	}
	trigger := triggers[triggerLabel]
	if trigger == nil {
		t.Fatalf("no trigger for %s", triggerLabel)
	}
	if got := trigger(podEvent()); got != "web-0" {
		t.Errorf("got %q, want web-0", got)
	}
	if got := trigger(&core.EventList{}); got != "" {
		t.Errorf("non-Event: got %q", got)
	}
	// The cacher only uses the trigger when it is among the predicate's IndexFields.
	selector := fields.OneTermEqualSelector(triggerLabel, "web-0")
	if p := Matcher(labels.Everything(), selector); !contains(p.IndexFields, triggerLabel) {
		t.Errorf("IndexFields %q lacks the trigger label", p.IndexFields)
	}
}
