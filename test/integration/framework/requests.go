package framework

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/diff"
	"sigs.k8s.io/yaml"
)

// sequenceRequest is one step of a request sequence sent to both servers.
type sequenceRequest struct {
	method, path, contentType, accept, body string
}

const (
	acceptPartial    = "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io"
	acceptPartialLst = "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"
)

// requestSequence is what clients other than recorders do with Events:
// dry runs, server-side apply and its conflicts, every patch type,
// preconditions, finalizers, metadata-only reads, YAML, field validation
// warnings and watches. The steps depend on each other (a patch sees what
// the earlier steps left), so they run in order, each on both servers.
//
// Left out because they differ by design, not by accident: lists with
// resourceVersion=0 (served from the watch cache, which ignores limit, as
// kube-apiserver does for every cached resource), resourceVersions ahead of
// the store (the cache waits and answers retryAfterSeconds=1, etcd answers at
// once), and namespaces that do not exist (standalone has no namespaces).
func requestSequence(ns string) []sequenceRequest {
	core := "/api/v1/namespaces/" + ns + "/events"
	events := "/apis/events.k8s.io/v1/namespaces/" + ns + "/events"
	coreEvent := func(name, metadata string) string {
		return `{"apiVersion":"v1","kind":"Event","metadata":{"name":"` + name + `"` + metadata + `},` +
			`"involvedObject":{"kind":"Pod","name":"p","namespace":"` + ns + `","apiVersion":"v1"},` +
			`"reason":"Tested","message":"m","source":{"component":"c"},` +
			`"firstTimestamp":"2024-05-01T10:00:00Z","lastTimestamp":"2024-05-01T10:00:00Z","count":1,"type":"Normal"}`
	}
	eventsEvent := func(name string) string {
		return `{"apiVersion":"events.k8s.io/v1","kind":"Event","metadata":{"name":"` + name + `"},` +
			`"eventTime":"2024-05-01T10:00:00.000000Z","reportingController":"example.com/c","reportingInstance":"i",` +
			`"action":"A","reason":"R","regarding":{"kind":"Pod","name":"p","namespace":"` + ns + `","apiVersion":"v1"},` +
			`"note":"n","type":"Normal"}`
	}
	return []sequenceRequest{
		// Writes through core/v1, with and without dryRun.
		{method: "POST", path: core, contentType: ContentJSON, body: coreEvent("seq-a", `,"labels":{"a":"b"}`)},
		{method: "POST", path: core + "?dryRun=All", contentType: ContentJSON, body: coreEvent("seq-dry", "")},
		{method: "GET", path: core + "/seq-dry"},
		{method: "PUT", path: core + "/seq-put", contentType: ContentJSON, body: coreEvent("seq-put", "")},
		{method: "PUT", path: core + "/seq-a", contentType: ContentJSON, body: coreEvent("seq-a", `,"resourceVersion":"1"`)},
		{method: "PUT", path: core + "/seq-other", contentType: ContentJSON, body: coreEvent("seq-mismatch", "")},
		{method: "POST", path: core + "/seq-a", contentType: ContentJSON, body: coreEvent("seq-a", "")},
		// Every patch type, a failing JSON patch test and a patch of nothing.
		{method: "PATCH", path: core + "/seq-a", contentType: ContentMerge, body: `{"count":2}`},
		{method: "PATCH", path: core + "/seq-a", contentType: ContentJSONPatch, body: `[{"op":"replace","path":"/count","value":3}]`},
		{method: "PATCH", path: core + "/seq-a", contentType: ContentJSONPatch, body: `[{"op":"test","path":"/count","value":9}]`},
		{method: "PATCH", path: core + "/seq-a", contentType: ContentStrategic, body: `{"count":4,"lastTimestamp":"2024-05-01T11:00:00Z"}`},
		{method: "PATCH", path: core + "/seq-a?dryRun=All", contentType: ContentMerge, body: `{"count":40}`},
		{method: "PATCH", path: core + "/seq-missing", contentType: ContentMerge, body: `{"count":2}`},
		// Server-side apply: create, no field manager, a conflict, forced.
		{method: "PATCH", path: core + "/seq-apply?fieldManager=first", contentType: ContentApply, body: coreEvent("seq-apply", "")},
		{method: "PATCH", path: core + "/seq-apply", contentType: ContentApply, body: coreEvent("seq-apply", "")},
		{method: "PATCH", path: core + "/seq-apply?fieldManager=second", contentType: ContentApply,
			body: strings.Replace(coreEvent("seq-apply", ""), `"m"`, `"changed"`, 1)},
		{method: "PATCH", path: core + "/seq-apply?fieldManager=second&force=true", contentType: ContentApply,
			body: strings.Replace(coreEvent("seq-apply", ""), `"m"`, `"changed"`, 1)},
		{method: "GET", path: core + "/seq-apply"},
		// Metadata-only reads, YAML both ways, tables with their objects.
		{method: "GET", path: core + "/seq-a", accept: acceptPartial},
		{method: "GET", path: core, accept: acceptPartialLst},
		{method: "GET", path: core + "/seq-a", accept: "application/yaml"},
		{method: "POST", path: core, contentType: "application/yaml",
			body: "apiVersion: v1\nkind: Event\nmetadata:\n  name: seq-yaml\ninvolvedObject:\n  kind: Pod\n  name: p\n  namespace: " + ns + "\nreason: R\nmessage: m\n"},
		{method: "GET", path: core + "?includeObject=Object", accept: TableAccept},
		{method: "GET", path: core + "?includeObject=None", accept: TableAccept},
		// Field validation: warnings by default and with Warn, duplicate fields.
		{method: "POST", path: core + "?fieldValidation=Warn", contentType: ContentJSON, body: coreEvent("seq-warn", `,"bogus":1`)},
		{method: "POST", path: core, contentType: ContentJSON,
			body: strings.Replace(coreEvent("seq-dup", ""), `"reason":"Tested"`, `"reason":"Tested","reason":"Dup","nope":2`, 1)},
		{method: "POST", path: core + "?fieldValidation=Strict", contentType: ContentJSON,
			body: strings.Replace(coreEvent("seq-strict", ""), `"reason":"Tested"`, `"reason":"Tested","reason":"Dup"`, 1)},
		{method: "POST", path: core, contentType: ContentJSON, body: coreEvent("seq-owners",
			`,"ownerReferences":[{"apiVersion":"v1","kind":"Pod","name":"p","uid":"u1"},{"apiVersion":"v1","kind":"Pod","name":"p","uid":"u1"}]`)},
		// A finalizer holds a deleted Event until a patch removes it.
		{method: "POST", path: core, contentType: ContentJSON, body: coreEvent("seq-final", `,"finalizers":["example.com/f"]`)},
		{method: "DELETE", path: core + "/seq-final"},
		{method: "GET", path: core + "/seq-final"},
		{method: "PATCH", path: core + "/seq-final", contentType: ContentJSONPatch, body: `[{"op":"remove","path":"/metadata/finalizers"}]`},
		{method: "GET", path: core + "/seq-final"},
		// Deletes with preconditions and dryRun, and collections by selector.
		{method: "DELETE", path: core + "/seq-a", contentType: ContentJSON, body: `{"preconditions":{"uid":"nope"}}`},
		{method: "DELETE", path: core + "/seq-a", contentType: ContentJSON, body: `{"preconditions":{"resourceVersion":"1"}}`},
		{method: "DELETE", path: core + "/seq-a?dryRun=All"},
		{method: "GET", path: core + "?labelSelector=a+in+(b,c)"},
		{method: "GET", path: core + "?labelSelector=!a&limit=2"},
		{method: "GET", path: core + "?fieldSelector=reason%3DTested,involvedObject.name%3Dp"},
		{method: "DELETE", path: core + "?fieldSelector=reason%3DR&dryRun=All"},
		{method: "DELETE", path: core + "?fieldSelector=reason%3DR"},
		{method: "GET", path: core + "/seq-a/status"},
		// events.k8s.io/v1: update, strategic merge, apply with a series,
		// Foreground and grace periods, a core/v1 Event read through it.
		{method: "POST", path: events, contentType: ContentJSON, body: eventsEvent("seq-v")},
		{method: "PUT", path: events + "/seq-v", contentType: ContentJSON, body: eventsEvent("seq-v")},
		{method: "PATCH", path: events + "/seq-v", contentType: ContentStrategic, body: `{"note":"n2"}`},
		{method: "PATCH", path: events + "/seq-v", contentType: ContentMerge,
			body: `{"series":{"count":5,"lastObservedTime":"2024-05-01T12:00:00.000000Z"}}`},
		{method: "PATCH", path: events + "/seq-s?fieldManager=m", contentType: ContentApply, body: eventsEvent("seq-s")},
		{method: "PATCH", path: events + "/seq-s?fieldManager=m", contentType: ContentApply,
			body: strings.Replace(eventsEvent("seq-s"), `"note":"n"`, `"series":{"count":3,"lastObservedTime":"2024-05-01T10:05:00.000000Z"}`, 1)},
		{method: "GET", path: events, accept: TableAccept},
		{method: "GET", path: events + "/seq-a", accept: "application/yaml"},
		{method: "DELETE", path: events + "/seq-v?propagationPolicy=Foreground"},
		{method: "GET", path: events + "/seq-v"},
		{method: "DELETE", path: events + "/seq-s?gracePeriodSeconds=30"},
		{method: "DELETE", path: events + "?dryRun=All"},
		// Watches: from the start, by field selector, and a watch-list.
		{method: "GET", path: events + "?watch=1&timeoutSeconds=1&resourceVersion=1"},
		{method: "GET", path: core + "?watch=1&timeoutSeconds=1&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&fieldSelector=involvedObject.name%3Dp"},
		{method: "POST", path: core, contentType: ContentJSON, body: coreEvent("", `,"generateName":"seq-gen-"`)},
		{method: "GET", path: core + "?resourceVersion=1&resourceVersionMatch=NotOlderThan"},
	}
}

