package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/eventapiserver/event-apiserver/cmd/kubectl-timeline/web"
	historyv1alpha1 "github.com/eventapiserver/event-apiserver/pkg/apis/history/v1alpha1"
	"github.com/eventapiserver/event-apiserver/pkg/timeline"
)

// The overview's answers: every number is the server's (the counts API,
// eventrecordcounts) or a bounded list's, read with the user's identity;
// the plugin counts no records for a chart.

// maxCountGroups is the counts API's largest top: a bucket's total is the
// sum of its types' counts, of which there are far fewer.
const maxCountGroups = 100

// count asks the server for one count in scope: EventRecordCount in a
// namespace, ClusterEventRecordCount across them.
func (b *webBackend) count(ctx context.Context, scope web.Scope, spec historyv1alpha1.EventRecordCountSpec) (string, historyv1alpha1.EventRecordCountStatus, error) {
	if scope.All {
		got, err := b.history.ClusterEventRecordCounts().Create(ctx, &historyv1alpha1.ClusterEventRecordCount{Spec: spec}, metav1.CreateOptions{})
		if err != nil {
			return "", historyv1alpha1.EventRecordCountStatus{}, err
		}
		return "ClusterEventRecordCount", got.Status, nil
	}
	got, err := b.history.EventRecordCounts(scope.Namespace).Create(ctx, &historyv1alpha1.EventRecordCount{Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		return "", historyv1alpha1.EventRecordCountStatus{}, err
	}
	return "EventRecordCount", got.Status, nil
}

// countsUnavailable is historyUnavailable without the 403: a user who may
// not list the records sees the API's refusal, not an empty chart.
func countsUnavailable(err error, namespace string) (string, bool) {
	if apierrors.IsForbidden(err) {
		return "", false
	}
	return historyUnavailable(err, namespace)
}

func scopeNamespace(s web.Scope) string {
	if s.All {
		return ""
	}
	return s.Namespace
}

// windowSelector narrows to the scope's cluster, a search and the window,
// in eventrecords' field selector labels; the window last, as `kubectl
// timeline summary` writes it.
func windowSelector(scope web.Scope, search string, since, until time.Time, narrow ...fields.Selector) string {
	selectors := narrow
	if scope.Cluster != "" {
		selectors = append(selectors, fields.OneTermEqualSelector("cluster", scope.Cluster))
	}
	if search != "" {
		selectors = append(selectors, fields.OneTermEqualSelector("note.contains", search))
	}
	selectors = append(selectors, fields.OneTermEqualSelector("since", since.UTC().Format(time.RFC3339Nano)))
	if !until.IsZero() {
		selectors = append(selectors, fields.OneTermEqualSelector("until", until.UTC().Format(time.RFC3339Nano)))
	}
	return fields.AndSelectors(selectors...).String()
}

// Counts asks the server for the chart's counts by q.By and, since the API
// answers "other" for the whole window only, for the same records by type,
// whose sum is each bucket's total.
func (b *webBackend) Counts(ctx context.Context, q web.CountsQuery) (*web.Counts, error) {
	spec := historyv1alpha1.EventRecordCountSpec{
		FieldSelector: windowSelector(q.Scope, q.Search, q.Since, q.Until),
		GroupBy:       []string{q.By},
		BucketSize:    metav1.Duration{Duration: q.Bucket},
		Top:           q.Top,
	}
	kind, status, err := b.count(ctx, q.Scope, spec)
	if reason, ok := countsUnavailable(err, scopeNamespace(q.Scope)); ok {
		return &web.Counts{History: web.Availability{Reason: reason}, Groups: []web.CountGroup{}, Buckets: []web.CountBucket{}}, nil
	} else if err != nil {
		return nil, err
	}
	out := &web.Counts{
		History: web.Availability{Available: true},
		Kind:    kind, FieldSelector: spec.FieldSelector, By: q.By, Top: q.Top, Bucket: q.Bucket.Milliseconds(),
		Since: status.Since.UnixMilli(), Until: status.Until.UnixMilli(), Total: status.Total, Other: status.Other,
		Groups: make([]web.CountGroup, len(status.Groups)), Buckets: make([]web.CountBucket, len(status.Buckets)),
	}
	// metav1.Time keeps seconds: the window is the one asked for.
	out.Since = q.Since.UnixMilli()
	if !q.Until.IsZero() {
		out.Until = q.Until.UnixMilli()
	}
	for i, g := range status.Groups {
		out.Groups[i] = web.CountGroup{Value: g.Values[0], Total: g.Total}
	}
	for i, bucket := range status.Buckets {
		out.Buckets[i] = web.CountBucket{Start: bucket.Start.UnixMilli(), Counts: bucket.Counts}
	}
	if status.Other == 0 {
		return out, nil
	}
	totals := spec
	totals.GroupBy, totals.Top = []string{"type"}, maxCountGroups
	_, byType, err := b.count(ctx, q.Scope, totals)
	if err != nil {
		return nil, err
	}
	sums := map[int64]int64{}
	for _, bucket := range byType.Buckets {
		for _, n := range bucket.Counts {
			sums[bucket.Start.UnixMilli()] += n
		}
	}
	for i := range out.Buckets {
		var grouped int64
		for _, n := range out.Buckets[i].Counts {
			grouped += n
		}
		// Records written between the two counts could make it less.
		out.Buckets[i].Other = max(0, sums[out.Buckets[i].Start]-grouped)
	}
	return out, nil
}

// errEnough ends a drill-down's list at web.MaxObjectRecords.
var errEnough = errors.New("enough records read")

// Objects lists the records behind one segment of a chart, at most
// web.MaxObjectRecords, and counts them per object; with Live, the live
// Events of the scope, where history is not installed.
func (b *webBackend) Objects(ctx context.Context, q web.ObjectsQuery) (*web.Objects, error) {
	agg := objectCounter{objects: map[string]*objectCount{}}
	out := &web.Objects{}
	limit := b.chunkSize
	if limit <= 0 || limit > web.MaxObjectRecords {
		limit = web.MaxObjectRecords
	}
	namespace := scopeNamespace(q.Scope)
	var err error
	if q.Live {
		opts := metav1.ListOptions{Limit: limit}
		_, err = listPages(ctx, "events", opts, b.events.Events(namespace).List, func(list *corev1.EventList) error {
			for i := range list.Items {
				r, err := timeline.LiveRecord(&list.Items[i])
				if err != nil {
					return fmt.Errorf("event %s/%s: %w", list.Items[i].Namespace, list.Items[i].Name, err)
				}
				agg.add(&r)
			}
			return agg.enough(list.GetContinue(), &out.Truncated)
		})
	} else {
		var narrow []fields.Selector
		switch {
		case q.Any:
		case q.Other:
			for _, v := range q.Except {
				narrow = append(narrow, fields.OneTermNotEqualSelector(q.By, v))
			}
		default:
			narrow = append(narrow, fields.OneTermEqualSelector(q.By, q.Value))
		}
		out.FieldSelector = windowSelector(q.Scope, q.Search, q.Since, q.Until, narrow...)
		opts := metav1.ListOptions{FieldSelector: out.FieldSelector, Limit: limit}
		_, err = listPages(ctx, "eventrecords", opts, b.history.EventRecords(namespace).List, func(list *historyv1alpha1.EventRecordList) error {
			for i := range list.Items {
				agg.add(&list.Items[i])
			}
			return agg.enough(list.GetContinue(), &out.Truncated)
		})
	}
	if err != nil && !errors.Is(err, errEnough) {
		return nil, err
	}
	out.Records = agg.records
	out.Objects, out.ObjectsTruncated = agg.sorted(web.MaxObjects)
	return out, nil
}

// objectCounter counts records per object (cluster, namespace, kind, name).
type objectCounter struct {
	objects map[string]*objectCount
	records int
}

type objectCount struct {
	web.ObjectCounts
	uids map[string]bool
}

func (c *objectCounter) add(r *historyv1alpha1.EventRecord) {
	c.records++
	reg := &r.Event.Regarding
	namespace := reg.Namespace
	if namespace == "" {
		namespace = r.Namespace
	}
	key := r.Cluster + "\x00" + namespace + "\x00" + reg.Kind + "\x00" + reg.Name
	o, ok := c.objects[key]
	if !ok {
		o = &objectCount{ObjectCounts: web.ObjectCounts{Kind: reg.Kind, Namespace: namespace, Name: reg.Name, Cluster: r.Cluster}, uids: map[string]bool{}}
		c.objects[key] = o
	}
	o.Records++
	if r.Event.Type == corev1.EventTypeWarning {
		o.Warnings++
	}
	if reg.UID != "" && len(o.uids) < web.MaxObjects {
		o.uids[string(reg.UID)] = true
	}
	if last := r.LastSeen.UnixMilli(); last >= o.Last {
		o.Last = last
		o.APIVersion = reg.APIVersion
	}
}

// enough stops the list at web.MaxObjectRecords, saying whether records
// were left unread.
func (c *objectCounter) enough(next string, truncated *bool) error {
	if c.records >= web.MaxObjectRecords && next != "" {
		*truncated = true
		return errEnough
	}
	return nil
}

// sorted are the objects with the most records first, at most n.
func (c *objectCounter) sorted(n int) ([]web.ObjectCounts, bool) {
	out := make([]web.ObjectCounts, 0, len(c.objects))
	for _, o := range c.objects {
		o.UIDs = len(o.uids)
		out = append(out, o.ObjectCounts)
	}
	slices.SortFunc(out, func(a, b web.ObjectCounts) int {
		if a.Records != b.Records {
			return b.Records - a.Records
		}
		if a.Last != b.Last {
			return cmp.Compare(b.Last, a.Last)
		}
		return cmp.Compare(a.Namespace+"/"+a.Kind+"/"+a.Name, b.Namespace+"/"+b.Kind+"/"+b.Name)
	})
	if len(out) > n {
		return out[:n], true
	}
	return out, false
}

// Clusters lists the clusters of the scope's records since then, from
// counts by cluster: on a single cluster's server its own name. Where the
// user may not count across clusters (a fleet hub's reader of some
// clusters only) or history is not installed, Reason says why.
func (b *webBackend) Clusters(ctx context.Context, scope web.Scope, since time.Time) (*web.Clusters, error) {
	spec := historyv1alpha1.EventRecordCountSpec{
		FieldSelector: windowSelector(scope, "", since, time.Time{}),
		GroupBy:       []string{"cluster"},
		// Days: the API's longest window makes 32 buckets.
		BucketSize: metav1.Duration{Duration: 24 * time.Hour},
		Top:        maxCountGroups,
	}
	_, status, err := b.count(ctx, scope, spec)
	if err != nil {
		if apierrors.IsForbidden(err) {
			return &web.Clusters{Reason: err.Error(), Names: []string{}}, nil
		}
		if reason, ok := historyUnavailable(err, scopeNamespace(scope)); ok {
			return &web.Clusters{Reason: reason, Names: []string{}}, nil
		}
		return nil, err
	}
	out := &web.Clusters{Available: true, Names: []string{}}
	for _, g := range status.Groups {
		out.Names = append(out.Names, g.Values[0])
	}
	slices.Sort(out.Names)
	if status.Other > 0 {
		out.Reason = fmt.Sprintf("more than %d clusters: the %d with the most Events are listed", maxCountGroups, maxCountGroups)
	}
	return out, nil
}
