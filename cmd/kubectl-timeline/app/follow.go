package app

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	historyv1alpha1 "github.com/eventapiserver/event-apiserver/pkg/apis/history/v1alpha1"
	historyclient "github.com/eventapiserver/event-apiserver/pkg/generated/clientset/versioned/typed/history/v1alpha1"
	"github.com/eventapiserver/event-apiserver/pkg/timeline"
)

// A follower delivers the object's Event versions written after a list's
// resourceVersion, in the order they were written, until ctx ends. Where
// history is installed it follows history's feed (historyFollower), which
// also carries each Event's end; elsewhere the live Events API.
type follower interface {
	follow(ctx context.Context, resourceVersion string, emit func(historyv1alpha1.EventRecord) error) error
}

// liveFollower watches core/v1 Events, resuming after each closed watch
// from the last resourceVersion it saw (client-go's RetryWatcher), so a
// server's watch timeout does not end -w.
type liveFollower struct {
	events   corev1client.EventInterface
	selector string
}

func (f *liveFollower) follow(ctx context.Context, resourceVersion string, emit func(historyv1alpha1.EventRecord) error) error {
	w, err := watchtools.NewRetryWatcherWithContext(ctx, resourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.FieldSelector = f.selector
			// Bookmarks keep the resume point current while the object
			// is quiet, so a resumed watch does not start from a
			// resourceVersion etcd has compacted.
			opts.AllowWatchBookmarks = true
			return f.events.Watch(ctx, opts)
		},
	})
	if err != nil {
		return err
	}
	defer w.Stop()
	// Deleted is not passed on: an Event deleted or expired is not news,
	// as `kubectl events -w` does not print it; history keeps it.
	return drain(ctx, w, "events", func(obj runtime.Object) error {
		event, ok := obj.(*corev1.Event)
		if !ok {
			return nil
		}
		r, err := timeline.LiveRecord(event)
		if err != nil {
			return fmt.Errorf("event %s/%s: %w", event.Namespace, event.Name, err)
		}
		return emit(r)
	})
}

// historyFollower watches eventrecords, history's feed, from the cursor of
// the history list the timeline was printed from. Unlike a watch on
// Events, the feed carries each Event's end (an expiry or a delete, as a
// MODIFIED record with deletedAt), and a cursor stays valid for as long as
// history retains the changes after it: the RetryWatcher resumes each
// closed watch from the last resourceVersion it delivered, so versions
// written while it reconnects are delivered then, once each, in the order
// the store took them. Versions the live list already showed (the store
// captures them a moment after etcd has them) come again from the feed at
// the same Event resourceVersion, and the timeline drops them.
type historyFollower struct {
	history  historyclient.EventRecordInterface
	selector string
}

func (f *historyFollower) follow(ctx context.Context, resourceVersion string, emit func(historyv1alpha1.EventRecord) error) error {
	w, err := watchtools.NewRetryWatcherWithContext(ctx, resourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.FieldSelector = f.selector
			opts.AllowWatchBookmarks = true
			return f.history.Watch(ctx, opts)
		},
	})
	if err != nil {
		return err
	}
	defer w.Stop()
	return drain(ctx, w, "eventrecords", func(obj runtime.Object) error {
		r, ok := obj.(*historyv1alpha1.EventRecord)
		if !ok {
			return nil
		}
		return emit(*r)
	})
}

// drain hands each added or modified object of a RetryWatcher to emit
// until ctx ends; it fails when the watcher gives up (410 Gone).
func drain(ctx context.Context, w *watchtools.RetryWatcher, what string, emit func(runtime.Object) error) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-w.Done():
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("watching %s stopped", what)
		case e, ok := <-w.ResultChan():
			if !ok {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("watching %s stopped", what)
			}
			switch e.Type {
			case watch.Added, watch.Modified:
				if err := emit(e.Object); err != nil {
					return err
				}
			case watch.Error:
				// The RetryWatcher gives up only on errors it cannot
				// resume past, such as 410 Gone.
				return apierrors.FromObject(e.Object)
			}
		}
	}
}
