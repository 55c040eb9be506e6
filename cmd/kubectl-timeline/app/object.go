package app

import (
	"fmt"
	"strings"
	"unicode"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// Object is the kind and name Events name the object by
// (involvedObject / regarding). No uid: the timeline is about every object
// that bore the name. Group is the kind's API group, which Events do not
// select by; the page uses it to ask the cluster which of those objects
// still exist.
type Object struct {
	Kind  string
	Name  string
	Group string
}

func (o Object) String() string { return o.Kind + "/" + o.Name }

// ResolveObject reads TYPE/NAME (or TYPE NAME) as kubectl does: TYPE is a
// resource, singular or plural, short name, or Kind, optionally qualified
// by its group (deployments.apps/web). The server's discovery answers
// first; against a server that serves only Events (event-apiserver alone)
// it knows no pods, so the kinds client-go knows answer next, and a TYPE
// spelled as a Kind (Widget/x) is taken as it is, for kinds neither knows.
func ResolveObject(mapper meta.RESTMapper, args []string) (Object, error) {
	var resource, name string
	switch {
	case len(args) == 1 && strings.Count(args[0], "/") == 1:
		resource, name, _ = strings.Cut(args[0], "/")
	case len(args) == 2 && !strings.Contains(args[0], "/"):
		resource, name = args[0], args[1]
	default:
		return Object{}, fmt.Errorf("want one object as TYPE/NAME (e.g. pod/web-0), got %q", strings.Join(args, " "))
	}
	if resource == "" || name == "" {
		return Object{}, fmt.Errorf("want one object as TYPE/NAME (e.g. pod/web-0), got %q", strings.Join(args, " "))
	}
	if gk, ok := kindFromMapper(mapper, resource); ok {
		return Object{Kind: gk.Kind, Name: name, Group: gk.Group}, nil
	}
	if gk, ok := builtinKind(resource); ok {
		return Object{Kind: gk.Kind, Name: name, Group: gk.Group}, nil
	}
	if unicode.IsUpper([]rune(resource)[0]) && !strings.Contains(resource, ".") {
		return Object{Kind: resource, Name: name}, nil
	}
	return Object{}, fmt.Errorf("the server doesn't have a resource type %q, and it is no kind kubectl knows: give the kind as Events name it (e.g. Widget/%s)", resource, name)
}

// kindFromMapper asks discovery, as kubectl events --for does
// (decodeResourceTypeName).
func kindFromMapper(mapper meta.RESTMapper, resource string) (schema.GroupKind, bool) {
	if mapper == nil {
		return schema.GroupKind{}, false
	}
	fullySpecified, groupResource := schema.ParseResourceArg(strings.ToLower(resource))
	gvr := schema.GroupVersionResource{}
	if fullySpecified != nil {
		gvr, _ = mapper.ResourceFor(*fullySpecified)
	}
	if gvr.Empty() {
		var err error
		if gvr, err = mapper.ResourceFor(groupResource.WithVersion("")); err != nil {
			return schema.GroupKind{}, false
		}
	}
	gvk, err := mapper.KindFor(gvr)
	if err != nil {
		return schema.GroupKind{}, false
	}
	return gvk.GroupKind(), true
}

// shortNames are kube-apiserver's short names of the built-in resources
// whose Events people look for, which discovery gives where pods are
// served and nothing gives where they are not.
var shortNames = map[string]string{
	"po": "pods", "no": "nodes", "ns": "namespaces", "svc": "services", "ep": "endpoints",
	"cm": "configmaps", "sa": "serviceaccounts", "pv": "persistentvolumes", "pvc": "persistentvolumeclaims",
	"rc": "replicationcontrollers", "deploy": "deployments", "rs": "replicasets", "ds": "daemonsets",
	"sts": "statefulsets", "cj": "cronjobs", "hpa": "horizontalpodautoscalers", "ing": "ingresses",
	"netpol": "networkpolicies", "pdb": "poddisruptionbudgets", "sc": "storageclasses",
}

// builtinKind finds the kind among those client-go's scheme knows: a kind
// with a list kind is a resource, named by its lower-case kind or its
// plural (meta.UnsafeGuessKindToResource, as kube-apiserver names them).
func builtinKind(resource string) (schema.GroupKind, bool) {
	_, groupResource := schema.ParseResourceArg(strings.ToLower(resource))
	want := groupResource.Resource
	if full, ok := shortNames[want]; ok {
		want = full
	}
	hasGroup := strings.Contains(resource, ".")
	known := clientgoscheme.Scheme.AllKnownTypes()
	for gvk := range known {
		if strings.HasSuffix(gvk.Kind, "List") {
			continue
		}
		if _, ok := known[gvk.GroupVersion().WithKind(gvk.Kind+"List")]; !ok {
			continue
		}
		if hasGroup && gvk.Group != groupResource.Group {
			continue
		}
		plural, singular := meta.UnsafeGuessKindToResource(gvk)
		if want == plural.Resource || want == singular.Resource {
			return gvk.GroupKind(), true
		}
	}
	return schema.GroupKind{}, false
}
