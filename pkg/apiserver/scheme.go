package apiserver

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"

	coreinstall "github.com/eventapiserver/event-apiserver/pkg/apis/core/install"
	eventsinstall "github.com/eventapiserver/event-apiserver/pkg/apis/events/install"
	historyinstall "github.com/eventapiserver/event-apiserver/pkg/apis/history/install"
	"github.com/eventapiserver/event-apiserver/pkg/fieldselectors"
)

var (
	// Scheme knows the internal Event and both served versions, history's
	// EventRecord, and every other kind kube-apiserver's scheme knows, so
	// that a body of another kind is refused as kube-apiserver refuses it
	// (kinds.go). Core is installed first so that the internal Event's first
	// kind is core's, which is the kind kube-apiserver names in Invalid
	// errors for both groups.
	Scheme = runtime.NewScheme()
	Codecs = serializer.NewCodecFactory(Scheme)
)

func init() {
	coreinstall.Install(Scheme)
	eventsinstall.Install(Scheme)
	historyinstall.Install(Scheme)
	utilruntime.Must(fieldselectors.AddFieldLabelConversions(Scheme))
	utilruntime.Must(addKubeKinds(Scheme))

	// The meta types every API server needs for list options, status and discovery.
	metav1.AddToGroupVersion(Scheme, schema.GroupVersion{Version: "v1"})
	unversioned := schema.GroupVersion{Group: "", Version: "v1"}
	Scheme.AddUnversionedTypes(unversioned,
		&metav1.Status{},
		&metav1.APIVersions{},
		&metav1.APIGroupList{},
		&metav1.APIGroup{},
		&metav1.APIResourceList{},
	)
}
