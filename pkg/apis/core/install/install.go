// Package install registers the core group (internal Event and core/v1) into a scheme.
package install

import (
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"

	"github.com/eventapiserver/event-apiserver/pkg/apis/core"
	corev1 "github.com/eventapiserver/event-apiserver/pkg/apis/core/v1"
)

func Install(scheme *runtime.Scheme) {
	utilruntime.Must(core.AddToScheme(scheme))
	utilruntime.Must(corev1.AddToScheme(scheme))
	utilruntime.Must(scheme.SetVersionPriority(corev1.SchemeGroupVersion))
}