// CompareRequestSequence sends requestSequence(ns) to ours and theirs (a
// cluster with event-apiserver in it, and kube-apiserver alone) and
// reports every answer that differs in code, content type, warnings or
// normalized body.
func CompareRequestSequence(t *testing.T, ours, theirs *RawClient, ns string) {
	t.Helper()
	for i, r := range requestSequence(ns) {
		header := map[string]string{}
		if r.contentType != "" {
			header["Content-Type"] = r.contentType
		}
		if r.accept != "" {
			header["Accept"] = r.accept
		}
		o := ours.Do(t, r.method, r.path, []byte(r.body), header)
		k := theirs.Do(t, r.method, r.path, []byte(r.body), header)
		step := func(format string, args ...any) {
			t.Helper()
			t.Errorf("step %d, %s %s (%s): "+format, append([]any{i, r.method, r.path, r.contentType}, args...)...)
		}
		if o.Code != k.Code {
			step("code %d, kube-apiserver %d\nours: %.500s\nkube: %.500s", o.Code, k.Code, o.Body, k.Body)
			continue
		}
		if o.ContentType != k.ContentType {
			step("content type %q, kube-apiserver %q", o.ContentType, k.ContentType)
		}
		if ow, kw := o.Header.Values("Warning"), k.Header.Values("Warning"); strings.Join(ow, "\n") != strings.Join(kw, "\n") {
			step("warnings differ:\nours: %q\nkube: %q", ow, kw)
		}
		if ob, kb := normalizeAnswer(t, o), normalizeAnswer(t, k); !reflect.DeepEqual(ob, kb) {
			step("answers differ (-kube +ours):\n%s", diff.Diff(kb, ob))
		}
	}
}

