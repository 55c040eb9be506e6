package core

import (
	"testing"
	"unsafe"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The watch cache holds one Event per live Event; 576 is the runtime's
// size class below the decoder's core/v1 Events (GetObjectKind says why
// that matters). A field added here that crosses it costs 64 bytes an
// Event and brings the shared spans back.
func TestEventFitsItsSizeClass(t *testing.T) {
	if size := unsafe.Sizeof(Event{}); size > 576 {
		t.Errorf("core.Event is %d bytes, more than the 576-byte size class", size)
	}
}

func TestEventHasNoKind(t *testing.T) {
	e := &Event{}
	e.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: "Event"})
	if gvk := e.GetObjectKind().GroupVersionKind(); !gvk.Empty() {
		t.Errorf("an internal Event reports kind %v", gvk)
	}
}
