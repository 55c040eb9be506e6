// Package install registers the events.k8s.io group (the internal Event
// under events.k8s.io/__internal, and events.k8s.io/v1) into a scheme.
package install

import (
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"

	"github.com/eventapiserver/event-apiserver/pkg/apis/events"
	eventsv1 "github.com/eventapiserver/event-apiserver/pkg/apis/events/v1"
)

func Install(scheme *runtime.Scheme) {
	utilruntime.Must(events.AddToScheme(scheme))
	utilruntime.Must(eventsv1.AddToScheme(scheme))
	utilruntime.Must(scheme.SetVersionPriority(eventsv1.SchemeGroupVersion))
}
