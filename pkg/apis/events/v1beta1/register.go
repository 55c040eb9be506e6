package v1beta1

import (
	eventsv1beta1 "k8s.io/api/events/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

var SchemeGroupVersion = eventsv1beta1.SchemeGroupVersion

var (
	localSchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	AddToScheme        = localSchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion, &eventsv1beta1.Event{}, &eventsv1beta1.EventList{})
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return nil
}
