package compat

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/diff"
	"k8s.io/client-go/kubernetes"

	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// TestMatchesKubeAPIServer writes the same Events to our server and to
// kube-apiserver v1.36.3 and compares what clients see: discovery entries,
// the Events as JSON through both APIs, server-side tables, kubectl's
// output, the kinds in the OpenAPI documents and the answers to a sequence
// of requests (requestSequence). It skips when _output/bin/kube-apiserver
// has not been built.
func TestMatchesKubeAPIServer(t *testing.T) {
	t.Parallel()
	kube := framework.StartKubeAPIServer(t, framework.KubeAPIServerOptions{})
	server := framework.StartServer(t, framework.ServerOptions{})
	ours := framework.AdminRawClient(t, server)
	theirs := framework.NewRawClient(t, kube.RestConfig(), kube.AdminToken)
	ctx := context.Background()
	// Namespaces of our own, so that nothing kube-apiserver records
	// itself shows up in the lists compared below.
	const ns, sequenceNS = "compat", "compat-sequence"
	for _, name := range []string{ns, sequenceNS} {
		if _, err := kube.Client(t).CoreV1().Namespaces().Create(ctx,
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	// The same objects, timestamps included, to both servers.
	core := framework.FullCoreEvent(ns, "compat-core")
	oldCore := framework.FullCoreEvent(ns, "compat-old-core")
	oldCore.EventTime, oldCore.Series, oldCore.Action, oldCore.Related = metav1.MicroTime{}, nil, "", nil
	oldCore.ReportingController, oldCore.ReportingInstance = "", ""
	events := framework.FullEventsV1Event(ns, "compat-events")
	singleton := framework.FullEventsV1Event(ns, "compat-singleton")
	singleton.Series, singleton.Related = nil, nil
	for who, c := range map[string]kubernetes.Interface{"event-apiserver": server.Client(t), "kube-apiserver": kube.Client(t)} {
		for _, e := range []*corev1.Event{core, oldCore} {
			if _, err := c.CoreV1().Events(ns).Create(ctx, e, metav1.CreateOptions{}); err != nil {
				t.Fatalf("creating %s on %s: %v", e.Name, who, err)
			}
		}
		for _, e := range []*eventsv1.Event{events, singleton} {
			if _, err := c.EventsV1().Events(ns).Create(ctx, e, metav1.CreateOptions{}); err != nil {
				t.Fatalf("creating %s on %s: %v", e.Name, who, err)
			}
		}
	}

	t.Run("discovery", func(t *testing.T) {
		for _, path := range []string{"/api/v1", "/apis/events.k8s.io/v1"} {
			var o, k metav1.APIResourceList
			framework.DecodeJSON(t, mustGet(t, ours, path, ""), &o)
			framework.DecodeJSON(t, mustGet(t, theirs, path, ""), &k)
			oe, ke := findResource(o.APIResources, "events"), findResource(k.APIResources, "events")
			if oe == nil || ke == nil {
				t.Fatalf("%s: events missing (ours %v, kube %v)", path, oe != nil, ke != nil)
			}
			if !apiequality.Semantic.DeepEqual(oe, ke) {
				t.Errorf("%s: events entry differs (-kube +ours):\n%s", path, diff.Diff(ke, oe))
			}
		}
		for path, group := range map[string]string{"/api": "", "/apis": "events.k8s.io"} {
			var o, k apidiscoveryv2.APIGroupDiscoveryList
			framework.DecodeJSON(t, mustGet(t, ours, path, framework.AggregatedDiscovery), &o)
			framework.DecodeJSON(t, mustGet(t, theirs, path, framework.AggregatedDiscovery), &k)
			oe, ke := findAggregatedEvents(o, group), findAggregatedEvents(k, group)
			if oe == nil || ke == nil {
				t.Fatalf("%s aggregated: events missing (ours %v, kube %v)", path, oe != nil, ke != nil)
			}
			if !apiequality.Semantic.DeepEqual(oe, ke) {
				t.Errorf("%s aggregated: events entry differs (-kube +ours):\n%s", path, diff.Diff(ke, oe))
			}
		}
	})

	t.Run("Events as JSON through both APIs", func(t *testing.T) {
		for _, name := range []string{core.Name, oldCore.Name, events.Name, singleton.Name} {
			for _, base := range []string{"/api/v1/namespaces/" + ns + "/events", "/apis/events.k8s.io/v1/namespaces/" + ns + "/events"} {
				path := base + "/" + name
				o := normalizeObject(t, mustGet(t, ours, path, "").Body)
				k := normalizeObject(t, mustGet(t, theirs, path, "").Body)
				if !apiequality.Semantic.DeepEqual(o, k) {
					t.Errorf("GET %s differs (-kube +ours):\n%s", path, diff.Diff(k, o))
				}
			}
		}
	})

	t.Run("server-side table", func(t *testing.T) {
		for _, base := range []string{"/api/v1/namespaces/" + ns + "/events", "/apis/events.k8s.io/v1/namespaces/" + ns + "/events"} {
			var o, k metav1.Table
			framework.DecodeJSON(t, mustGet(t, ours, base, framework.TableAccept), &o)
			framework.DecodeJSON(t, mustGet(t, theirs, base, framework.TableAccept), &k)
			if !apiequality.Semantic.DeepEqual(o.ColumnDefinitions, k.ColumnDefinitions) {
				t.Errorf("%s: columns differ (-kube +ours):\n%s", base, diff.Diff(k.ColumnDefinitions, o.ColumnDefinitions))
			}
			oRows, kRows := tableRowsByName(t, &o), tableRowsByName(t, &k)
			if len(oRows) != len(kRows) {
				t.Errorf("%s: %d rows, kube-apiserver %d", base, len(oRows), len(kRows))
			}
			for name, kCells := range kRows {
				oCells, ok := oRows[name]
				if !ok {
					t.Errorf("%s: no row for %s", base, name)
					continue
				}
				// Ages (Last Seen, First Seen) move with the clock; compare
				// that both are set, and every other cell exactly.
				for _, age := range []int{0, 7} {
					if (oCells[age] == "") != (kCells[age] == "") || (oCells[age] == "<unknown>") != (kCells[age] == "<unknown>") {
						t.Errorf("%s row %s: age cell %d is %v, kube-apiserver %v", base, name, age, oCells[age], kCells[age])
					}
					oCells[age], kCells[age] = nil, nil
				}
				if !apiequality.Semantic.DeepEqual(oCells, kCells) {
					t.Errorf("%s row %s differs (-kube +ours):\n%s", base, name, diff.Diff(kCells, oCells))
				}
			}
		}
	})

	t.Run("delete answers", func(t *testing.T) {
		for _, base := range []string{"/api/v1/namespaces/" + ns + "/events", "/apis/events.k8s.io/v1/namespaces/" + ns + "/events"} {
			name := "compat-delete"
			body := framework.CoreBody(name, func(m map[string]any) {
				m["metadata"] = map[string]any{"name": name, "namespace": ns}
				m["involvedObject"] = map[string]any{"kind": "Pod", "name": "p", "namespace": ns}
			})
			var answers [2]map[string]any
			for i, c := range []*framework.RawClient{ours, theirs} {
				if r := c.Do(t, http.MethodPost, "/api/v1/namespaces/"+ns+"/events", body,
					map[string]string{"Content-Type": framework.ContentJSON}); r.Code != http.StatusCreated {
					t.Fatalf("create on %s: %d %s", c.BaseURL, r.Code, r.Body)
				}
				r := c.Do(t, http.MethodDelete, base+"/"+name, nil, nil)
				if r.Code != http.StatusOK {
					t.Fatalf("DELETE %s%s: %d %s", c.BaseURL, base, r.Code, r.Body)
				}
				answers[i] = normalizeObject(t, r.Body)
				if details, ok := answers[i]["details"].(map[string]any); ok && details["uid"] != nil {
					details["uid"] = "<set>"
				}
			}
			if !apiequality.Semantic.DeepEqual(answers[0], answers[1]) {
				t.Errorf("DELETE %s answers differ (-kube +ours):\n%s", base, diff.Diff(answers[1], answers[0]))
			}
		}
	})

	t.Run("kubectl get -o wide", func(t *testing.T) {
		for _, resource := range []string{"events", "events.events.k8s.io"} {
			o := framework.MustKubectl(t, server.Kubeconfig, "get", resource, "-n", ns, "-o", "wide")
			k := framework.MustKubectl(t, kube.KubeconfigPath, "get", resource, "-n", ns, "-o", "wide")
			oRows, kRows := framework.ParseTable(t, o), framework.ParseTable(t, k)
			if len(oRows) != len(kRows) {
				t.Fatalf("%s: %d rows, kube-apiserver %d\nours:\n%s\nkube:\n%s", resource, len(oRows), len(kRows), o, k)
			}
			for i := range kRows {
				for _, age := range []string{"LAST SEEN", "FIRST SEEN"} {
					delete(oRows[i], age)
					delete(kRows[i], age)
				}
				if !apiequality.Semantic.DeepEqual(oRows[i], kRows[i]) {
					t.Errorf("%s row %d differs:\nours: %v\nkube: %v", resource, i, oRows[i], kRows[i])
				}
			}
			framework.AssertHeaders(t, o, []string{"LAST SEEN", "TYPE", "REASON", "OBJECT", "SUBOBJECT", "SOURCE",
				"MESSAGE", "FIRST SEEN", "COUNT", "NAME"})
		}
	})

	t.Run("OpenAPI kinds", func(t *testing.T) {
		// kube-apiserver's OpenAPI aggregator merges our definitions into
		// its own; a kind on a definition that kube-apiserver has without
		// one made it panic. Definitions both documents have must carry the
		// same kinds in the group versions both serve.
		for _, path := range []string{"/openapi/v2", "/openapi/v3/api/v1", "/openapi/v3/apis/events.k8s.io/v1"} {
			o := openAPIKinds(t, mustGet(t, ours, path, ""))
			k := openAPIKinds(t, mustGet(t, theirs, path, ""))
			for name, kinds := range o {
				for _, kind := range kinds {
					if kind.Version == runtime.APIVersionInternal {
						t.Errorf("%s: %s carries the internal kind %v", path, name, kind)
					}
				}
				theirKinds, ok := k[name]
				if !ok {
					continue
				}
				if got, want := servedKinds(kinds), servedKinds(theirKinds); !apiequality.Semantic.DeepEqual(got, want) {
					t.Errorf("%s: %s's kinds differ (-kube +ours):\n%s", path, name, diff.Diff(want, got))
				}
			}
		}
	})

	t.Run("request sequence", func(t *testing.T) {
		framework.CompareRequestSequence(t, ours, theirs, sequenceNS)
	})
}

func mustGet(t *testing.T, c *framework.RawClient, path, accept string) framework.Response {
	t.Helper()
	header := map[string]string{}
	if accept != "" {
		header["Accept"] = accept
	}
	r := c.Do(t, http.MethodGet, path, nil, header)
	if r.Code != http.StatusOK {
		t.Fatalf("GET %s%s: %d %.300s", c.BaseURL, path, r.Code, r.Body)
	}
	return r
}

func findResource(list []metav1.APIResource, name string) *metav1.APIResource {
	for i := range list {
		if list[i].Name == name {
			return &list[i]
		}
	}
	return nil
}

func findAggregatedEvents(l apidiscoveryv2.APIGroupDiscoveryList, group string) *apidiscoveryv2.APIResourceDiscovery {
	for _, g := range l.Items {
		if g.Name != group {
			continue
		}
		for _, v := range g.Versions {
			if v.Version != "v1" {
				continue
			}
			for i := range v.Resources {
				if v.Resources[i].Resource == "events" {
					return &v.Resources[i]
				}
			}
		}
	}
	return nil
}

// normalizeObject decodes a JSON object and blanks what differs between
// any two servers: identity, revision, creation and managed-fields times.
func normalizeObject(t *testing.T, body []byte) map[string]any {
	t.Helper()
	var obj map[string]any
	if err := json.Unmarshal(body, &obj); err != nil {
		t.Fatalf("decoding %.300s: %v", body, err)
	}
	meta, _ := obj["metadata"].(map[string]any)
	for _, field := range []string{"uid", "resourceVersion", "creationTimestamp"} {
		if _, ok := meta[field]; ok {
			meta[field] = "<set>"
		}
	}
	if mfs, ok := meta["managedFields"].([]any); ok {
		for _, mf := range mfs {
			if m, ok := mf.(map[string]any); ok {
				m["time"] = "<set>"
			}
		}
	}
	return obj
}

// tableRowsByName keys a table's rows by their Name cell (the last one).
func tableRowsByName(t *testing.T, table *metav1.Table) map[string][]any {
	t.Helper()
	rows := map[string][]any{}
	for _, row := range table.Rows {
		if len(row.Cells) != len(table.ColumnDefinitions) {
			t.Fatalf("row has %d cells for %d columns: %v", len(row.Cells), len(table.ColumnDefinitions), row.Cells)
		}
		name, _ := row.Cells[len(row.Cells)-1].(string)
		rows[name] = row.Cells
	}
	return rows
}

// openAPIKinds maps each definition (v2) or schema (v3) of an OpenAPI
// document to its x-kubernetes-group-version-kind list.
func openAPIKinds(t *testing.T, r framework.Response) map[string][]metav1.GroupVersionKind {
	t.Helper()
	type definition struct {
		Kinds []metav1.GroupVersionKind `json:"x-kubernetes-group-version-kind"`
	}
	var doc struct {
		Definitions map[string]definition `json:"definitions"`
		Components  struct {
			Schemas map[string]definition `json:"schemas"`
		} `json:"components"`
	}
	framework.DecodeJSON(t, r, &doc)
	kinds := map[string][]metav1.GroupVersionKind{}
	for _, defs := range []map[string]definition{doc.Definitions, doc.Components.Schemas} {
		for name, d := range defs {
			kinds[name] = d.Kinds
		}
	}
	if len(kinds) == 0 {
		t.Fatalf("no definitions in %.300s", r.Body)
	}
	return kinds
}

// servedKinds keeps the kinds of the group versions both servers serve
// (kube-apiserver's scheme also knows events.k8s.io/v1beta1).
func servedKinds(kinds []metav1.GroupVersionKind) []metav1.GroupVersionKind {
	var served []metav1.GroupVersionKind
	for _, k := range kinds {
		if k.Version == "v1" && (k.Group == "" || k.Group == "events.k8s.io") {
			served = append(served, k)
		}
	}
	return served
}
