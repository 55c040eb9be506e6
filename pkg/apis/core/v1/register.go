package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

var SchemeGroupVersion = corev1.SchemeGroupVersion

var (
	localSchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	AddToScheme        = localSchemeBuilder.AddToScheme
)

// addKnownTypes registers only Event and EventList of core/v1: this server
// serves nothing else from the core group.
func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion, &corev1.Event{}, &corev1.EventList{})
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return nil
}
