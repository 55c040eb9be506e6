package v1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/conversion"

	"github.com/eventapiserver/event-apiserver/pkg/apis/core"
)

// Convert_v1_Event_To_core_Event is declared by hand only because
// conversion-gen will not declare it: core/v1's TypeMeta has no peer in the
// internal Event (core.Event.GetObjectKind says why), and a field without a
// peer makes it leave the public function to the package. apiVersion and
// kind are all that TypeMeta holds, and the scheme drops them on conversion
// to internal anyway, so the generated field copy is the whole conversion.
func Convert_v1_Event_To_core_Event(in *corev1.Event, out *core.Event, s conversion.Scope) error {
	return autoConvert_v1_Event_To_core_Event(in, out, s)
}
