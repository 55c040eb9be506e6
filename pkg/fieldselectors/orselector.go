package fieldselectors

import (
	"strings"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/selection"
)

// orSelector is a fields.Selector that understands OR fields. A flat
// fields.Set holds one value per label, so `involvedObjectOrRelated.uid=U`
// cannot be a key of it; instead the selector reads the plain fields the OR
// field names. Everything that filters Events (etcd3 store, cacher, cache
// watchers) calls Matches on the fields.Set GetAttrs produced, so this is the
// one place the OR is evaluated.
//
// Plain requirements are evaluated as the fields package does: `=` holds when
// the field equals the value (an absent field is ""), `!=` when it does not.
type orSelector struct {
	requirements fields.Requirements
}

// withOrFields wraps a selector that uses an OR field; any other selector is
// returned as it is, so kube-apiserver's labels behave exactly as there.
func withOrFields(s fields.Selector) fields.Selector {
	if s == nil {
		return nil
	}
	requirements := s.Requirements()
	for _, r := range requirements {
		if f := byLabel[r.Field]; f != nil && f.either != nil {
			return &orSelector{requirements: requirements}
		}
	}
	return s
}

// consults returns the fields.Set keys a requirement on label reads.
func consults(label string) []string {
	if f := byLabel[label]; f != nil && f.either != nil {
		return f.either
	}
	return []string{label}
}

func (s *orSelector) Matches(set fields.Fields) bool {
	for _, r := range s.requirements {
		found := false
		for _, key := range consults(r.Field) {
			if set.Get(key) == r.Value {
				found = true
				break
			}
		}
		switch r.Operator {
		case selection.Equals, selection.DoubleEquals:
			if !found {
				return false
			}
		case selection.NotEquals:
			if found {
				return false
			}
		default:
			// Field selectors have no other operator; refuse rather than guess.
			return false
		}
	}
	return true
}

func (s *orSelector) Empty() bool {
	return len(s.requirements) == 0
}

// RequiresExactMatch reports the value of an `=` requirement, OR fields
// included: that is what lets MatcherIndex pick the OR index.
func (s *orSelector) RequiresExactMatch(label string) (string, bool) {
	for _, r := range s.requirements {
		if r.Field == label && (r.Operator == selection.Equals || r.Operator == selection.DoubleEquals) {
			return r.Value, true
		}
	}
	return "", false
}

// Transform follows the fields package: a requirement whose label and value
// both become empty is dropped. The result is wrapped again only if it still
// uses an OR field.
func (s *orSelector) Transform(fn fields.TransformFunc) (fields.Selector, error) {
	var terms []fields.Selector
	for _, r := range s.requirements {
		label, value, err := fn(r.Field, r.Value)
		if err != nil {
			return nil, err
		}
		if label == "" && value == "" {
			continue
		}
		if r.Operator == selection.NotEquals {
			terms = append(terms, fields.OneTermNotEqualSelector(label, value))
		} else {
			terms = append(terms, fields.OneTermEqualSelector(label, value))
		}
	}
	return withOrFields(fields.AndSelectors(terms...)), nil
}

func (s *orSelector) Requirements() fields.Requirements {
	return append(fields.Requirements(nil), s.requirements...)
}

func (s *orSelector) String() string {
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

func (s *orSelector) DeepCopySelector() fields.Selector {
	return &orSelector{requirements: s.Requirements()}
}
