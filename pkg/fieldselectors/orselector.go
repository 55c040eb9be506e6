package fieldselectors

import (
	"strings"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/eventapiserver/event-apiserver/pkg/apis/core"
)

// eventSelector is the fields.Selector of every Event predicate (Matcher).
// It does two things a plain selector cannot:
//   - it understands OR fields. A flat fields.Set holds one value per label,
//     so `involvedObjectOrRelated.uid=U` cannot be a key of it; instead the
//     selector reads the plain fields the OR field names;
//   - it reads fields from the Event that GetAttrs puts in the set, so the
//     watch cache does not keep a field set per Event.
//
// Everything that filters Events (etcd3 store, cacher, cache watchers) calls
// Matches on the fields.Set GetAttrs produced, so this is the one place
// selectors are evaluated.
//
// Requirements are evaluated as the fields package does: `=` holds when the
// field equals the value (an absent field is ""), `!=` when it does not.
type eventSelector struct {
	requirements fields.Requirements
	// read is requirements as Read reads them, once per selector rather
	// than once per Event matched.
	read []Requirement
}

// wrapSelector wraps a selector with requirements; an empty or nil one is
// returned as it is.
func wrapSelector(s fields.Selector) fields.Selector {
	if s == nil || s.Empty() {
		return s
	}
	if _, ok := s.(*eventSelector); ok {
		return s
	}
	return newEventSelector(s.Requirements())
}

func newEventSelector(requirements fields.Requirements) *eventSelector {
	s := &eventSelector{requirements: requirements, read: make([]Requirement, 0, len(requirements))}
	for _, r := range requirements {
		s.read = append(s.read, read(r))
	}
	return s
}

// consults returns the plain labels a requirement on label reads.
func consults(label string) []string {
	if f := byLabel[label]; f != nil && f.either != nil {
		return f.either
	}
	return []string{label}
}

// get reads a plain label from the Event when the set carries one, else
// from the set.
func get(set fields.Fields, event *core.Event, label string) string {
	if event == nil {
		return set.Get(label)
	}
	if f := byLabel[label]; f != nil && f.value != nil {
		return f.value(event)
	}
	return ""
}

func (s *eventSelector) Matches(set fields.Fields) bool {
	event := eventIn(set)
	for i, r := range s.requirements {
		if r.Operator != selection.Equals && r.Operator != selection.DoubleEquals && r.Operator != selection.NotEquals {
			// Field selectors have no other operator; refuse rather than guess.
			return false
		}
		req := s.read[i]
		found := false
		for _, label := range consults(req.Field) {
			value := get(set, event, label)
			for _, want := range req.Values {
				if value == want {
					found = true
					break
				}
			}
			if found {
				break
			}
		}
		if found == req.Not {
			return false
		}
	}
	return true
}

func (s *eventSelector) Empty() bool {
	return len(s.requirements) == 0
}

// RequiresExactMatch reports the value of an `=` requirement, OR fields
// included: that is what lets MatcherIndex pick the OR index. An OR field is
// also pinned by an `=` on any field it consults, since every Event that
// requirement selects has that value among the OR field's: `related.uid=U`
// can be served from the bucket of involvedObjectOrRelated.uid=U.
func (s *eventSelector) RequiresExactMatch(label string) (string, bool) {
	if v, ok := s.exactMatch(label); ok {
		return v, true
	}
	if f := byLabel[label]; f != nil {
		for _, part := range f.either {
			if v, ok := s.exactMatch(part); ok {
				return v, true
			}
		}
	}
	return "", false
}

func (s *eventSelector) exactMatch(label string) (string, bool) {
	for _, r := range s.requirements {
		if r.Field == label && (r.Operator == selection.Equals || r.Operator == selection.DoubleEquals) {
			return r.Value, true
		}
	}
	return "", false
}

// Transform follows the fields package: a requirement whose label and value
// both become empty is dropped.
func (s *eventSelector) Transform(fn fields.TransformFunc) (fields.Selector, error) {
	var terms []fields.Selector
	for _, r := range s.requirements {
		label, value, err := fn(r.Field, r.Value)
		if err != nil {
			return nil, err
		}
		if label == "" && value == "" {
			continue
		}
		terms = append(terms, term(label, value, r.Operator == selection.NotEquals))
	}
	return wrapSelector(fields.AndSelectors(terms...)), nil
}

func (s *eventSelector) Requirements() fields.Requirements {
	return append(fields.Requirements(nil), s.requirements...)
}

func (s *eventSelector) String() string {
	terms := make([]string, 0, len(s.requirements))
	for _, r := range s.requirements {
		op := "="
		if r.Operator == selection.NotEquals {
			op = "!="
		}
		terms = append(terms, r.Field+op+fields.EscapeValue(r.Value))
	}
	return strings.Join(terms, ",")
}

func (s *eventSelector) DeepCopySelector() fields.Selector {
	return newEventSelector(s.Requirements())
}
