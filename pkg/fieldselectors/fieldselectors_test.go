package fieldselectors

import (
	"sort"
	"testing"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/eventapiserver/event-apiserver/pkg/apis/core"
	coreinstall "github.com/eventapiserver/event-apiserver/pkg/apis/core/install"
	eventsinstall "github.com/eventapiserver/event-apiserver/pkg/apis/events/install"
)

var (
	coreV1GVK   = corev1.SchemeGroupVersion.WithKind("Event")
	eventsV1GVK = eventsv1.SchemeGroupVersion.WithKind("Event")
)

func newScheme(t testing.TB) *runtime.Scheme {
	t.Helper()
	scheme := runtime.NewScheme()
	coreinstall.Install(scheme)
	eventsinstall.Install(scheme)
	if err := AddFieldLabelConversions(scheme); err != nil {
		t.Fatal(err)
	}
	return scheme
}

// convert does what the list and watch handlers do with ?fieldSelector=
// (apiserver endpoints/handlers/get.go): parse, then convert every label
// for the kind of the request.
func convert(scheme *runtime.Scheme, gvk schema.GroupVersionKind, selector string) (fields.Selector, error) {
	parsed, err := fields.ParseSelector(selector)
	if err != nil {
		return nil, err
	}
	return parsed.Transform(func(label, value string) (string, string, error) {
		return scheme.ConvertFieldLabel(gvk, label, value)
	})
}

// podEvent is a kubelet Event about a Pod with a related ReplicaSet; every
// selectable field has a value no other field has.
func podEvent() *core.Event {
	return &core.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-0.17f3a"},
		InvolvedObject: core.ObjectReference{
			Kind: "Pod", Namespace: "shop", Name: "web-0", UID: "uid-pod",
			APIVersion: "v1", ResourceVersion: "42", FieldPath: "spec.containers{app}",
		},
		Reason:  "BackOff",
		Message: "Back-off restarting failed container",
		Source:  core.EventSource{Component: "kubelet", Host: "node-1"},
		Type:    "Warning",
		Action:  "Restarting",
		Related: &core.ObjectReference{
			Kind: "ReplicaSet", Namespace: "apps", Name: "web-5d4", UID: "uid-rs",
			APIVersion: "apps/v1", FieldPath: "spec.template",
		},
		ReportingController: "kubernetes.io/kubelet",
		ReportingInstance:   "kubelet-node-1",
	}
}

// otherEvent differs from podEvent in every selectable field.
func otherEvent() *core.Event {
	return &core.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "db-1.99"},
		InvolvedObject: core.ObjectReference{
			Kind: "StatefulSet", Namespace: "default", Name: "db", UID: "uid-sts",
			APIVersion: "apps/v1", ResourceVersion: "7", FieldPath: "spec",
		},
		Reason: "SuccessfulCreate",
		Source: core.EventSource{Component: "statefulset-controller"},
		Type:   "Normal",
		Action: "Create",
		Related: &core.ObjectReference{
			Kind: "PersistentVolumeClaim", Namespace: "default", Name: "data-db-1", UID: "uid-pvc",
			APIVersion: "v1", FieldPath: "metadata",
		},
		ReportingController: "statefulset-controller",
		ReportingInstance:   "kcm-1",
	}
}

