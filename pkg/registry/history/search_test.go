package history_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"

	"github.com/eventapiserver/event-apiserver/pkg/apis/core"
	historyapi "github.com/eventapiserver/event-apiserver/pkg/apis/history"
	historyv1alpha1 "github.com/eventapiserver/event-apiserver/pkg/apis/history/v1alpha1"
	"github.com/eventapiserver/event-apiserver/pkg/apiserver"
	"github.com/eventapiserver/event-apiserver/pkg/history"
	"github.com/eventapiserver/event-apiserver/pkg/history/sqlite"
	registry "github.com/eventapiserver/event-apiserver/pkg/registry/history"
)

// searchStore is a SQLite store holding Events with notes, one a minute up
// to now; the last is stored as a server from before the note column did.
func searchStore(t *testing.T, notes ...string) history.Store {
	t.Helper()
	path := filepath.Join(t.TempDir(), "history.db")
	s, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	now := time.Now()
	for i, note := range notes {
		event := &core.Event{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprint("ev-", i), UID: types.UID(fmt.Sprint("uid-", i))},
			Reason:     []string{"Failed", "BackOff"}[i%2], Message: note, Type: "Warning",
			LastTimestamp: metav1.NewTime(now.Add(time.Duration(i-len(notes)) * time.Minute)),
		}
		if err := s.Write(context.Background(), history.Batch{Versions: []history.Version{versionOf(t, event, int64(i+1), now)}}); err != nil {
			t.Fatal(err)
		}
	}
	// The store's merger may hold the write lock a moment after a write
	// (sqlite's merge.go): wait for it, as the store's own connections do.
	raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.Exec(`UPDATE versions SET note = NULL WHERE name = ?`, fmt.Sprint("ev-", len(notes)-1)); err != nil {
		t.Fatal(err)
	}
	return s
}

func list(rest *registry.REST, selector string) ([]string, error) {
	parsed, err := fields.ParseSelector(selector)
	if err != nil {
		return nil, err
	}
	obj, err := rest.List(genericapirequest.WithNamespace(context.Background(), "ns"), &metainternalversion.ListOptions{FieldSelector: parsed})
	if err != nil {
		return nil, err
	}
	var names []string
	for _, r := range obj.(*historyapi.EventRecordList).Items {
		names = append(names, r.Name)
	}
	sort.Strings(names)
	return names, nil
}

