package fieldselectors

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/fields"
)

func TestWithOrFieldsWrapsOnlyOrSelectors(t *testing.T) {
	plainSelector := fields.ParseSelectorOrDie("involvedObject.uid=u,type!=Normal")
	if got := withOrFields(plainSelector); got.String() != plainSelector.String() {
		t.Errorf("a selector without OR fields changed: %q", got)
	} else if _, ok := got.(*orSelector); ok {
		t.Error("a selector without OR fields was wrapped")
	}
	if got := withOrFields(nil); got != nil {
		t.Errorf("nil became %v", got)
	}
	if _, ok := withOrFields(fields.ParseSelectorOrDie("type=Normal,involvedObjectOrRelated.uid=u")).(*orSelector); !ok {
		t.Error("a selector with an OR field was not wrapped")
	}
}

func TestOrSelector(t *testing.T) {
	// ParseSelector sorts the terms, so String lists them by label.
	s := withOrFields(fields.ParseSelectorOrDie(`involvedObjectOrRelated.uid=u1,type!=Normal,involvedObjectOrRelated.name==a\,b`))

	t.Run("String", func(t *testing.T) {
		if got, want := s.String(), `involvedObjectOrRelated.name=a\,b,involvedObjectOrRelated.uid=u1,type!=Normal`; got != want {
			t.Errorf("got %q, want %q", got, want)
		}
		// What String prints parses back to the same selector.
		again := withOrFields(fields.ParseSelectorOrDie(s.String()))
		if again.String() != s.String() {
			t.Errorf("round trip: %q became %q", s.String(), again.String())
		}
	})

	t.Run("RequiresExactMatch", func(t *testing.T) {
		for _, tc := range []struct {
			label string
			value string
			found bool
		}{
			{"involvedObjectOrRelated.uid", "u1", true},
			{"involvedObjectOrRelated.name", "a,b", true},
			{"type", "", false},
			// The OR does not pin either of its parts.
			{"involvedObject.uid", "", false},
			{"related.uid", "", false},
		} {
			value, found := s.RequiresExactMatch(tc.label)
			if value != tc.value || found != tc.found {
				t.Errorf("%s: got (%q, %v), want (%q, %v)", tc.label, value, found, tc.value, tc.found)
			}
		}
	})

	t.Run("Empty and Requirements", func(t *testing.T) {
		if s.Empty() {
			t.Error("Empty")
		}
		if n := len(s.Requirements()); n != 3 {
			t.Errorf("%d requirements, want 3", n)
		}
	})

	t.Run("DeepCopySelector", func(t *testing.T) {
		c := s.DeepCopySelector()
		c.Requirements()[0].Value = "changed"
		c.(*orSelector).requirements[0].Value = "changed"
		if v, _ := s.RequiresExactMatch("involvedObjectOrRelated.uid"); v != "u1" {
			t.Errorf("the copy shares requirements with the original: %q", v)
		}
	})

	t.Run("Transform", func(t *testing.T) {
		renamed, err := s.Transform(func(label, value string) (string, string, error) {
			if label == "type" {
				return "reason", value, nil
			}
			return label, value, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := renamed.String(), `involvedObjectOrRelated.name=a\,b,involvedObjectOrRelated.uid=u1,reason!=Normal`; got != want {
			t.Errorf("got %q, want %q", got, want)
		}
		if _, ok := renamed.(*orSelector); !ok {
			t.Errorf("still has OR fields but is %T", renamed)
		}

		// Dropping the OR fields leaves a plain selector.
		dropped, err := s.Transform(func(label, value string) (string, string, error) {
			if label == "type" {
				return label, value, nil
			}
			return "", "", nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := dropped.(*orSelector); ok || dropped.String() != "type!=Normal" {
			t.Errorf("got %T %q, want the plain type!=Normal", dropped, dropped.String())
		}

		if _, err := s.Transform(func(label, value string) (string, string, error) {
			return "", "", fmt.Errorf("field label not supported: %s", label)
		}); err == nil {
			t.Error("a transform error was lost")
		}
	})
}
