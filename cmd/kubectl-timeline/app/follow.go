package app

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	historyv1alpha1 "github.com/eventapiserver/event-apiserver/pkg/apis/history/v1alpha1"
	"github.com/eventapiserver/event-apiserver/pkg/timeline"
)

// A follower delivers the object's Event versions written after a list's
// resourceVersion, in the order they were written, until ctx ends. Today
// the live Events API is followed (a watch on core/v1 Events); when
// eventrecords can be watched, a history follower resuming from a history
// cursor fits here unchanged, and -w then also sees deletions and survives
// a restart without a gap.
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
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-w.Done():
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("watching events stopped")
		case e, ok := <-w.ResultChan():
			if !ok {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("watching events stopped")
			}
			switch e.Type {
			case watch.Added, watch.Modified:
				event, ok := e.Object.(*corev1.Event)
				if !ok {
					continue
				}
				r, err := timeline.LiveRecord(event)
				if err != nil {
					return fmt.Errorf("event %s/%s: %w", event.Namespace, event.Name, err)
				}
				if err := emit(r); err != nil {
					return err
				}
			case watch.Error:
				// The RetryWatcher gives up only on errors it cannot
				// resume past, such as 410 Gone.
				return apierrors.FromObject(e.Object)
			}
			// Deleted: an Event deleted or expired is not news, as
			// `kubectl events -w` does not print it; history keeps it.
		}
	}
}
