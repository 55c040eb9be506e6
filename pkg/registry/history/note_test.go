package history_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"sort"
	"testing"
	"time"

	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
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

// TestNoteSelector: eventrecords take note=<value> and note!=<value> (the
// events.k8s.io/v1 spelling; the Events APIs refuse it, as kube-apiserver
// does) and answer them exactly, in lists and watches, also for a version
// stored before the note column existed, whose column is NULL and whose
// Event says what its note is.
func TestNoteSelector(t *testing.T) {
	label, value, err := apiserver.Scheme.ConvertFieldLabel(historyv1alpha1.SchemeGroupVersion.WithKind("EventRecord"), "note", "x")
	if err != nil || label != "note" || value != "x" {
		t.Fatalf("eventrecords' note label: %q=%q, %v", label, value, err)
	}
	path := filepath.Join(t.TempDir(), "history.db")
	s, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	notes := []string{"Back-off restarting failed container", "Started container", "Back-off restarting failed container"}
	now := time.Now()
	for i, note := range notes {
		event := &core.Event{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprint("ev-", i), UID: types.UID(fmt.Sprint("uid-", i))},
			Reason:     "BackOff", Message: note, Type: "Normal", LastTimestamp: metav1.NewTime(now.Add(time.Duration(i) * time.Second)),
		}
		if err := s.Write(context.Background(), history.Batch{Versions: []history.Version{versionOf(t, event, int64(i+1), now)}}); err != nil {
			t.Fatal(err)
		}
	}
	// ev-2 as a server before the column stored it.
	// The store's merger may hold the write lock a moment after a write
	// (sqlite's merge.go): wait for it, as the store's own connections do.
	raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`UPDATE versions SET note = NULL WHERE name = 'ev-2'`); err != nil {
		t.Fatal(err)
	}
	raw.Close()

	rest := registry.NewREST(s, apiserver.Codecs.UniversalDecoder(core.SchemeGroupVersion), registry.FeedConfig{PollInterval: 10 * time.Millisecond})
	ctx := genericapirequest.WithNamespace(context.Background(), "ns")
	for _, tc := range []struct {
		selector string
		want     []string
	}{
		{"note=Back-off restarting failed container", []string{"ev-0.1", "ev-2.3"}},
		{"note=Started container", []string{"ev-1.2"}},
		{"note!=Started container", []string{"ev-0.1", "ev-2.3"}},
		{"note=Back-off", nil},
		{"note=Back-off restarting failed container,reason=BackOff", []string{"ev-0.1", "ev-2.3"}},
	} {
		t.Run(tc.selector, func(t *testing.T) {
			selector, err := fields.ParseSelector(tc.selector)
			if err != nil {
				t.Fatal(err)
			}
			obj, err := rest.List(ctx, &metainternalversion.ListOptions{FieldSelector: selector})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range obj.(*historyapi.EventRecordList).Items {
				got = append(got, r.Name)
			}
			sort.Strings(got)
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("list: %v, want %v", got, tc.want)
			}
			w, err := rest.Watch(ctx, &metainternalversion.ListOptions{FieldSelector: selector, ResourceVersion: "1"})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			got = nil
			for range tc.want {
				ev := next(t, w)
				if ev.Type != watch.Added {
					t.Fatalf("watch: %s", ev.Type)
				}
				got = append(got, ev.Object.(*historyapi.EventRecord).Name)
			}
			sort.Strings(got)
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("watch: %v, want %v", got, tc.want)
			}
		})
	}
}
