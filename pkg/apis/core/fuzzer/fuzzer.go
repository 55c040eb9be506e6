// Package fuzzer fills Events with random values for the round-trip tests.
// metav1.Time and MicroTime fill themselves at the precision their JSON form
// keeps (seconds and microseconds), so only the Event shape needs help here.
package fuzzer

import (
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	runtimeserializer "k8s.io/apimachinery/pkg/runtime/serializer"
	"sigs.k8s.io/randfill"

	"github.com/eventapiserver/event-apiserver/pkg/apis/core"
)

// Funcs returns randfill functions for the internal Event and both external
// Events. Merge them after k8s.io/apimachinery/pkg/apis/meta/fuzzer.Funcs.
//
// Each time field is zeroed with even odds. The time self-fillers never
// produce a zero time, yet that is what most stored Events hold (core/v1
// recorders leave eventTime unset, events.k8s.io/v1 recorders the deprecated
// timestamps), and a zero time is the one that encodes as JSON null.
func Funcs(_ runtimeserializer.CodecFactory) []interface{} {
	return []interface{}{
		func(e *core.Event, c randfill.Continue) {
			c.FillNoCustom(e)
			maybeZero(c, &e.EventTime)
			maybeZero(c, &e.FirstTimestamp)
			maybeZero(c, &e.LastTimestamp)
			if e.Series != nil {
				maybeZero(c, &e.Series.LastObservedTime)
			}
		},
		func(e *corev1.Event, c randfill.Continue) {
			c.FillNoCustom(e)
			maybeZero(c, &e.EventTime)
			maybeZero(c, &e.FirstTimestamp)
			maybeZero(c, &e.LastTimestamp)
			if e.Series != nil {
				maybeZero(c, &e.Series.LastObservedTime)
			}
		},
		func(e *eventsv1.Event, c randfill.Continue) {
			c.FillNoCustom(e)
			maybeZero(c, &e.EventTime)
			maybeZero(c, &e.DeprecatedFirstTimestamp)
			maybeZero(c, &e.DeprecatedLastTimestamp)
			if e.Series != nil {
				maybeZero(c, &e.Series.LastObservedTime)
			}
		},
	}
}

func maybeZero[T any](c randfill.Continue, v *T) {
	if c.Bool() {
		var zero T
		*v = zero
	}
}
