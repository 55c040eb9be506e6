package timeline

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/eventapiserver/event-apiserver/pkg/apis/core"
	historyv1alpha1 "github.com/eventapiserver/event-apiserver/pkg/apis/history/v1alpha1"
	"github.com/eventapiserver/event-apiserver/pkg/history"
)

var base = time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)

// record is a version of Event eventUID (named name) about object
// objectUID, last seen at base+at.
func record(name, eventUID, objectUID string, rv int, at time.Duration, eventType string, live bool) historyv1alpha1.EventRecord {
	r := historyv1alpha1.EventRecord{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s.%d", name, rv), Namespace: "ns"},
		Event: eventsv1.Event{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(eventUID), ResourceVersion: fmt.Sprint(rv)},
			Regarding:  corev1.ObjectReference{Kind: "Pod", Name: "web-0", UID: types.UID(objectUID)},
			Type:       eventType,
		},
		LastSeen: metav1.NewTime(base.Add(at)),
		Live:     live,
	}
	if !live {
		deleted := metav1.NewTime(base.Add(at + time.Minute))
		r.DeletedAt = &deleted
	}
	return r
}

// versions names records as eventUID@rv, in order.
func versions(records []historyv1alpha1.EventRecord) []string {
	out := []string{}
	for _, r := range records {
		out = append(out, string(r.Event.UID)+"@"+r.Event.ResourceVersion)
	}
	return out
}

