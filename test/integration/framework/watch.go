package framework

// Watches read into plain records, so that tests compare what a client saw.

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// Seen is one watch event, reduced to what the tests compare.
type Seen struct {
	Type watch.EventType
	Name string
	RV   string
	// Status is set for Error events.
	Status *metav1.Status
}

func (s Seen) String() string {
	if s.Status != nil {
		return fmt.Sprintf("%s %d %s %q", s.Type, s.Status.Code, s.Status.Reason, s.Status.Message)
	}
	return fmt.Sprintf("%s %s@%s", s.Type, s.Name, s.RV)
}

func toSeen(e watch.Event) Seen {
	if status, ok := e.Object.(*metav1.Status); ok {
		return Seen{Type: e.Type, Status: status}
	}
	s := Seen{Type: e.Type}
	if accessor, err := meta.Accessor(e.Object); err == nil {
		s.Name, s.RV = accessor.GetName(), accessor.GetResourceVersion()
	}
	return s
}

// Observe reads w until enough(got) holds, the watch closes, or ctx ends,
// and reports what came (bookmarks and errors included) and whether the
// server closed the watch.
func Observe(ctx context.Context, w watch.Interface, enough func(got []Seen) bool) (got []Seen, closed bool) {
	defer w.Stop()
	for {
		if enough != nil && enough(got) {
			return got, false
		}
		select {
		case e, ok := <-w.ResultChan():
			if !ok {
				return got, true
			}
			got = append(got, toSeen(e))
		case <-ctx.Done():
			return got, false
		case <-time.After(100 * time.Millisecond):
			// enough may depend on more than the events.
		}
	}
}

// Changes drops bookmarks and errors.
func Changes(got []Seen) []Seen {
	var out []Seen
	for _, s := range got {
		if s.Type == watch.Added || s.Type == watch.Modified || s.Type == watch.Deleted {
			out = append(out, s)
		}
	}
	return out
}

// WithPrefix drops the changes of Events whose names do not start with
// prefix (kube-apiserver records Events of its own).
func WithPrefix(got []Seen, prefix string) []Seen {
	var out []Seen
	for _, s := range got {
		if s.Status != nil || s.Type == watch.Bookmark || strings.HasPrefix(s.Name, prefix) {
			out = append(out, s)
		}
	}
	return out
}

// OfType keeps the events of type typ.
func OfType(got []Seen, typ watch.EventType) []Seen {
	var out []Seen
	for _, s := range got {
		if s.Type == typ {
			out = append(out, s)
		}
	}
	return out
}

// Gone returns the 410 errors among got.
func Gone(got []Seen) []Seen {
	var out []Seen
	for _, s := range OfType(got, watch.Error) {
		if s.Status.Code == http.StatusGone {
			out = append(out, s)
		}
	}
	return out
}

// LastRV is the resource version a client resumes from: that of the last
// change or bookmark it saw.
func LastRV(got []Seen, from string) string {
	for _, s := range got {
		if s.Type != watch.Error && s.RV != "" {
			from = s.RV
		}
	}
	return from
}

// HasChanges is an Observe condition: n changes, or an error.
func HasChanges(n int) func([]Seen) bool {
	return func(got []Seen) bool { return len(Changes(got)) >= n || len(OfType(got, watch.Error)) > 0 }
}

// RVInt parses a resource version, failing the test when it is not a
// number (every resource version of ours and kube-apiserver's is one).
func RVInt(t *testing.T, rv string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(rv, 10, 64)
	if err != nil {
		t.Fatalf("resource version %q: %v", rv, err)
	}
	return n
}
