package compat

import (
	"encoding/json"
	"net/http"
	"net/url"
	"testing"

	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// TestNamespaceSelectorMatchesKubeAPIServer lists Events across namespaces
// with a metadata.namespace field selector whose value is not a namespace
// name. kube-apiserver filters by it and finds nothing (200, no items); we
// used to turn it into a storage key and answer 500. A valid name still
// narrows and finds the Event. The comparison with kube-apiserver skips
// when _output/bin/kube-apiserver has not been built.
func TestNamespaceSelectorMatchesKubeAPIServer(t *testing.T) {
	t.Parallel()
	server := framework.StartServer(t, framework.ServerOptions{})
	ours := framework.AdminRawClient(t, server)
	create := framework.Request{Method: http.MethodPost, Path: framework.CoreEventsPath, ContentType: framework.ContentJSON, Body: framework.CoreBody("ns-selector", nil)}

	cases := []struct {
		name, selector string
		wantItems      int
	}{
		{name: "dot-dot", selector: "metadata.namespace=..", wantItems: 0},
		{name: "slash", selector: "metadata.namespace=a/b", wantItems: 0},
		{name: "upper case", selector: "metadata.namespace=Default", wantItems: 0},
		{name: "with another field", selector: "metadata.namespace=..,reason=Started", wantItems: 0},
		{name: "valid name", selector: "metadata.namespace=default", wantItems: 1},
	}
	paths := []string{"/api/v1/events", "/apis/events.k8s.io/v1/events"}
	list := func(t *testing.T, c *framework.RawClient, path, selector string) (int, int) {
		t.Helper()
		r := c.Do(t, http.MethodGet, path+"?fieldSelector="+url.QueryEscape(selector), nil, nil)
		if r.Code != http.StatusOK {
			return r.Code, -1
		}
		var items struct {
			Items []json.RawMessage `json:"items"`
		}
		if err := json.Unmarshal(r.Body, &items); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		return r.Code, len(items.Items)
	}

	if r := ours.Send(t, create); r.Code != http.StatusCreated {
		t.Fatalf("create: %d %s", r.Code, r.Body)
	}
	for _, tc := range cases {
		for _, path := range paths {
			if code, n := list(t, ours, path, tc.selector); code != http.StatusOK || n != tc.wantItems {
				t.Errorf("%s %s %q: %d with %d items, want 200 with %d", tc.name, path, tc.selector, code, n, tc.wantItems)
			}
		}
	}

	kube := framework.StartKubeAPIServer(t, framework.KubeAPIServerOptions{})
	theirs := framework.NewRawClient(t, kube.RestConfig(), kube.AdminToken)
	if r := theirs.Send(t, create); r.Code != http.StatusCreated {
		t.Fatalf("create on kube-apiserver: %d %s", r.Code, r.Body)
	}
	for _, tc := range cases {
		for _, path := range paths {
			// kube-apiserver records Events of its own in default; only
			// the answer's code and emptiness are compared.
			oc, on := list(t, ours, path, tc.selector)
			kc, kn := list(t, theirs, path, tc.selector)
			if oc != kc || (on == 0) != (kn == 0) {
				t.Errorf("%s %s %q: ours %d with %d items, kube-apiserver %d with %d", tc.name, path, tc.selector, oc, on, kc, kn)
			}
		}
	}
}
