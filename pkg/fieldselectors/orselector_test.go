package fieldselectors

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/fields"
)

func TestWrapSelector(t *testing.T) {
	plainSelector := fields.ParseSelectorOrDie("involvedObject.uid=u,type!=Normal")
	got := wrapSelector(plainSelector)
	if got.String() != plainSelector.String() {
		t.Errorf("a plain selector changed: %q", got)
	}
	if _, ok := got.(*eventSelector); !ok {
		t.Error("a selector with requirements was not wrapped: it could not read the Event GetAttrs carries")
	}
	if again := wrapSelector(got); again != got {
		t.Error("a wrapped selector was wrapped again")
	}
	if got := wrapSelector(nil); got != nil {
		t.Errorf("nil became %v", got)
	}
	if got := wrapSelector(fields.Everything()); !got.Empty() {
		t.Errorf("Everything became %v", got)
	}
}

func TestOrSelector(t *testing.T) {
	// ParseSelector sorts the terms, so String lists them by label.
	s := wrapSelector(fields.ParseSelectorOrDie(`involvedObjectOrRelated.uid=u1,type!=Normal,involvedObjectOrRelated.name==a\,b`))

	t.Run("String", func(t *testing.T) {
		if got, want := s.String(), `involvedObjectOrRelated.name=a\,b,involvedObjectOrRelated.uid=u1,type!=Normal`; got != want {
			t.Errorf("got %q, want %q", got, want)
		}
		// What String prints parses back to the same selector.
		again := wrapSelector(fields.ParseSelectorOrDie(s.String()))
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
		c.(*eventSelector).requirements[0].Value = "changed"
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
		if _, ok := renamed.(*eventSelector); !ok {
			t.Errorf("still has OR fields but is %T", renamed)
		}

		dropped, err := s.Transform(func(label, value string) (string, string, error) {
			if label == "type" {
				return label, value, nil
			}
			return "", "", nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if dropped.String() != "type!=Normal" {
			t.Errorf("got %q, want type!=Normal", dropped.String())
		}

		if _, err := s.Transform(func(label, value string) (string, string, error) {
			return "", "", fmt.Errorf("field label not supported: %s", label)
		}); err == nil {
			t.Error("a transform error was lost")
		}
	})
}
