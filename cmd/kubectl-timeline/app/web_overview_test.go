package app

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"

	"github.com/eventapiserver/event-apiserver/cmd/kubectl-timeline/web"
	historyv1alpha1 "github.com/eventapiserver/event-apiserver/pkg/apis/history/v1alpha1"
)

// TestObjectCounter: records count per object across its incarnations and
// clusters apart; the most records first; past the limit, cut and said.
func TestObjectCounter(t *testing.T) {
	at := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	record := func(cluster, name, uid, eventType string, minutes int) *historyv1alpha1.EventRecord {
		return &historyv1alpha1.EventRecord{
			ObjectMeta: metav1.ObjectMeta{Namespace: "shop"},
			Cluster:    cluster,
			LastSeen:   metav1.NewTime(at.Add(time.Duration(minutes) * time.Minute)),
			Event: eventsv1.Event{Type: eventType, Regarding: corev1.ObjectReference{
				Kind: "Pod", Name: name, Namespace: "shop", UID: types.UID("uid-" + uid), APIVersion: "v1"}},
		}
	}
	c := objectCounter{objects: map[string]*objectCount{}}
	for _, r := range []*historyv1alpha1.EventRecord{
		record("a", "web-0", "1", "Warning", 1), record("a", "web-0", "2", "Normal", 2), record("a", "web-0", "2", "Warning", 3),
		record("b", "web-0", "3", "Normal", 4), record("a", "api", "4", "Normal", 5),
	} {
		c.add(r)
	}
	got, cut := c.sorted(10)
	if cut || len(got) != 3 {
		t.Fatalf("objects %+v, cut %v", got, cut)
	}
	want := web.ObjectCounts{APIVersion: "v1", Kind: "Pod", Namespace: "shop", Name: "web-0", Cluster: "a", Records: 3, Warnings: 2, UIDs: 2, Last: at.Add(3 * time.Minute).UnixMilli()}
	if got[0] != want {
		t.Errorf("first %+v, want %+v", got[0], want)
	}
	// Ties by the newest first.
	if got[1].Name != "api" || got[2].Cluster != "b" {
		t.Errorf("ties ordered %+v", got[1:])
	}
	if got, cut := c.sorted(1); !cut || len(got) != 1 {
		t.Errorf("sorted(1): %d objects, cut %v", len(got), cut)
	}
	c.records = web.MaxObjectRecords
	var truncated bool
	if err := c.enough("next", &truncated); err != errEnough || !truncated {
		t.Errorf("at the limit with more to read: %v, truncated %v", err, truncated)
	}
	truncated = false
	if err := c.enough("", &truncated); err != nil || truncated {
		t.Errorf("at the limit with nothing more: %v, truncated %v", err, truncated)
	}
}

// TestWindowSelector: a drill-down's selector is the segment's group, the
// cluster, a search and its window, each value escaped.
func TestWindowSelector(t *testing.T) {
	since, until := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC), time.Date(2026, 11, 28, 11, 0, 0, 0, time.UTC)
	got := windowSelector(web.Scope{Namespace: "shop", Cluster: "b"}, "100%, cpu", since, until, fields.OneTermNotEqualSelector("reason", "BackOff"))
	want := `reason!=BackOff,cluster=b,note.contains=100%\, cpu,since=2026-11-28T10:00:00Z,until=2026-11-28T11:00:00Z`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}