// TestSearchSelector: eventrecords take note.contains=<term> (the label
// passes the EventRecord field label conversion as sent) and find the
// records whose note holds the term ignoring case, beside other selectors
// and the window, the version stored before the note column included
// through its Event.
func TestSearchSelector(t *testing.T) {
	label, value, err := apiserver.Scheme.ConvertFieldLabel(historyv1alpha1.SchemeGroupVersion.WithKind("EventRecord"), "note.contains", "x509")
	if err != nil || label != "note.contains" || value != "x509" {
		t.Fatalf("eventrecords' note.contains label: %q=%q, %v", label, value, err)
	}
	for _, kind := range []string{"Event"} {
		if _, _, err := apiserver.Scheme.ConvertFieldLabel(corev1.SchemeGroupVersion.WithKind(kind), "note.contains", "x509"); err == nil {
			t.Errorf("core/v1 %s accepts note.contains, which kube-apiserver refuses", kind)
		}
	}
	rest := registry.NewREST(searchStore(t,
		"Failed to pull image: x509: certificate signed by unknown authority",
		"Back-off restarting failed container",
		"Memory cgroup out of memory: Killed process (OOMKilled) 100% of limit",
		"Failed to pull image: X509: certificate has expired",
	), apiserver.Codecs.UniversalDecoder(core.SchemeGroupVersion), registry.FeedConfig{})
	for _, tc := range []struct {
		selector string
		want     []string
	}{
		{"note.contains=x509,since=1h", []string{"ev-0.1", "ev-3.4"}},
		{"note.contains=FAILED,since=1h", []string{"ev-0.1", "ev-1.2", "ev-3.4"}},
		{"note.contains=x509,reason=Failed,since=1h", []string{"ev-0.1"}},
		{"note.contains=x509,reason=BackOff,since=1h", []string{"ev-3.4"}},
		{"note.contains=x509,since=3m", []string{"ev-3.4"}},
		{"note.contains=100%,since=1h", []string{"ev-2.3"}},
		{"note.contains=100_,since=1h", nil},
		{"note.contains=x509,note.contains=expired,since=1h", []string{"ev-3.4"}},
		{"note.contains=nothing-like-it,since=1h", nil},
	} {
		got, err := list(rest, tc.selector)
		if err != nil {
			t.Errorf("%s: %v", tc.selector, err)
		} else if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%s: %v, want %v", tc.selector, got, tc.want)
		}
	}
	// A watch takes the search too, from the feed's start: the two
	// versions that mention x509, the one without a stored note included.
	selector, err := fields.ParseSelector("note.contains=x509")
	if err != nil {
		t.Fatal(err)
	}
	w, err := rest.Watch(genericapirequest.WithNamespace(context.Background(), "ns"), &metainternalversion.ListOptions{FieldSelector: selector, ResourceVersion: "1"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var watched []string
	for range 2 {
		ev := next(t, w)
		if ev.Type != watch.Added {
			t.Fatalf("watch: %s %v", ev.Type, ev.Object)
		}
		watched = append(watched, ev.Object.(*historyapi.EventRecord).Name)
	}
	if sort.Strings(watched); fmt.Sprint(watched) != "[ev-0.1 ev-3.4]" {
		t.Errorf("watch: %v, want [ev-0.1 ev-3.4]", watched)
	}
}

// TestSearchLimits: every limit is hit and answered as documented: a 400
// naming the flag and the limit for the window and the rows, kube-apiserver's
// 504 Timeout for the statement timeout, and a malformed term's 400 says
// what is wrong.
func TestSearchLimits(t *testing.T) {
	s := searchStore(t, "Back-off restarting failed container", "Back-off restarting failed container",
		"Back-off restarting failed container", "Started container")
	decoder := apiserver.Codecs.UniversalDecoder(core.SchemeGroupVersion)
	for _, tc := range []struct {
		name     string
		limits   registry.Limits
		selector string
		code     int32
		reason   metav1.StatusReason
		message  []string
	}{
		{"open window", registry.Limits{}, "note.contains=failed", http.StatusBadRequest, metav1.StatusReasonBadRequest,
			[]string{"since=", "336h0m0s", "--history-max-query-window"}},
		{"window too long", registry.Limits{MaxWindow: time.Hour}, "note.contains=failed,since=2h", http.StatusBadRequest, metav1.StatusReasonBadRequest,
			[]string{"2h0m0s", "1h0m0s", "--history-max-query-window"}},
		{"too many rows", registry.Limits{MaxRows: 2}, "note.contains=failed,since=1h", http.StatusBadRequest, metav1.StatusReasonBadRequest,
			[]string{"more than 2 versions", "--history-max-query-rows"}},
		{"timeout", registry.Limits{Timeout: time.Nanosecond}, "note.contains=failed,since=1h", http.StatusGatewayTimeout, metav1.StatusReasonTimeout,
			[]string{"1ns", "--history-query-timeout"}},
		{"too short", registry.Limits{}, "note.contains=ab,since=1h", http.StatusBadRequest, metav1.StatusReasonBadRequest,
			[]string{"note.contains", `"ab"`, "at least 3 letters or digits in a row"}},
		{"negated", registry.Limits{}, "note.contains!=failed,since=1h", http.StatusBadRequest, metav1.StatusReasonBadRequest,
			[]string{"note.contains supports only '='"}},
	} {
		// A watch with its initial state is a list of the window first:
		// the same limits, refused before it starts or as its ERROR event.
		for way, read := range map[string]func(*registry.REST, string) error{
			"list":  func(rest *registry.REST, selector string) error { _, err := list(rest, selector); return err },
			"watch": watchInitial,
		} {
			t.Run(tc.name+"/"+way, func(t *testing.T) {
				rest := registry.NewREST(s, decoder, registry.FeedConfig{}).WithLimits(tc.limits)
				err := read(rest, tc.selector)
				status, ok := err.(apierrors.APIStatus)
				if !ok {
					t.Fatalf("err = %v, want a Status", err)
				}
				st := status.Status()
				if st.Code != tc.code || st.Reason != tc.reason || st.Status != metav1.StatusFailure {
					t.Errorf("status %d %s %s, want %d %s Failure", st.Code, st.Reason, st.Status, tc.code, tc.reason)
				}
				for _, part := range tc.message {
					if !strings.Contains(st.Message, part) {
						t.Errorf("message %q does not say %q", st.Message, part)
					}
				}
			})
		}
	}
	// Within every limit the same store answers. The version stored
	// before the note column counts as selected: the store cannot tell
	// before its Event is read.
	rest := registry.NewREST(s, decoder, registry.FeedConfig{}).WithLimits(registry.Limits{MaxWindow: time.Hour, MaxRows: 4})
	if got, err := list(rest, "note.contains=failed,since=1h"); err != nil || len(got) != 3 {
		t.Errorf("within the limits: %v, %v", got, err)
	}
}

// watchInitial watches selector with its initial state (kubectl's
// resourceVersion "") and returns the error that refused the watch or its
// first event's Status; nil when its first event is a record.
func watchInitial(rest *registry.REST, selector string) error {
	parsed, err := fields.ParseSelector(selector)
	if err != nil {
		return err
	}
	w, err := rest.Watch(genericapirequest.WithNamespace(context.Background(), "ns"), &metainternalversion.ListOptions{FieldSelector: parsed})
	if err != nil {
		return err
	}
	defer w.Stop()
	select {
	case e := <-w.ResultChan():
		if e.Type == watch.Error {
			return apierrors.FromObject(e.Object)
		}
		return nil
	case <-time.After(wait.ForeverTestTimeout):
		return fmt.Errorf("no event in %s", wait.ForeverTestTimeout)
	}
}
