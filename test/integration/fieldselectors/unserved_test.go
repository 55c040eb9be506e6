package fieldselectors

import (
	"bytes"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	historyv1alpha1 "github.com/eventapiserver/event-apiserver/pkg/apis/history/v1alpha1"
	"github.com/eventapiserver/event-apiserver/pkg/fieldselectors"
	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// testSetSelectorsNotServed (a part of TestSetFieldSelectors, which starts
// both servers): a set-based field selector that the set grammar does not
// serve gets kube-apiserver v1.36.3's answer byte for byte, the same request
// sent to both: a set over a label the resource does not have (an unknown
// one, one of the other Events version, history's window on the Events
// APIs), over a label with no set form (history's since and until), a set
// beside a plain requirement on such a label, and a set whose values are
// not label values, in core/v1, events.k8s.io/v1 and history's
// eventrecords, lists and watches. On eventrecords, which kube-apiserver
// does not serve, the answer is the one its parser gives the same selector
// on events.k8s.io/v1. The cases come from the label tables
// (fieldselectors.Labels), so a new label cannot miss its case; every label
// with a set form is checked to be served, where kube-apiserver refuses it
// (the intended difference).
func testSetSelectorsNotServed(t *testing.T, ours, theirs *framework.RawClient) {
	resources := []struct {
		resource schema.GroupVersionResource
		// path is ours; kubePath is where kube-apiserver is asked.
		path, kubePath string
	}{
		{corev1.SchemeGroupVersion.WithResource("events"), framework.CoreEventsPath, framework.CoreEventsPath},
		{eventsv1.SchemeGroupVersion.WithResource("events"), framework.EventsEventsPath, framework.EventsEventsPath},
		{historyv1alpha1.SchemeGroupVersion.WithResource("eventrecords"), framework.EventRecordsPath + "/namespaces/default/eventrecords", framework.EventsEventsPath},
	}
	// Every label any resource accepts, and some none does.
	everyLabel := []string{"color", "message", "count", "spec.nodeName", "reason:in"}
	for _, r := range resources {
		sets, plainOnly := fieldselectors.Labels(r.resource)
		everyLabel = append(append(everyLabel, sets...), plainOnly...)
	}
	slices.Sort(everyLabel)
	everyLabel = slices.Compact(everyLabel)

	get := func(t *testing.T, c *framework.RawClient, path, selector string, watch bool) framework.Response {
		t.Helper()
		query := url.Values{"fieldSelector": {selector}}
		if watch {
			query.Set("watch", "1")
		}
		return c.Do(t, http.MethodGet, path+"?"+query.Encode(), nil, map[string]string{"Accept": "application/json"})
	}
	for _, r := range resources {
		t.Run(r.resource.GroupResource().String(), func(t *testing.T) {
			sets, plainOnly := fieldselectors.Labels(r.resource)
			if len(sets) == 0 {
				t.Fatalf("no labels for %v", r.resource)
			}
			var unserved []string
			for _, label := range everyLabel {
				if slices.Contains(sets, label) {
					// Served; but not when a value is no label value.
					unserved = append(unserved, label+" in (a b)", label+" in (spec.containers{app})", label+" notin (a,b")
					continue
				}
				unserved = append(unserved, label+" in (a)", label+" notin (a,b)", label+" in (a),type=Normal")
				if !slices.Contains(plainOnly, label) {
					unserved = append(unserved, "type in (Normal),"+label+"=x")
				}
			}
			for i, selector := range unserved {
				// One watch per label, the rest lists.
				watch := i%4 == 0
				o, k := get(t, ours, r.path, selector, watch), get(t, theirs, r.kubePath, selector, watch)
				if k.Code != http.StatusBadRequest || !strings.Contains(k.Status(t).Message, "invalid selector") {
					t.Errorf("kube-apiserver answered ?fieldSelector=%s with %d %s; the case tests nothing", selector, k.Code, k.Body)
					continue
				}
				if o.Code != k.Code || !bytes.Equal(o.Body, k.Body) {
					t.Errorf("GET %s ?fieldSelector=%s (watch %v):\nevent-apiserver %d %s\n kube-apiserver %d %s", r.path, selector, watch, o.Code, o.Body, k.Code, k.Body)
				}
			}
			// Every set form is served here and refused by kube-apiserver.
			for _, label := range sets {
				selector := label + " in (a,b)"
				if o := get(t, ours, r.path, selector, false); o.Code != http.StatusOK {
					t.Errorf("GET %s ?fieldSelector=%s: %d %s", r.path, selector, o.Code, o.Body)
				}
				// fields.ParseSelector names the first term in sorted order.
				want := fmt.Sprintf(`invalid selector: '%s'; can't understand '%s'`, selector, min(label+" in (a", "b)"))
				if k := get(t, theirs, r.kubePath, selector, false); k.Code != http.StatusBadRequest || k.Status(t).Message != want {
					t.Errorf("kube-apiserver: ?fieldSelector=%s: %d %s, want 400 %q", selector, k.Code, k.Body, want)
				}
			}
		})
	}
}