func TestTimelineMerge(t *testing.T) {
	const warning, normal = "Warning", "Normal"
	tests := []struct {
		name string
		// added in this order: the live list first, then history (newest
		// first, as it lists), then what a watch delivers.
		added []historyv1alpha1.EventRecord
		// accepted is what Add says of each.
		accepted []bool
		want     []string
	}{{
		name: "the same version from both sources is shown once",
		added: []historyv1alpha1.EventRecord{
			record("a", "e1", "pod-3", 30, 0, normal, true),
			record("a", "e1", "pod-3", 30, 0, normal, true),
		},
		accepted: []bool{true, false},
		want:     []string{"e1@30"},
	}, {
		name: "history's older versions of a live Event are superseded",
		added: []historyv1alpha1.EventRecord{
			record("a", "e1", "pod-3", 32, 2*time.Minute, warning, true),
			record("a", "e1", "pod-3", 32, 2*time.Minute, warning, true),
			record("a", "e1", "pod-3", 31, time.Minute, warning, true),
			record("a", "e1", "pod-3", 30, 0, warning, true),
		},
		accepted: []bool{true, false, false, false},
		want:     []string{"e1@32"},
	}, {
		name: "a version history captured after the live list supersedes it",
		added: []historyv1alpha1.EventRecord{
			record("a", "e1", "pod-3", 30, 0, warning, true),
			record("a", "e1", "pod-3", 31, time.Minute, warning, true),
		},
		accepted: []bool{true, true},
		want:     []string{"e1@31"},
	}, {
		name: "three incarnations, the first two only in history, oldest first",
		added: []historyv1alpha1.EventRecord{
			record("c", "e3", "pod-3", 50, 20*time.Hour, normal, true),
			record("c", "e3", "pod-3", 50, 20*time.Hour, normal, true),
			record("b", "e2", "pod-2", 20, 10*time.Hour, warning, false),
			record("b", "e2", "pod-2", 19, 9*time.Hour, warning, false),
			record("a", "e1", "pod-1", 10, 0, normal, false),
		},
		accepted: []bool{true, false, true, false, true},
		want:     []string{"e1@10", "e2@20", "e3@50"},
	}, {
		name: "an Event name reused by a later Event is two Events",
		added: []historyv1alpha1.EventRecord{
			record("a", "e2", "pod-2", 40, time.Hour, normal, true),
			record("a", "e1", "pod-1", 10, 0, normal, false),
		},
		accepted: []bool{true, true},
		want:     []string{"e1@10", "e2@40"},
	}, {
		name: "a watch delivers a newer version, then an old one again",
		added: []historyv1alpha1.EventRecord{
			record("a", "e1", "pod-3", 30, 0, normal, true),
			record("a", "e1", "pod-3", 35, time.Minute, normal, true),
			record("a", "e1", "pod-3", 35, time.Minute, normal, true),
			record("a", "e1", "pod-3", 30, 0, normal, true),
		},
		accepted: []bool{true, true, false, false},
		want:     []string{"e1@35"},
	}, {
		name: "same last seen: etcd's order",
		added: []historyv1alpha1.EventRecord{
			record("b", "e2", "pod-3", 31, 0, normal, true),
			record("a", "e1", "pod-3", 30, 0, normal, true),
		},
		accepted: []bool{true, true},
		want:     []string{"e1@30", "e2@31"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tl := New()
			var accepted []bool
			for _, r := range tc.added {
				accepted = append(accepted, tl.Add(r))
			}
			if diff := cmp.Diff(tc.accepted, accepted); diff != "" {
				t.Errorf("Add (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, versions(tl.Records(Filter{}))); diff != "" {
				t.Errorf("timeline (-want +got):\n%s", diff)
			}
		})
	}
}

// TestTimelineLearnsDeletion: a version listed live, then found deleted in
// history at the same resourceVersion, shows as deleted, and Add says so
// (-w prints the end); the end delivered again is not news.
func TestTimelineLearnsDeletion(t *testing.T) {
	tl := New()
	tl.Add(record("a", "e1", "pod-1", 10, 0, "Normal", true))
	if !tl.Add(record("a", "e1", "pod-1", 10, 0, "Normal", false)) {
		t.Error("Add of the end of a live version returned false")
	}
	if tl.Add(record("a", "e1", "pod-1", 10, 0, "Normal", false)) {
		t.Error("Add of the same end again returned true")
	}
	got := tl.Records(Filter{})
	if len(got) != 1 || got[0].Live || got[0].DeletedAt == nil {
		t.Fatalf("got %+v, want one deleted record", got)
	}
}

func TestFilter(t *testing.T) {
	tl := New()
	tl.Add(record("a", "e1", "pod-1", 10, 0, "Normal", false))
	tl.Add(record("b", "e2", "pod-2", 20, 10*time.Hour, "Warning", false))
	tl.Add(record("c", "e3", "pod-3", 30, 20*time.Hour, "Normal", true))
	tl.Add(record("d", "e4", "pod-3", 40, 21*time.Hour, "Warning", true))
	tests := []struct {
		name   string
		filter Filter
		want   []string
	}{
		{"everything", Filter{}, []string{"e1@10", "e2@20", "e3@30", "e4@40"}},
		{"since cuts older Events", Filter{Since: base.Add(10 * time.Hour)}, []string{"e2@20", "e3@30", "e4@40"}},
		{"since after everything", Filter{Since: base.Add(22 * time.Hour)}, []string{}},
		{"types, ignoring case as kubectl events", Filter{Types: []string{"warning"}}, []string{"e2@20", "e4@40"}},
		{"both types", Filter{Types: []string{"Normal", "Warning"}}, []string{"e1@10", "e2@20", "e3@30", "e4@40"}},
		{"since and type", Filter{Since: base.Add(15 * time.Hour), Types: []string{"Normal"}}, []string{"e3@30"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, versions(tl.Records(tc.filter))); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestLiveRecord: a live core/v1 Event reads as history shows the same
// version, and its last seen is history's (pkg/history.LastSeen), so that
// --since cuts both sources at the same point.
func TestLiveRecord(t *testing.T) {
	at := func(d time.Duration) metav1.Time { return metav1.NewTime(base.Add(d)) }
	micro := func(d time.Duration) metav1.MicroTime { return metav1.NewMicroTime(base.Add(d)) }
	object := corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: "web-0", UID: "pod-1", APIVersion: "v1"}
	tests := []struct {
		name      string
		event     corev1.Event
		firstSeen time.Time
		count     int32
		reporter  string
	}{{
		name: "core/v1 recorder",
		event: corev1.Event{InvolvedObject: object, Reason: "BackOff", Message: "back-off", Type: "Warning",
			Source: corev1.EventSource{Component: "kubelet", Host: "node-1"}, Count: 5, FirstTimestamp: at(0), LastTimestamp: at(time.Hour)},
		firstSeen: base, count: 5, reporter: "kubelet",
	}, {
		name: "events.k8s.io/v1 series",
		event: corev1.Event{InvolvedObject: object, Reason: "Scheduled", Message: "assigned", Type: "Normal",
			EventTime: micro(time.Minute), Series: &corev1.EventSeries{Count: 3, LastObservedTime: micro(2 * time.Hour)},
			ReportingController: "default-scheduler", ReportingInstance: "s-1", Action: "Binding"},
		firstSeen: base.Add(time.Minute), count: 3, reporter: "default-scheduler",
	}, {
		name: "events.k8s.io/v1 singleton",
		event: corev1.Event{InvolvedObject: object, Reason: "Pulled", Type: "Normal", EventTime: micro(3 * time.Minute),
			ReportingController: "kubelet", ReportingInstance: "node-1", Action: "Pull"},
		firstSeen: base.Add(3 * time.Minute), count: 1, reporter: "kubelet",
	}, {
		name:      "only a creation time",
		event:     corev1.Event{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: at(4 * time.Minute)}, InvolvedObject: object, Reason: "Odd"},
		firstSeen: base.Add(4 * time.Minute), count: 1, reporter: "",
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.event.DeepCopy()
			in.Name, in.Namespace, in.UID, in.ResourceVersion = "web-0.1", "ns", "e1", "42"
			r, err := LiveRecord(in)
			if err != nil {
				t.Fatal(err)
			}
			if r.Name != "web-0.1.42" || r.Namespace != "ns" || !r.Live || r.DeletedAt != nil {
				t.Errorf("record %s/%s live %v deletedAt %v, want ns/web-0.1.42, live", r.Namespace, r.Name, r.Live, r.DeletedAt)
			}
			var internal core.Event
			if err := Scheme.Convert(in, &internal, nil); err != nil {
				t.Fatal(err)
			}
			if want := history.LastSeen(&internal); !r.LastSeen.Time.Equal(want) {
				t.Errorf("last seen %s, history's %s", r.LastSeen.Time, want)
			}
			if r.Event.Note != in.Message || r.Event.Regarding != in.InvolvedObject || r.Event.UID != in.UID || r.Event.ResourceVersion != "42" {
				t.Errorf("event not converted as events.k8s.io/v1 shows it: %+v", r.Event)
			}
			if got := FirstSeen(&r.Event); !got.Equal(tc.firstSeen) {
				t.Errorf("first seen %s, want %s", got, tc.firstSeen)
			}
			if got := Count(&r.Event); got != tc.count {
				t.Errorf("count %d, want %d", got, tc.count)
			}
			if got := Reporter(&r.Event); got != tc.reporter {
				t.Errorf("reporter %q, want %q", got, tc.reporter)
			}
		})
	}
}
