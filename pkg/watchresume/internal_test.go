package watchresume

import (
	"net/http"
	"testing"

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