// podEventValues is, per version and label, podEvent's value; every label
// the version accepts must be here (TestEveryLabelIsTested).
var podEventValues = map[schema.GroupVersionKind]map[string]string{
	coreV1GVK: {
		"involvedObject.kind":               "Pod",
		"involvedObject.namespace":          "shop",
		"involvedObject.name":               "web-0",
		"involvedObject.uid":                "uid-pod",
		"involvedObject.apiVersion":         "v1",
		"involvedObject.resourceVersion":    "42",
		"involvedObject.fieldPath":          "spec.containers{app}",
		"reason":                            "BackOff",
		"reportingComponent":                "kubernetes.io/kubelet",
		"source":                            "kubelet",
		"type":                              "Warning",
		"metadata.namespace":                "shop",
		"metadata.name":                     "web-0.17f3a",
		"action":                            "Restarting",
		"reportingInstance":                 "kubelet-node-1",
		"related.kind":                      "ReplicaSet",
		"related.namespace":                 "apps",
		"related.name":                      "web-5d4",
		"related.uid":                       "uid-rs",
		"related.apiVersion":                "apps/v1",
		"related.fieldPath":                 "spec.template",
		"involvedObjectOrRelated.kind":      "Pod",
		"involvedObjectOrRelated.namespace": "shop",
		"involvedObjectOrRelated.name":      "web-0",
		"involvedObjectOrRelated.uid":       "uid-pod",
	},
	eventsV1GVK: {
		"reason":                       "BackOff",
		"regarding.kind":               "Pod",
		"regarding.namespace":          "shop",
		"regarding.name":               "web-0",
		"regarding.uid":                "uid-pod",
		"regarding.apiVersion":         "v1",
		"regarding.resourceVersion":    "42",
		"regarding.fieldPath":          "spec.containers{app}",
		"reportingController":          "kubernetes.io/kubelet",
		"type":                         "Warning",
		"metadata.namespace":           "shop",
		"metadata.name":                "web-0.17f3a",
		"action":                       "Restarting",
		"reportingInstance":            "kubelet-node-1",
		"related.kind":                 "ReplicaSet",
		"related.namespace":            "apps",
		"related.name":                 "web-5d4",
		"related.uid":                  "uid-rs",
		"related.apiVersion":           "apps/v1",
		"related.fieldPath":            "spec.template",
		"regardingOrRelated.kind":      "ReplicaSet",
		"regardingOrRelated.namespace": "apps",
		"regardingOrRelated.name":      "web-5d4",
		"regardingOrRelated.uid":       "uid-rs",
	},
}

func TestEveryLabelIsTested(t *testing.T) {
	for gvk, table := range map[schema.GroupVersionKind]map[string]string{coreV1GVK: coreV1Labels, eventsV1GVK: eventsV1Labels} {
		var missing, extra []string
		for label := range table {
			if _, ok := podEventValues[gvk][label]; !ok {
				missing = append(missing, label)
			}
		}
		for label := range podEventValues[gvk] {
			if _, ok := table[label]; !ok {
				extra = append(extra, label)
			}
		}
		sort.Strings(missing)
		sort.Strings(extra)
		if len(missing)+len(extra) > 0 {
			t.Errorf("%s: labels without a test value %v, test values for labels not served %v", gvk.GroupVersion(), missing, extra)
		}
	}
}

// TestEveryLabel runs each label of each version through the real conversion
// with `=`, `==` and `!=`, against podEvent (which has the value) and
// otherEvent (which does not).
func TestEveryLabel(t *testing.T) {
	scheme := newScheme(t)
	for gvk, values := range podEventValues {
		for label, value := range values {
			escaped := fields.EscapeValue(value)
			for _, tc := range []struct {
				selector string
				event    *core.Event
				want     bool
			}{
				{label + "=" + escaped, podEvent(), true},
				{label + "==" + escaped, podEvent(), true},
				{label + "=" + escaped, otherEvent(), false},
				{label + "!=" + escaped, podEvent(), false},
				{label + "!=" + escaped, otherEvent(), true},
			} {
				name := gvk.GroupVersion().String() + "/" + tc.selector + "/" + tc.event.Name
				t.Run(name, func(t *testing.T) {
					assertMatch(t, scheme, gvk, tc.selector, tc.event, tc.want)
				})
			}
		}
	}
}