// inRecord is the revision or UID a precondition failure's message quotes.
var inRecord = regexp.MustCompile(`in record \([^)]*\)`)

// normalizeAnswer decodes a JSON or YAML answer (a watch's stream of events
// too) with what differs between any two servers blanked: identities,
// revisions, times the servers set, continue tokens and the random part of
// generated names. Other answers are compared as they are.
func normalizeAnswer(t *testing.T, r Response) []any {
	t.Helper()
	body := r.Body
	switch {
	case strings.HasPrefix(r.ContentType, "application/yaml"):
		var err error
		if body, err = yaml.YAMLToJSON(body); err != nil {
			t.Fatalf("answer is not YAML (%v): %.300s", err, r.Body)
		}
	case !strings.HasPrefix(r.ContentType, "application/json"):
		return []any{string(body)}
	}
	var values []any
	dec := json.NewDecoder(bytes.NewReader(body))
	for {
		var v any
		if err := dec.Decode(&v); errors.Is(err, io.EOF) {
			return values
		} else if err != nil {
			t.Fatalf("answer is not JSON (%v): %.300s", err, body)
		}
		blankServerFields(v, "")
		values = append(values, v)
	}
}

func blankServerFields(v any, key string) {
	switch v := v.(type) {
	case map[string]any:
		for k, child := range v {
			switch s, isString := child.(string); {
			case isString && s != "" && (k == "uid" || k == "resourceVersion" || k == "creationTimestamp" ||
				k == "deletionTimestamp" || k == "continue" || (k == "time" && key == "managedFields")):
				v[k] = "<set>"
			case isString && k == "message":
				v[k] = inRecord.ReplaceAllString(s, "in record (<set>)")
			default:
				blankServerFields(child, k)
			}
		}
		if _, generated := v["generateName"]; generated && v["name"] != nil {
			v["name"] = "<generated>"
		}
	case []any:
		for _, child := range v {
			blankServerFields(child, key)
		}
	}
}
