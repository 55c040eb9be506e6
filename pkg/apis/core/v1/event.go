package v1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/conversion"

	"github.com/eventapiserver/event-apiserver/pkg/apis/core"
)

// Convert_v1_Event_To_core_Event is the generated conversion: the internal
// Event has no TypeMeta to fill (core.Event.GetObjectKind).
func Convert_v1_Event_To_core_Event(in *corev1.Event, out *core.Event, s conversion.Scope) error {
	return autoConvert_v1_Event_To_core_Event(in, out, s)
}
