package app

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/validation"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	historyv1alpha1 "github.com/eventapiserver/event-apiserver/pkg/apis/history/v1alpha1"
	historyclient "github.com/eventapiserver/event-apiserver/pkg/generated/clientset/versioned/typed/history/v1alpha1"
	"github.com/eventapiserver/event-apiserver/pkg/timeline"
)

// maxPages bounds a list that never ends: a server whose continue token
// does not advance must not keep the plugin reading forever.
const maxPages = 100000

// sources lists the object's Events from the live Events API and from
// history, with the same object, namespace and filters.
type sources struct {
	events    corev1client.EventInterface
	history   historyclient.EventRecordInterface
	namespace string
	object    Object
	// uids, where set, names the objects by uid in place of object: the
	// objects the page's owner tree found, whose own incarnations are not
	// the story. The live API takes one (kube-apiserver has no set
	// selectors), history up to maxSetValues.
	uids   []string
	filter timeline.Filter
	// cluster, where set, narrows history to one cluster's records
	// (--cluster); the live Events are then not read.
	cluster   string
	chunkSize int64
}

// maxSetValues is the most values event-apiserver takes in one `in` set.
const maxSetValues = 16

// typeSelector narrows a list to the one type asked for; with both types
// (or none) every Event is listed.
func (s *sources) typeSelector() []fields.Selector {
	if len(s.filter.Types) == 1 {
		return []fields.Selector{fields.OneTermEqualSelector("type", s.filter.Types[0])}
	}
	return nil
}

// liveSelector is what `kubectl events --for` sends, without the
// apiVersion: Events reported about an older version of the kind belong to
// the object's story too.
func (s *sources) liveSelector() string {
	object := []fields.Selector{
		fields.OneTermEqualSelector("involvedObject.kind", s.object.Kind),
		fields.OneTermEqualSelector("involvedObject.name", s.object.Name),
	}
	if len(s.uids) > 0 {
		object = []fields.Selector{fields.OneTermEqualSelector("involvedObject.uid", s.uids[0])}
	}
	return fields.AndSelectors(append(object, s.typeSelector()...)...).String()
}

// historySelector is the same query in events.k8s.io/v1's labels, which
// eventrecords take, plus the window: history applies `since` to the same
// last-seen time the timeline sorts by.
func (s *sources) historySelector() string {
	selectors := append([]fields.Selector{
		fields.OneTermEqualSelector("regarding.kind", s.object.Kind),
		fields.OneTermEqualSelector("regarding.name", s.object.Name),
	}, s.typeSelector()...)
	prefix := ""
	if len(s.uids) > 0 {
		// fields.Selector has no set form; the server reads this one
		// (pkg/fieldselectors/setselector.go).
		selectors = s.typeSelector()
		prefix = "regarding.uid in (" + strings.Join(s.uids, ",") + ")"
	}
	if !s.filter.Since.IsZero() {
		selectors = append(selectors, fields.OneTermEqualSelector("since", s.filter.Since.UTC().Format(time.RFC3339Nano)))
	}
	if s.cluster != "" {
		selectors = append(selectors, clusterSelector(s.cluster))
	}
	if s.filter.Search != "" {
		// The live Events API has no text search: those are matched here
		// (timeline.Filter.Match), the same way.
		selectors = append(selectors, fields.OneTermEqualSelector("note.contains", s.filter.Search))
	}
	rest := fields.AndSelectors(selectors...).String()
	switch {
	case prefix == "":
		return rest
	case rest == "":
		return prefix
	}
	return prefix + "," + rest
}

// clusterSelector is history's field selector for one cluster's records.
func clusterSelector(name string) fields.Selector {
	return fields.OneTermEqualSelector("cluster", name)
}

// validCluster refuses, before any request, a name no cluster has: the
// server names clusters by DNS labels (--history-cluster-name and the
// fleet's members) and would answer such a selector with nothing.
func validCluster(name string) error {
	if msgs := validation.IsDNS1123Label(name); len(msgs) > 0 {
		return fmt.Errorf("--cluster %q: %s", name, strings.Join(msgs, "; "))
	}
	return nil
}

// listLive lists the live Events page by page and returns the
// resourceVersion of the list, from which a watch continues.
func (s *sources) listLive(ctx context.Context, add func(historyv1alpha1.EventRecord)) (string, error) {
	opts := metav1.ListOptions{FieldSelector: s.liveSelector(), Limit: s.chunkSize}
	return listPages(ctx, "events", opts, s.events.List, func(list *corev1.EventList) error {
		for i := range list.Items {
			r, err := timeline.LiveRecord(&list.Items[i])
			if err != nil {
				return fmt.Errorf("event %s/%s: %w", list.Items[i].Namespace, list.Items[i].Name, err)
			}
			add(r)
		}
		return nil
	})
}

// listHistory lists the object's records page by page and returns the
// list's resourceVersion, the history cursor a watch of the feed continues
// from. History holds every version of each Event; the timeline keeps the
// newest.
func (s *sources) listHistory(ctx context.Context, add func(historyv1alpha1.EventRecord)) (string, error) {
	opts := metav1.ListOptions{FieldSelector: s.historySelector(), Limit: s.chunkSize}
	return listPages(ctx, "eventrecords", opts, s.history.List, func(list *historyv1alpha1.EventRecordList) error {
		for i := range list.Items {
			add(list.Items[i])
		}
		return nil
	})
}

// listPages follows a list's continue tokens, handing each page to page,
// and returns the first page's resourceVersion: a continued list is a
// snapshot at it, from which a watch continues.
func listPages[L metav1.ListInterface](ctx context.Context, what string, opts metav1.ListOptions,
	list func(context.Context, metav1.ListOptions) (L, error), page func(L) error) (string, error) {
	resourceVersion := ""
	for pages := 0; ; pages++ {
		if pages == maxPages {
			return "", fmt.Errorf("listing %s: more than %d pages", what, maxPages)
		}
		l, err := list(ctx, opts)
		if err != nil {
			return "", err
		}
		if pages == 0 {
			resourceVersion = l.GetResourceVersion()
		}
		if err := page(l); err != nil {
			return "", err
		}
		if l.GetContinue() == "" {
			return resourceVersion, nil
		}
		opts.Continue = l.GetContinue()
	}
}

// historyUnavailable says, for an error listing history, why this server
// shows no history to this user, when that is the reason: the group is not
// served (404: --history=false, or a kube-apiserver in front without the
// group's APIService), the user may not read it (403), or its store is down
// (503). Other errors (a bad request, a timeout) are the command's failure.
func historyUnavailable(err error, namespace string) (string, bool) {
	switch {
	case err == nil:
		return "", false
	case apierrors.IsNotFound(err):
		// The server's message too: one with history off says how to
		// turn it on (registry/history.Off).
		return fmt.Sprintf("history is not installed on this server (it serves no %s eventrecords): %v", historyv1alpha1.SchemeGroupVersion, err), true
	case apierrors.IsForbidden(err):
		where := "in namespace " + namespace
		if namespace == "" {
			where = "across all namespaces"
		}
		return fmt.Sprintf("you may not list history %s (eventrecords.%s): %s", where, historyv1alpha1.GroupName, err), true
	case apierrors.IsServiceUnavailable(err):
		return fmt.Sprintf("history is unavailable: %v", err), true
	}
	return "", false
}
