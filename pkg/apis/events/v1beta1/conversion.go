package v1beta1

import (
	"unsafe"

	eventsv1 "k8s.io/api/events/v1"
	eventsv1beta1 "k8s.io/api/events/v1beta1"
	"k8s.io/apimachinery/pkg/conversion"

	"github.com/eventapiserver/event-apiserver/pkg/apis/core"
	eventsv1conv "github.com/eventapiserver/event-apiserver/pkg/apis/events/v1"
)

// Convert_v1beta1_Event_To_core_Event converts as events.k8s.io/v1 does
// (kube-apiserver's pkg/apis/events/v1beta1 repeats v1's hand-written
// conversion): the two versions' Events have the same fields in the same
// order (TestSameLayoutAsV1), so a v1beta1 Event is read as a v1 one, as
// conversion-gen reads any two types of one memory layout.
func Convert_v1beta1_Event_To_core_Event(in *eventsv1beta1.Event, out *core.Event, s conversion.Scope) error {
	return eventsv1conv.Convert_v1_Event_To_core_Event((*eventsv1.Event)(unsafe.Pointer(in)), out, s)
}

func Convert_core_Event_To_v1beta1_Event(in *core.Event, out *eventsv1beta1.Event, s conversion.Scope) error {
	return eventsv1conv.Convert_core_Event_To_v1_Event(in, (*eventsv1.Event)(unsafe.Pointer(out)), s)
}
