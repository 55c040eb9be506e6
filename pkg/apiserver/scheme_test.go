package apiserver

import (
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/kube-openapi/pkg/validation/spec"

	generatedopenapi "github.com/eventapiserver/event-apiserver/pkg/generated/openapi"
)

// The OpenAPI definition namer tags each definition with the kinds whose Go
// type the scheme names after it. An internal type of ours named after a
// served definition (a type that embeds ObjectMeta alone inherits its
// OpenAPIModelName) puts __internal kinds on that definition, which
// kube-apiserver's OpenAPI aggregator cannot merge: it panicked on
// ObjectMeta's.
func TestInternalKindsNameNoServedDefinition(t *testing.T) {
	definitions := generatedopenapi.GetOpenAPIDefinitions(func(string) spec.Ref { return spec.Ref{} })
	ours := reflect.TypeOf(Config{}).PkgPath()
	ours = ours[:strings.Index(ours, "/pkg/")]
	for gvk, goType := range Scheme.AllKnownTypes() {
		if gvk.Version != runtime.APIVersionInternal || !strings.HasPrefix(goType.PkgPath(), ours+"/") {
			continue
		}
		name, err := Scheme.ToOpenAPIDefinitionName(gvk)
		if err != nil {
			t.Errorf("%v: %v", gvk, err)
			continue
		}
		if _, served := definitions[name]; served {
			t.Errorf("internal kind %v (%s) is named %s, a served definition", gvk, goType, name)
		}
	}
}
