package watchresume

import (
	"errors"
	"net/http"
	"slices"
	"testing"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/registry/generic"

	"github.com/eventapiserver/event-apiserver/pkg/apis/core"
	"github.com/eventapiserver/event-apiserver/pkg/etcdhealth"
)

func TestIsUndecorated(t *testing.T) {
	if !isUndecorated(generic.UndecoratedStorage) {
		t.Error("UndecoratedStorage not recognised")
	}
	if isUndecorated(StorageWithCacher(generic.NewRawStorage, etcdhealth.NewGate().Storage)) {
		t.Error("StorageWithCacher taken for UndecoratedStorage")
	}
}

// TestCacherAnswer pins the shapes Storage.Watch tells apart.
func TestCacherAnswer(t *testing.T) {
	gone := watch.Event{Type: watch.Error, Object: &metav1.Status{Code: http.StatusGone, Reason: metav1.StatusReasonExpired}}
	tests := []struct {
		name   string
		w      func() watch.Interface
		taken  bool
		isGone bool
	}{
		{name: "errWatcher with 410", w: func() watch.Interface { return replayed(gone) }, taken: true, isGone: true},
		{name: "errWatcher with 500", w: func() watch.Interface {
			return replayed(watch.Event{Type: watch.Error, Object: &metav1.Status{Code: 500}})
		}, taken: true},
		{name: "serving watcher with a buffered event", w: func() watch.Interface {
			fw := watch.NewFakeWithChanSize(10, false)
			fw.Add(&core.Event{})
			return fw
		}},
		{name: "immediately closed watcher", w: func() watch.Interface {
			fw := watch.NewFakeWithChanSize(0, false)
			fw.Stop()
			return fw
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := tc.w()
			e, taken := cacherAnswer(w)
			if taken != tc.taken {
				t.Fatalf("taken = %v, want %v", taken, tc.taken)
			}
			if taken && isGone(e) != tc.isGone {
				t.Errorf("isGone = %v, want %v", isGone(e), tc.isGone)
			}
			if !taken && tc.name == "serving watcher with a buffered event" && len(w.ResultChan()) != 1 {
				t.Error("an event of a serving watcher was consumed")
			}
		})
	}
}

// replayed is an errWatcher look-alike: capacity one, one event, closed.
func replayed(e watch.Event) watch.Interface {
	ch := make(chan watch.Event, 1)
	ch <- e
	close(ch)
	return closedWatcher(ch)
}

type closedWatcher chan watch.Event

func (w closedWatcher) ResultChan() <-chan watch.Event { return w }
func (w closedWatcher) Stop()                          {}

// TestFromEtcd: a watch served from etcd's history ends, without an Error,
// where the etcd3 store reports an etcd that could not serve it; its other
// errors reach the client; bookmarks only where asked for.
func TestFromEtcd(t *testing.T) {
	added := watch.Event{Type: watch.Added, Object: &core.Event{}}
	bookmark := watch.Event{Type: watch.Bookmark, Object: &core.Event{}}
	// As the etcd3 store words them (storage/etcd3 watcher.go: an error that
	// is no APIStatus becomes NewInternalError).
	internal := func(err error) watch.Event {
		status := apierrors.NewInternalError(err).Status()
		return watch.Event{Type: watch.Error, Object: &status}
	}
	tests := []struct {
		name      string
		bookmarks bool
		events    []watch.Event
		want      []watch.EventType
	}{
		{"no leader ends it", true, []watch.Event{added, internal(rpctypes.ErrNoLeader), added}, []watch.EventType{watch.Added}},
		{"leader changed ends it", true, []watch.Event{internal(rpctypes.ErrLeaderChanged)}, nil},
		{"gRPC Unavailable ends it", true, []watch.Event{internal(status.Error(codes.Unavailable, "connection refused"))}, nil},
		{"another 500 reaches the client", true, []watch.Event{added, internal(errors.New("unable to decode an event"))}, []watch.EventType{watch.Added, watch.Error}},
		{"a 410 reaches the client", true, []watch.Event{{Type: watch.Error, Object: &metav1.Status{Code: http.StatusGone}}}, []watch.EventType{watch.Error}},
		{"bookmarks where asked for", true, []watch.Event{bookmark, added}, []watch.EventType{watch.Bookmark, watch.Added}},
		{"no bookmarks otherwise", false, []watch.Event{bookmark, added}, []watch.EventType{watch.Added}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := watch.NewFakeWithChanSize(len(tc.events), false)
			for _, e := range tc.events {
				src.Action(e.Type, e.Object)
			}
			src.Stop()
			w := forwardUntil(src, fromEtcd(tc.bookmarks))
			var got []watch.EventType
			for e := range w.ResultChan() {
				got = append(got, e.Type)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
