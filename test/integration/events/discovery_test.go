package events

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/version"

	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// eventVerbs are the verbs kube-apiserver lists for events in both groups.
var eventVerbs = []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}

// TestDiscoveryAndEndpoints asks the admin's questions of every discovery,
// OpenAPI, health, metrics and version endpoint: each answers 200 with what
// kubectl and client-go need to find the two Event resources, and nothing
// else is served.
func TestDiscoveryAndEndpoints(t *testing.T) {
	t.Parallel()
	server := framework.StartServer(t, framework.ServerOptions{})
	client := framework.AdminRawClient(t, server)

	tests := []struct {
		path   string
		accept string
		check  func(t *testing.T, r framework.Response)
	}{
		{
			path: "/api",
			check: func(t *testing.T, r framework.Response) {
				var v metav1.APIVersions
				framework.DecodeJSON(t, r, &v)
				if fmt.Sprint(v.Versions) != "[v1]" {
					t.Errorf("versions %v, want [v1]", v.Versions)
				}
			},
		},
		{
			path: "/api/v1",
			check: func(t *testing.T, r framework.Response) {
				assertOnlyEvents(t, r, "v1")
			},
		},
		{
			path: "/apis",
			check: func(t *testing.T, r framework.Response) {
				var l metav1.APIGroupList
				framework.DecodeJSON(t, r, &l)
				// Our own history group follows the Events group.
				if len(l.Groups) != 2 || l.Groups[0].Name != "events.k8s.io" ||
					l.Groups[0].PreferredVersion.GroupVersion != "events.k8s.io/v1" || len(l.Groups[0].Versions) != 1 ||
					l.Groups[1].PreferredVersion.GroupVersion != "history.eventapiserver.io/v1alpha1" {
					t.Errorf("groups %+v, want events.k8s.io with v1, then history.eventapiserver.io", l.Groups)
				}
			},
		},
		{
			path: "/apis/events.k8s.io",
			check: func(t *testing.T, r framework.Response) {
				var g metav1.APIGroup
				framework.DecodeJSON(t, r, &g)
				if g.Name != "events.k8s.io" || g.PreferredVersion.Version != "v1" {
					t.Errorf("group %+v, want events.k8s.io preferring v1", g)
				}
			},
		},
		{
			path: "/apis/events.k8s.io/v1",
			check: func(t *testing.T, r framework.Response) {
				assertOnlyEvents(t, r, "events.k8s.io/v1")
			},
		},
		{
			path:   "/api",
			accept: framework.AggregatedDiscovery,
			check: func(t *testing.T, r framework.Response) {
				assertAggregatedEvents(t, r, "")
			},
		},
		{
			path:   "/apis",
			accept: framework.AggregatedDiscovery,
			check: func(t *testing.T, r framework.Response) {
				assertAggregatedEvents(t, r, "events.k8s.io")
			},
		},
		{
			path: "/openapi/v2",
			check: func(t *testing.T, r framework.Response) {
				var doc struct {
					Swagger     string                     `json:"swagger"`
					Paths       map[string]json.RawMessage `json:"paths"`
					Definitions map[string]json.RawMessage `json:"definitions"`
				}
				framework.DecodeJSON(t, r, &doc)
				if doc.Swagger != "2.0" {
					t.Errorf("swagger %q, want 2.0", doc.Swagger)
				}
				for _, p := range []string{"/api/v1/namespaces/{namespace}/events", "/apis/events.k8s.io/v1/namespaces/{namespace}/events/{name}"} {
					if _, ok := doc.Paths[p]; !ok {
						t.Errorf("no path %s", p)
					}
				}
				for _, d := range []string{"io.k8s.api.core.v1.Event", "io.k8s.api.events.v1.Event", "io.k8s.api.events.v1.EventSeries"} {
					if _, ok := doc.Definitions[d]; !ok {
						t.Errorf("no definition %s", d)
					}
				}
			},
		},
		{
			path: "/openapi/v3",
			check: func(t *testing.T, r framework.Response) {
				var index struct {
					Paths map[string]struct {
						ServerRelativeURL string `json:"serverRelativeURL"`
					} `json:"paths"`
				}
				framework.DecodeJSON(t, r, &index)
				for gv, schema := range map[string]string{
					"api/v1":                "io.k8s.api.core.v1.Event",
					"apis/events.k8s.io/v1": "io.k8s.api.events.v1.Event",
				} {
					entry, ok := index.Paths[gv]
					if !ok {
						t.Errorf("/openapi/v3 lists no %s: %v", gv, index.Paths)
						continue
					}
					doc := client.Do(t, http.MethodGet, entry.ServerRelativeURL, nil, nil)
					if doc.Code != http.StatusOK {
						t.Errorf("GET %s: %d", entry.ServerRelativeURL, doc.Code)
						continue
					}
					var v3 struct {
						OpenAPI    string `json:"openapi"`
						Components struct {
							Schemas map[string]json.RawMessage `json:"schemas"`
						} `json:"components"`
					}
					framework.DecodeJSON(t, doc, &v3)
					if !strings.HasPrefix(v3.OpenAPI, "3.") {
						t.Errorf("%s: openapi %q, want 3.x", gv, v3.OpenAPI)
					}
					if _, ok := v3.Components.Schemas[schema]; !ok {
						t.Errorf("%s: no schema %s", gv, schema)
					}
				}
			},
		},
		{path: "/healthz", check: bodyIs("ok")},
		{path: "/livez", check: bodyIs("ok")},
		{path: "/readyz", check: bodyIs("ok")},
		{path: "/healthz/etcd", check: bodyIs("ok")},
		{path: "/readyz/etcd", check: bodyIs("ok")},
		{
			path: "/metrics",
			check: func(t *testing.T, r framework.Response) {
				for _, metric := range []string{"apiserver_request_total", "etcd_request_duration_seconds", "apiserver_storage_objects"} {
					if !strings.Contains(string(r.Body), metric) {
						t.Errorf("/metrics lacks %s", metric)
					}
				}
			},
		},
		{
			path: "/version",
			check: func(t *testing.T, r framework.Response) {
				var v version.Info
				framework.DecodeJSON(t, r, &v)
				if v.GitVersion == "" || v.Major == "" || v.Minor == "" {
					t.Errorf("version %+v lacks gitVersion, major or minor", v)
				}
			},
		},
	}
	for _, tc := range tests {
		name := strings.TrimPrefix(tc.path, "/")
		if tc.accept != "" {
			name += " aggregated"
		}
		t.Run(name, func(t *testing.T) {
			header := map[string]string{}
			if tc.accept != "" {
				header["Accept"] = tc.accept
			}
			r := client.Do(t, http.MethodGet, tc.path, nil, header)
			if r.Code != http.StatusOK {
				t.Fatalf("GET %s: %d, want 200: %.300s", tc.path, r.Code, r.Body)
			}
			tc.check(t, r)
		})
	}
}

