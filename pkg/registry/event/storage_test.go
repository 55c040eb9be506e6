package event

import (
	"context"
	"testing"

	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	"k8s.io/apimachinery/pkg/fields"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
)

// TestWithSelectedNamespace pins when a list across namespaces is read as a
// list of one: only for a valid namespace name, as the Store's
// ListPredicate narrows. An invalid one used to become the storage key and
// answer 500.
func TestWithSelectedNamespace(t *testing.T) {
	for _, tc := range []struct {
		name, requestNamespace, selector, want string
	}{
		{name: "valid name narrows", selector: "metadata.namespace=kube-system", want: "kube-system"},
		{name: "dot-dot does not narrow", selector: "metadata.namespace=..", want: ""},
		{name: "slash does not narrow", selector: "metadata.namespace=a/b", want: ""},
		{name: "upper case does not narrow", selector: "metadata.namespace=Default", want: ""},
		{name: "too long does not narrow", selector: "metadata.namespace=" + longName, want: ""},
		{name: "inequality does not narrow", selector: "metadata.namespace!=default", want: ""},
		{name: "request namespace wins", requestNamespace: "default", selector: "metadata.namespace=..", want: "default"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := genericapirequest.WithNamespace(context.Background(), tc.requestNamespace)
			selector, err := fields.ParseSelector(tc.selector)
			if err != nil {
				t.Fatal(err)
			}
			ctx = withSelectedNamespace(ctx, &metainternalversion.ListOptions{FieldSelector: selector})
			if got, _ := genericapirequest.NamespaceFrom(ctx); got != tc.want {
				t.Errorf("namespace %q, want %q", got, tc.want)
			}
		})
	}
}

// longName is one character over a DNS label's 63.
const longName = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
