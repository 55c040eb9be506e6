// Package install registers history.eventapiserver.io into a scheme.
package install

import (
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"

	"github.com/eventapiserver/event-apiserver/pkg/apis/history"
	"github.com/eventapiserver/event-apiserver/pkg/apis/history/v1alpha1"
)

func Install(scheme *runtime.Scheme) {
	utilruntime.Must(history.AddToScheme(scheme))
	utilruntime.Must(v1alpha1.AddToScheme(scheme))
	utilruntime.Must(scheme.SetVersionPriority(v1alpha1.SchemeGroupVersion))
}
