package v1beta1

import (
	"reflect"
	"testing"

	eventsv1 "k8s.io/api/events/v1"
	eventsv1beta1 "k8s.io/api/events/v1beta1"
)

// TestSameLayoutAsV1 pins what conversion.go's cast relies on: a v1beta1
// Event is laid out as a v1 Event, field by field, down to the types both
// share. It fails when k8s.io/api changes either.
func TestSameLayoutAsV1(t *testing.T) {
	sameLayout(t, "Event", reflect.TypeOf(eventsv1beta1.Event{}), reflect.TypeOf(eventsv1.Event{}))
}

func sameLayout(t *testing.T, path string, a, b reflect.Type) {
	t.Helper()
	if a == b {
		return
	}
	if a.Kind() != b.Kind() || a.Size() != b.Size() || a.Align() != b.Align() {
		t.Fatalf("%s: %v and %v differ in kind, size or alignment", path, a, b)
	}
	switch a.Kind() {
	case reflect.Pointer, reflect.Slice:
		sameLayout(t, path, a.Elem(), b.Elem())
	case reflect.Struct:
		if a.NumField() != b.NumField() {
			t.Fatalf("%s: %d fields against %d", path, a.NumField(), b.NumField())
		}
		for i := range a.NumField() {
			fa, fb := a.Field(i), b.Field(i)
			if fa.Name != fb.Name || fa.Offset != fb.Offset {
				t.Fatalf("%s: field %d is %s at %d against %s at %d", path, i, fa.Name, fa.Offset, fb.Name, fb.Offset)
			}
			sameLayout(t, path+"."+fa.Name, fa.Type, fb.Type)
		}
	default:
		t.Fatalf("%s: %v and %v are different types", path, a, b)
	}
}
