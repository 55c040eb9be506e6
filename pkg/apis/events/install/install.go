// Package install registers the events.k8s.io group (the internal Event
// under events.k8s.io/__internal, events.k8s.io/v1, and v1beta1, which is
// known but not served, as in kube-apiserver) into a scheme.
package install

import (
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"

	"github.com/eventapiserver/event-apiserver/pkg/apis/events"
	eventsv1 "github.com/eventapiserver/event-apiserver/pkg/apis/events/v1"
	eventsv1beta1 "github.com/eventapiserver/event-apiserver/pkg/apis/events/v1beta1"
)

func Install(scheme *runtime.Scheme) {
	utilruntime.Must(events.AddToScheme(scheme))
	utilruntime.Must(eventsv1beta1.AddToScheme(scheme))
	utilruntime.Must(eventsv1.AddToScheme(scheme))
	utilruntime.Must(scheme.SetVersionPriority(eventsv1.SchemeGroupVersion, eventsv1beta1.SchemeGroupVersion))
}
