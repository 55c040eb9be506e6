// Package timeline merges one object's Events, read from the live Events API
// and from history (history.eventapiserver.io eventrecords), into one list,
// oldest first, each Event once, in the shape history serves: an
// EventRecord carrying the Event as events.k8s.io/v1 shows it. It is the
// model behind cmd/kubectl-timeline, kept apart from the command so that the
// merge, order and filters are tested without a server.
package timeline

import (
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/eventapiserver/event-apiserver/pkg/apis/core"
	coreinstall "github.com/eventapiserver/event-apiserver/pkg/apis/core/install"
	eventsinstall "github.com/eventapiserver/event-apiserver/pkg/apis/events/install"
	historyinstall "github.com/eventapiserver/event-apiserver/pkg/apis/history/install"
	historyv1alpha1 "github.com/eventapiserver/event-apiserver/pkg/apis/history/v1alpha1"
	"github.com/eventapiserver/event-apiserver/pkg/search"
)

// Scheme holds the server's own Event types and conversions (core/v1,
// events.k8s.io/v1, history), so that a live Event reads here exactly as the
// server shows the same version in history.
var Scheme = runtime.NewScheme()

func init() {
	coreinstall.Install(Scheme)
	eventsinstall.Install(Scheme)
	historyinstall.Install(Scheme)
}

// LiveRecord shows a core/v1 Event from the Events API as history shows a
// version of it: named <event name>.<resourceVersion>, the Event as
// events.k8s.io/v1, live.
func LiveRecord(in *corev1.Event) (historyv1alpha1.EventRecord, error) {
	var internal core.Event
	if err := Scheme.Convert(in, &internal, nil); err != nil {
		return historyv1alpha1.EventRecord{}, err
	}
	var event eventsv1.Event
	if err := Scheme.Convert(&internal, &event, nil); err != nil {
		return historyv1alpha1.EventRecord{}, err
	}
	event.TypeMeta = metav1.TypeMeta{}
	return historyv1alpha1.EventRecord{
		ObjectMeta: metav1.ObjectMeta{Name: in.Name + "." + in.ResourceVersion, Namespace: in.Namespace},
		Event:      event,
		LastSeen:   metav1.NewTime(LastSeen(&event)),
		Live:       true,
	}, nil
}

// LastSeen is when the Event last happened, in the order history reads it
// (pkg/history.LastSeen, which follows `kubectl events`): the series' last
// observation, else deprecatedLastTimestamp, else eventTime, else
// deprecatedFirstTimestamp, else its creation.
func LastSeen(e *eventsv1.Event) time.Time {
	switch {
	case e.Series != nil && !e.Series.LastObservedTime.IsZero():
		return e.Series.LastObservedTime.Time
	case !e.DeprecatedLastTimestamp.IsZero():
		return e.DeprecatedLastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	case !e.DeprecatedFirstTimestamp.IsZero():
		return e.DeprecatedFirstTimestamp.Time
	default:
		return e.CreationTimestamp.Time
	}
}

// FirstSeen is when the Event first happened: a series starts at its
// eventTime; a core/v1 recorder's Event at its firstTimestamp.
func FirstSeen(e *eventsv1.Event) time.Time {
	switch {
	case e.Series != nil && !e.EventTime.IsZero():
		return e.EventTime.Time
	case !e.DeprecatedFirstTimestamp.IsZero():
		return e.DeprecatedFirstTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	default:
		return LastSeen(e)
	}
}

// Count is how often the Event happened as of this version.
func Count(e *eventsv1.Event) int32 {
	switch {
	case e.Series != nil:
		return e.Series.Count
	case e.DeprecatedCount > 0:
		return e.DeprecatedCount
	default:
		return 1
	}
}

// Reporter is the controller that reported the Event: reportingController,
// else an old core/v1 recorder's source component.
func Reporter(e *eventsv1.Event) string {
	if e.ReportingController != "" {
		return e.ReportingController
	}
	return e.DeprecatedSource.Component
}

// Filter is what the user asked to see: Events last seen at or after Since
// (none when zero), of one of Types (any when empty; compared as `kubectl
// events --types` compares, ignoring case).
type Filter struct {
	Since time.Time
	Types []string
	// Search keeps the Events whose note holds it, ignoring case, as
	// history's note.contains selector does.
	Search string
}

// Match says whether the record is on the timeline the user asked for.
func (f Filter) Match(r *historyv1alpha1.EventRecord) bool {
	if !f.Since.IsZero() && r.LastSeen.Time.Before(f.Since) {
		return false
	}
	if f.Search != "" && !search.ContainsFold(r.Event.Note, f.Search) {
		return false
	}
	if len(f.Types) == 0 {
		return true
	}
	for _, t := range f.Types {
		if strings.EqualFold(t, r.Event.Type) {
			return true
		}
	}
	return false
}

// Timeline keeps the newest version of each Event it was given. History
// holds every version of an Event (a series counting up, a message
// changing), and the live API its latest, which history usually holds too:
// the timeline shows each Event once, as `kubectl events` does, at its
// newest version.
type Timeline struct {
	newest map[string]*historyv1alpha1.EventRecord
}

// New returns an empty timeline.
func New() *Timeline {
	return &Timeline{newest: map[string]*historyv1alpha1.EventRecord{}}
}

// Key names an Event across its versions. Its uid, since a name may be
// reused by a later Event once the first is deleted or expired.
func Key(r *historyv1alpha1.EventRecord) string {
	if r.Event.UID != "" {
		return string(r.Event.UID)
	}
	return r.Namespace + "/" + r.Event.Name
}

// ResourceVersion orders versions of one Event: both sources number them
// with the revisions of the same etcd.
func ResourceVersion(r *historyv1alpha1.EventRecord) int64 {
	rv, err := strconv.ParseInt(r.Event.ResourceVersion, 10, 64)
	if err != nil {
		return 0
	}
	return rv
}

// Add keeps r when it is newer than what the timeline holds of its Event,
// or when it is the same version with the Event's end the timeline did not
// know (history's copy wins over the live one), and says whether it did.
// The same version from both sources is kept once.
func (t *Timeline) Add(r historyv1alpha1.EventRecord) bool {
	key := Key(&r)
	old, ok := t.newest[key]
	if ok {
		oldRV, newRV := ResourceVersion(old), ResourceVersion(&r)
		if newRV < oldRV {
			return false
		}
		if newRV == oldRV && (old.DeletedAt != nil || r.DeletedAt == nil) {
			return false
		}
	}
	t.newest[key] = &r
	return true
}

// Len is the number of Events on the timeline.
func (t *Timeline) Len() int { return len(t.newest) }

// Records is the timeline oldest first, only the records f matches.
func (t *Timeline) Records(f Filter) []historyv1alpha1.EventRecord {
	out := make([]historyv1alpha1.EventRecord, 0, len(t.newest))
	for _, r := range t.newest {
		if f.Match(r) {
			out = append(out, *r)
		}
	}
	Sort(out)
	return out
}

// Sort orders records oldest first: by last seen, then by resourceVersion
// (the order etcd wrote them), then by name, so that the order is the same
// on every run.
func Sort(records []historyv1alpha1.EventRecord) {
	sort.SliceStable(records, func(i, j int) bool {
		a, b := &records[i], &records[j]
		if !a.LastSeen.Equal(&b.LastSeen) {
			return a.LastSeen.Before(&b.LastSeen)
		}
		if ra, rb := ResourceVersion(a), ResourceVersion(b); ra != rb {
			return ra < rb
		}
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
}