func bodyIs(want string) func(t *testing.T, r framework.Response) {
	return func(t *testing.T, r framework.Response) {
		if got := strings.TrimSpace(string(r.Body)); got != want {
			t.Errorf("body %q, want %q", got, want)
		}
	}
}

// assertOnlyEvents checks an APIResourceList: events and nothing else.
func assertOnlyEvents(t *testing.T, r framework.Response, groupVersion string) {
	t.Helper()
	var l metav1.APIResourceList
	framework.DecodeJSON(t, r, &l)
	if l.GroupVersion != groupVersion {
		t.Errorf("groupVersion %q, want %q", l.GroupVersion, groupVersion)
	}
	if len(l.APIResources) != 1 {
		t.Fatalf("resources %+v, want only events", l.APIResources)
	}
	res := l.APIResources[0]
	verbs := append([]string(nil), res.Verbs...)
	sort.Strings(verbs)
	if res.Name != "events" || res.SingularName != "event" || !res.Namespaced || res.Kind != "Event" ||
		fmt.Sprint(res.ShortNames) != "[ev]" || fmt.Sprint(verbs) != fmt.Sprint(eventVerbs) || res.StorageVersionHash == "" {
		t.Errorf("resource %+v, want namespaced events (Event, short name ev, verbs %v, a storage version hash)", res, eventVerbs)
	}
}

// assertAggregatedEvents checks an aggregated discovery document: one group
// (the core group has no name) with v1 serving only events.
func assertAggregatedEvents(t *testing.T, r framework.Response, group string) {
	t.Helper()
	if !strings.Contains(r.ContentType, "as=APIGroupDiscoveryList") {
		t.Errorf("Content-Type %q, want aggregated discovery", r.ContentType)
	}
	var l apidiscoveryv2.APIGroupDiscoveryList
	framework.DecodeJSON(t, r, &l)
	want := []string{group}
	if group != "" {
		// Our own history group follows the Events group.
		want = append(want, "history.eventapiserver.io")
	}
	var names []string
	for _, item := range l.Items {
		names = append(names, item.Name)
	}
	if fmt.Sprint(names) != fmt.Sprint(want) || len(l.Items[0].Versions) != 1 {
		t.Fatalf("groups %+v, want %q, the first with one version", l.Items, want)
	}
	v := l.Items[0].Versions[0]
	if v.Version != "v1" || len(v.Resources) != 1 || v.Freshness != apidiscoveryv2.DiscoveryFreshnessCurrent {
		t.Fatalf("version %+v, want v1 with only events, fresh", v)
	}
	res := v.Resources[0]
	if res.Resource != "events" || res.SingularResource != "event" || res.Scope != apidiscoveryv2.ScopeNamespace ||
		res.ResponseKind == nil || res.ResponseKind.Kind != "Event" ||
		fmt.Sprint(res.ShortNames) != "[ev]" || fmt.Sprint(res.Verbs) != fmt.Sprint(eventVerbs) {
		t.Errorf("resource %+v, want namespaced events", res)
	}
}