func TestSelectors(t *testing.T) {
	noRelated := podEvent()
	noRelated.Related = nil
	nodeEvent := &core.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: "default", Name: "node-1.1"},
		InvolvedObject: core.ObjectReference{Kind: "Node", Name: "node-1", UID: "node-1"},
		Source:         core.EventSource{Component: "kubelet"},
	}
	newStyle := &core.Event{
		ObjectMeta:          metav1.ObjectMeta{Namespace: "shop", Name: "web-0.1"},
		InvolvedObject:      core.ObjectReference{Kind: "Pod", Name: "web-0", UID: "uid-pod"},
		ReportingController: "default-scheduler",
	}
	selfRelated := podEvent()
	selfRelated.Related = selfRelated.InvolvedObject.DeepCopy()

	tests := []struct {
		name     string
		gvk      schema.GroupVersionKind
		selector string
		event    *core.Event
		want     bool
	}{
		// kubectl describe pod (keys in any order) and kubectl events --for.
		{"describe pod", coreV1GVK, "involvedObject.name=web-0,involvedObject.namespace=shop,involvedObject.uid=uid-pod", podEvent(), true},
		{"describe pod, other uid", coreV1GVK, "involvedObject.uid=uid-old,involvedObject.name=web-0,involvedObject.namespace=shop", podEvent(), false},
		{"events --for", coreV1GVK, "involvedObject.kind=Pod,involvedObject.apiVersion=v1,involvedObject.name=web-0", podEvent(), true},
		{"events --for, other kind", coreV1GVK, "involvedObject.kind=Deployment,involvedObject.apiVersion=v1,involvedObject.name=web-0", podEvent(), false},
		{"regarding and type", eventsV1GVK, "regarding.uid=uid-pod,type=Warning", podEvent(), true},
		{"regarding and not type", eventsV1GVK, "regarding.uid=uid-pod,type!=Warning", podEvent(), false},

		// An OR label matches through either reference, and != needs both to differ.
		{"or uid via regarding", eventsV1GVK, "regardingOrRelated.uid=uid-pod", podEvent(), true},
		{"or uid via related", eventsV1GVK, "regardingOrRelated.uid=uid-rs", podEvent(), true},
		{"or uid, neither", eventsV1GVK, "regardingOrRelated.uid=uid-x", podEvent(), false},
		{"or uid != regarding", eventsV1GVK, "regardingOrRelated.uid!=uid-pod", podEvent(), false},
		{"or uid != related", eventsV1GVK, "regardingOrRelated.uid!=uid-rs", podEvent(), false},
		{"or uid != neither", eventsV1GVK, "regardingOrRelated.uid!=uid-x", podEvent(), true},
		{"or name via related, core", coreV1GVK, "involvedObjectOrRelated.name=web-5d4", podEvent(), true},
		{"or kind via related, core", coreV1GVK, "involvedObjectOrRelated.kind=ReplicaSet", podEvent(), true},
		{"or namespace via related, core", coreV1GVK, "involvedObjectOrRelated.namespace=apps", podEvent(), true},
		{"or and plain", eventsV1GVK, "regardingOrRelated.uid=uid-rs,reason=BackOff", podEvent(), true},
		{"or and failing plain", eventsV1GVK, "regardingOrRelated.uid=uid-rs,reason=Pulled", podEvent(), false},
		{"or = and != the other", eventsV1GVK, "regardingOrRelated.uid=uid-rs,regardingOrRelated.uid!=uid-pod", podEvent(), false},
		{"two ors", eventsV1GVK, "regardingOrRelated.uid=uid-pod,regardingOrRelated.name=web-5d4", podEvent(), true},
		{"or on self-related", eventsV1GVK, "regardingOrRelated.uid=uid-pod", selfRelated, true},

		// A nil Related reads as an empty ObjectReference.
		{"nil related, related.name empty", eventsV1GVK, "related.name=", noRelated, true},
		{"nil related, related.name set", eventsV1GVK, "related.name=web-5d4", noRelated, false},
		{"nil related, related.name !=", eventsV1GVK, "related.name!=web-5d4", noRelated, true},
		{"nil related, related.uid != empty", eventsV1GVK, "related.uid!=", noRelated, false},
		{"nil related, or via regarding", eventsV1GVK, "regardingOrRelated.uid=uid-pod", noRelated, true},
		{"nil related, or != other", eventsV1GVK, "regardingOrRelated.uid!=uid-rs", noRelated, true},
		{"nil related, or empty", eventsV1GVK, "regardingOrRelated.name=", noRelated, true},
		{"related set, related.name empty", eventsV1GVK, "related.name=", podEvent(), false},
		{"related set, or empty", eventsV1GVK, "regardingOrRelated.name=", podEvent(), false},

		// Empty values select absent fields, as kubectl describe node relies on.
		{"cluster-scoped object, empty namespace", coreV1GVK, "involvedObject.namespace=,involvedObject.uid=node-1,involvedObject.name=node-1", nodeEvent, true},
		{"namespaced object, empty namespace", coreV1GVK, "involvedObject.namespace=", podEvent(), false},
		{"empty action", eventsV1GVK, "action=", nodeEvent, true},

		// source falls back to the reporting controller (kube's ToSelectableFields).
		{"source from reportingController", coreV1GVK, "source=default-scheduler", newStyle, true},
		{"source prefers Source.Component", coreV1GVK, "source=kubernetes.io/kubelet", podEvent(), false},
		{"reportingController", eventsV1GVK, "reportingController=default-scheduler", newStyle, true},

		{"empty selector", eventsV1GVK, "", podEvent(), true},
	}
	scheme := newScheme(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assertMatch(t, scheme, tc.gvk, tc.selector, tc.event, tc.want)
		})
	}
}

