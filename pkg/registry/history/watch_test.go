package history_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/storage"

	"github.com/eventapiserver/event-apiserver/pkg/apis/core"
	historyapi "github.com/eventapiserver/event-apiserver/pkg/apis/history"
	"github.com/eventapiserver/event-apiserver/pkg/apiserver"
	"github.com/eventapiserver/event-apiserver/pkg/history"
	"github.com/eventapiserver/event-apiserver/pkg/history/sqlite"
	registry "github.com/eventapiserver/event-apiserver/pkg/registry/history"
)

// feedFixture is a REST over a SQLite store holding n versions of Events
// ev-1..ev-n in namespace ns.
func feedFixture(t *testing.T, n int) (*registry.REST, history.Store, func(i int)) {
	t.Helper()
	s, err := sqlite.Open(filepath.Join(t.TempDir(), "history.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	write := func(i int) {
		t.Helper()
		now := time.Now()
		event := &core.Event{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprint("ev-", i), UID: types.UID(fmt.Sprint("uid-", i))},
			Reason:     "Started", Type: "Normal", LastTimestamp: metav1.NewTime(now),
		}
		if err := s.Write(context.Background(), history.Batch{Versions: []history.Version{versionOf(t, event, int64(i), now)}}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i <= n; i++ {
		write(i)
	}
	return registry.NewREST(s, apiserver.Codecs.UniversalDecoder(core.SchemeGroupVersion), registry.FeedConfig{PollInterval: 10 * time.Millisecond}), s, write
}

func next(t *testing.T, w watch.Interface) watch.Event {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			t.Fatal("the watch ended")
		}
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no watch event within 10s")
	}
	return watch.Event{}
}

func rv(ev watch.Event) string {
	return ev.Object.(*historyapi.EventRecord).ResourceVersion
}

func TestWatchOptions(t *testing.T) {
	ctx := genericapirequest.WithNamespace(context.Background(), "ns")
	yes, no := true, false

	t.Run("sendInitialEvents ends with the initial-events-end bookmark", func(t *testing.T) {
		rest, _, _ := feedFixture(t, 3)
		w, err := rest.Watch(ctx, &metainternalversion.ListOptions{SendInitialEvents: &yes, AllowWatchBookmarks: true,
			ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		for range 3 {
			if ev := next(t, w); ev.Type != watch.Added {
				t.Fatalf("initial event %s", ev.Type)
			}
		}
		ev := next(t, w)
		rec := ev.Object.(*historyapi.EventRecord)
		if ev.Type != watch.Bookmark || rec.Annotations[metav1.InitialEventsAnnotationKey] != "true" || rec.ResourceVersion != "4" {
			t.Fatalf("after the initial events: %s %+v, want the initial-events-end bookmark at 4", ev.Type, rec.ObjectMeta)
		}
	})

	t.Run("sendInitialEvents=false from now sends only what follows", func(t *testing.T) {
		rest, _, write := feedFixture(t, 3)
		w, err := rest.Watch(ctx, &metainternalversion.ListOptions{SendInitialEvents: &no,
			ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		write(4)
		if ev := next(t, w); ev.Type != watch.Added || rv(ev) != "5" {
			t.Fatalf("%s at %s, want the new version ADDED at 5", ev.Type, rv(ev))
		}
	})

	t.Run("a position sends the changes after it", func(t *testing.T) {
		rest, _, _ := feedFixture(t, 3)
		w, err := rest.Watch(ctx, &metainternalversion.ListOptions{ResourceVersion: "2"})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		for _, want := range []string{"3", "4"} {
			if ev := next(t, w); ev.Type != watch.Added || rv(ev) != want {
				t.Fatalf("%s at %s, want ADDED at %s", ev.Type, rv(ev), want)
			}
		}
	})

	t.Run("past retention: the watch cache's 410 ERROR event", func(t *testing.T) {
		rest, s, _ := feedFixture(t, 3)
		if _, err := s.Retain(context.Background(), time.Now().Add(time.Hour), 0, 2); err != nil {
			t.Fatal(err)
		}
		w, err := rest.Watch(ctx, &metainternalversion.ListOptions{ResourceVersion: "2"})
		if err != nil {
			t.Fatal(err)
		}
		ev := next(t, w)
		status, ok := ev.Object.(*metav1.Status)
		want := apierrors.NewResourceExpired("too old resource version: 2 (4)").ErrStatus
		if ev.Type != watch.Error || !ok || *status != want {
			t.Fatalf("%s %+v, want ERROR %+v", ev.Type, ev.Object, want)
		}
	})

	t.Run("ahead of the store: Too large resource version after 3s", func(t *testing.T) {
		rest, _, _ := feedFixture(t, 1)
		w, err := rest.Watch(ctx, &metainternalversion.ListOptions{ResourceVersion: "100"})
		if err != nil {
			t.Fatal(err)
		}
		ev := next(t, w)
		if ev.Type != watch.Error || !storage.IsTooLargeResourceVersion(apierrors.FromObject(ev.Object)) {
			t.Fatalf("%s %+v, want a Too large resource version ERROR", ev.Type, ev.Object)
		}
	})

	t.Run("a bad resourceVersion is a 400", func(t *testing.T) {
		rest, _, _ := feedFixture(t, 1)
		if _, err := rest.Watch(ctx, &metainternalversion.ListOptions{ResourceVersion: "x"}); !apierrors.IsBadRequest(err) {
			t.Fatalf("err %v, want a BadRequest", err)
		}
	})
}

// versionOf is event's version at rev as capture stores it: the core/v1
// Event in the storage codec.
func versionOf(t *testing.T, event *core.Event, rev int64, now time.Time) history.Version {
	t.Helper()
	value, err := runtime.Encode(apiserver.Codecs.LegacyCodec(corev1.SchemeGroupVersion), event)
	if err != nil {
		t.Fatal(err)
	}
	return history.NewVersion(event, rev, value, now)
}