func TestUnsupportedLabels(t *testing.T) {
	tests := []struct {
		name     string
		gvk      schema.GroupVersionKind
		selector string
		label    string
	}{
		{"core: events.k8s.io name", coreV1GVK, "regarding.name=x", "regarding.name"},
		{"core: events.k8s.io reporter", coreV1GVK, "reportingController=x", "reportingController"},
		{"core: events.k8s.io or", coreV1GVK, "regardingOrRelated.uid=x", "regardingOrRelated.uid"},
		{"core: message", coreV1GVK, "message=x", "message"},
		{"core: count", coreV1GVK, "count=1", "count"},
		{"core: related.resourceVersion", coreV1GVK, "related.resourceVersion=1", "related.resourceVersion"},
		{"events: core name", eventsV1GVK, "involvedObject.name=x", "involvedObject.name"},
		{"events: source", eventsV1GVK, "source=kubelet", "source"},
		{"events: core reporter", eventsV1GVK, "reportingComponent=x", "reportingComponent"},
		{"events: core or", eventsV1GVK, "involvedObjectOrRelated.uid=x", "involvedObjectOrRelated.uid"},
		{"events: note", eventsV1GVK, "note=x", "note"},
		{"events: deprecatedSource", eventsV1GVK, "deprecatedSource.component=x", "deprecatedSource.component"},
		{"unknown after a known one", eventsV1GVK, "type=Normal,spec.nodeName=n", "spec.nodeName"},
	}
	scheme := newScheme(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := convert(scheme, tc.gvk, tc.selector)
			want := "field label not supported: " + tc.label
			if err == nil || err.Error() != want {
				t.Fatalf("got error %v, want %q", err, want)
			}
		})
	}
}

func TestGetAttrsRejectsOtherTypes(t *testing.T) {
	if _, _, err := GetAttrs(&core.EventList{}); err == nil || err.Error() != "not an event" {
		t.Fatalf("got %v, want kube's \"not an event\"", err)
	}
}

func assertMatch(t *testing.T, scheme *runtime.Scheme, gvk schema.GroupVersionKind, selector string, event *core.Event, want bool) {
	t.Helper()
	converted, err := convert(scheme, gvk, selector)
	if err != nil {
		t.Fatal(err)
	}
	predicate := Matcher(labels.Everything(), converted)
	got, err := predicate.Matches(event)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("%s (internal %q) on %s: got %v, want %v", selector, predicate.Field.String(), event.Name, got, want)
	}
}

// TestGetAttrsCarriesTheEvent pins what the watch cache relies on: the set
// GetAttrs returns has the namespace and name cacher.dispatchEvent reads, and
// a wrapped selector matches it exactly as it matches the full field set, for
// every label, = and !=, with a value the Event has and one it has not.
func TestGetAttrsCarriesTheEvent(t *testing.T) {
	noRelated := podEvent()
	noRelated.Related = nil
	for _, event := range []*core.Event{podEvent(), noRelated} {
		_, set, err := GetAttrs(event)
		if err != nil {
			t.Fatal(err)
		}
		if set["metadata.namespace"] != event.Namespace || set["metadata.name"] != event.Name {
			t.Errorf("set has namespace %q name %q, want %q %q", set["metadata.namespace"], set["metadata.name"], event.Namespace, event.Name)
		}
		if eventIn(set) != event {
			t.Fatal("the set does not carry its Event")
		}
		full := SelectableFields(event)
		if eventIn(full) != nil {
			t.Fatal("a plain field set was read as carrying an Event")
		}
		for _, f := range internalFields {
			values := []string{"", "none-such"}
			if f.value != nil {
				values = append(values, f.value(event))
			} else {
				values = append(values, byLabel[f.either[0]].value(event), byLabel[f.either[1]].value(event))
			}
			for _, v := range values {
				for _, s := range []fields.Selector{fields.OneTermEqualSelector(f.label, v), fields.OneTermNotEqualSelector(f.label, v)} {
					wrapped := wrapSelector(s)
					if got, want := wrapped.Matches(set), wrapped.Matches(full); got != want {
						t.Errorf("%s on %s: %v on GetAttrs' set, %v on the field set", s, event.Name, got, want)
					}
				}
			}
		}
	}
}
