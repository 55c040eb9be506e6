package history

import (
	"context"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"

	historyapi "github.com/eventapiserver/event-apiserver/pkg/apis/history"
	historyv1alpha1 "github.com/eventapiserver/event-apiserver/pkg/apis/history/v1alpha1"
	"github.com/eventapiserver/event-apiserver/pkg/fieldselectors"
	store "github.com/eventapiserver/event-apiserver/pkg/history"
)

// CountConfig bounds what one count may cost. The search work defines the
// flags of history's query limits; these are the counts' defaults until
// they are shared.
type CountConfig struct {
	// MaxWindow is the longest window (until - since) a count may span.
	MaxWindow time.Duration
	// Timeout bounds the database's work for one count; past it the
	// client gets kube-apiserver's 504 naming --history-query-timeout, as
	// a list's (Limits.Timeout, query).
	Timeout time.Duration
}

const (
	defaultCountWindow = 24 * time.Hour
	defaultBucket      = time.Hour
	defaultTop         = 10
	maxTop             = 100
	// maxBuckets bounds a status: a week of minutes would be 10080
	// buckets, each a list of counts.
	maxBuckets = 2000
)

func (c CountConfig) withDefaults() CountConfig {
	if c.MaxWindow <= 0 {
		c.MaxWindow = 31 * 24 * time.Hour
	}
	if c.Timeout <= 0 {
		c.Timeout = 30 * time.Second
	}
	return c
}

// groupByLabels are the labels a count groups by, spelled as eventrecords'
// field selectors spell them, and the column each reads.
var groupByLabels = map[string]store.Column{
	"reason":              store.ColumnReason,
	"type":                store.ColumnType,
	"regarding.kind":      store.ColumnRegardingKind,
	"metadata.namespace":  store.ColumnNamespace,
	"reportingController": store.ColumnReportingController,
	"regarding.name":      store.ColumnRegardingName,
	"cluster":             store.ColumnCluster,
}

// CountREST answers EventRecordCounts (one namespace) or, with cluster,
// ClusterEventRecordCounts (all namespaces): create-only, nothing stored,
// as SubjectAccessReview's REST is (k8s.io/kubernetes
// pkg/registry/authorization/subjectaccessreview/rest.go).
type CountREST struct {
	counter    store.Counter
	authorizer authorizer.Authorizer
	// convertLabel is eventrecords' field label conversion, so that a
	// count's selector reads as a list's does.
	convertLabel func(label, value string) (string, string, error)
	cluster      bool
	config       CountConfig
	// records reads the cluster label as eventrecords do (the server's own
	// cluster stored as "") and, on a fleet's hub, authorizes the clusters
	// a count reads as a list of them is (authorizeClusters); nil while
	// history is off.
	records *REST
}

var (
	_ rest.Creater              = &CountREST{}
	_ rest.Scoper               = &CountREST{}
	_ rest.SingularNameProvider = &CountREST{}
	_ rest.Storage              = &CountREST{}
)

// NewCountREST serves counts from counter, nil while history is off (each
// request then gets Off's 404). authz decides whether the requester may
// list the eventrecords a count reads; scheme converts eventrecords' field
// labels.
func NewCountREST(counter store.Counter, records *REST, authz authorizer.Authorizer, scheme *runtime.Scheme, cluster bool, config CountConfig) *CountREST {
	gvk := historyv1alpha1.SchemeGroupVersion.WithKind("EventRecord")
	return &CountREST{
		counter:    counter,
		authorizer: authz,
		convertLabel: func(label, value string) (string, string, error) {
			return scheme.ConvertFieldLabel(gvk, label, value)
		},
		cluster: cluster,
		config:  config.withDefaults(),
		records: records,
	}
}

func (r *CountREST) New() runtime.Object {
	if r.cluster {
		return &historyapi.ClusterEventRecordCount{}
	}
	return &historyapi.EventRecordCount{}
}

func (r *CountREST) Destroy()              {}
func (r *CountREST) NamespaceScoped() bool { return !r.cluster }

func (r *CountREST) GetSingularName() string {
	if r.cluster {
		return "clustereventrecordcount"
	}
	return "eventrecordcount"
}

func (r *CountREST) Create(ctx context.Context, obj runtime.Object, createValidation rest.ValidateObjectFunc, _ *metav1.CreateOptions) (runtime.Object, error) {
	var spec *historyapi.EventRecordCountSpec
	var status *historyapi.EventRecordCountStatus
	switch o := obj.(type) {
	case *historyapi.EventRecordCount:
		spec, status = &o.Spec, &o.Status
	case *historyapi.ClusterEventRecordCount:
		spec, status = &o.Spec, &o.Status
	default:
		return nil, apierrors.NewBadRequest(fmt.Sprintf("not an EventRecordCount: %T", obj))
	}
	if r.counter == nil {
		return nil, errHistoryOff()
	}
	namespace := ""
	if !r.cluster {
		namespace = genericapirequest.NamespaceValue(ctx)
		if namespace == "" {
			return nil, apierrors.NewBadRequest("namespace is required")
		}
	}
	// Before anything reads the spec: whoever may not list the records
	// learns nothing from a count of them, not even that the selector
	// was well formed.
	if err := r.authorize(ctx, namespace); err != nil {
		return nil, err
	}
	if createValidation != nil {
		if err := createValidation(ctx, obj.DeepCopyObject()); err != nil {
			return nil, err
		}
	}
	q, until, err := r.countQuery(spec, namespace, time.Now())
	if err != nil {
		return nil, err
	}
	if r.records != nil {
		if err := r.records.authorizeClusters(ctx, q.Query); err != nil {
			return nil, err
		}
	}
	counts, err := query(ctx, Limits{Timeout: r.config.Timeout}, func(ctx context.Context) (store.Counts, error) { return r.counter.Count(ctx, q) })
	if err != nil {
		return nil, err
	}
	if r.records != nil {
		// The server's own cluster is stored as "": named as its records
		// name it.
		for i, col := range q.GroupBy {
			if col != store.ColumnCluster {
				continue
			}
			for _, g := range counts.Groups {
				g.Values[i] = r.records.clusterOf(store.Record{Version: store.Version{Cluster: g.Values[i]}})
			}
		}
	}
	*status = countStatus(q, until, counts)
	return obj, nil
}

// authorize asks the server's authorizer (delegated: a SubjectAccessReview
// to kube-apiserver) whether the requester may list eventrecords in
// namespace, across all namespaces for "", and answers as kube-apiserver's
// authorization filter does when not.
func (r *CountREST) authorize(ctx context.Context, namespace string) error {
	user, ok := genericapirequest.UserFrom(ctx)
	if !ok {
		return apierrors.NewBadRequest("no user in the request")
	}
	attrs := authorizer.AttributesRecord{
		User:            user,
		Verb:            "list",
		Namespace:       namespace,
		APIGroup:        historyv1alpha1.SchemeGroupVersion.Group,
		APIVersion:      historyv1alpha1.SchemeGroupVersion.Version,
		Resource:        "eventrecords",
		ResourceRequest: true,
	}
	decision, reason, err := r.authorizer.Authorize(ctx, attrs)
	if decision == authorizer.DecisionAllow {
		return nil
	}
	if err != nil && reason == "" {
		reason = err.Error()
	}
	return responsewriters.ForbiddenStatusError(attrs, reason)
}

// countQuery reads a spec into the store's query, refusing with 422, each
// problem at its field, what the store cannot count exactly.
//
// Without until, the window's end is now but the query's stays open, as a
// list's does: a version last seen after now (a recorder's clock ahead of
// ours) is counted as the list returns it, in a bucket after until
// (countStatus).
func (r *CountREST) countQuery(spec *historyapi.EventRecordCountSpec, namespace string, now time.Time) (store.CountQuery, time.Time, error) {
	var q store.CountQuery
	var errs field.ErrorList
	specPath := field.NewPath("spec")

	selectorPath := specPath.Child("fieldSelector")
	// The set forms (in, notin) as a list's query takes them.
	selector, err := fieldselectors.ParseSelector(historyv1alpha1.SchemeGroupVersion.WithResource("eventrecords"), spec.FieldSelector)
	if err == nil {
		selector, err = selector.Transform(r.convertLabel)
	}
	var p parsed
	if err == nil {
		if r.records != nil {
			p, err = r.records.parse(selector, now)
		} else {
			p, err = parseFieldSelector(selector, now)
		}
		if status, ok := err.(apierrors.APIStatus); ok {
			err = fmt.Errorf("%s", status.Status().Message)
		}
	}
	if err != nil {
		errs = append(errs, field.Invalid(selectorPath, spec.FieldSelector, err.Error()))
	} else {
		// The reader matches every requirement on the Event again; the
		// store alone must answer a count's, so each needs its columns.
		for _, req := range fieldselectors.Read(p.field) {
			for _, plain := range fieldselectors.PlainFields(req.Field) {
				if _, ok := store.ColumnFor(plain); !ok {
					errs = append(errs, field.Invalid(selectorPath, spec.FieldSelector, fmt.Sprintf(
						"%s: a count reads only the fields history keeps in columns (regarding.uid, regarding.name, regarding.namespace, regarding.kind, related.uid, related.name, reason, type, reportingController, metadata.namespace, metadata.name); list eventrecords for the others",
						req.Field)))
					break
				}
			}
		}
		for _, c := range p.query.Conditions {
			if c.Contains {
				// A text search counts the versions whose note holds the
				// term; those stored before the note column was added
				// hold none to search (history.CountQuery).
				continue
			}
			for _, col := range c.Columns {
				if def, ok := store.LookupColumn(col); ok && def.NullBefore() {
					errs = append(errs, field.Invalid(selectorPath, spec.FieldSelector, fmt.Sprintf(
						"%s: versions stored before history kept this field have no value to count by", def.Field)))
				}
			}
		}
		q.Query = p.query
	}
	until := q.Until
	if until.IsZero() {
		until = now
	}
	if q.Since.IsZero() {
		q.Since = until.Add(-defaultCountWindow)
	}
	if window := until.Sub(q.Since); window > r.config.MaxWindow {
		errs = append(errs, field.Invalid(selectorPath, spec.FieldSelector, fmt.Sprintf(
			"the window from since to until spans %s, more than the %s a count may span (--history-max-query-window)", window, r.config.MaxWindow)))
	}
	if namespace != "" {
		q.Conditions = append(q.Conditions, store.Condition{Columns: []store.Column{store.ColumnNamespace}, Value: namespace})
	}

	groupPath := specPath.Child("groupBy")
	if n := len(spec.GroupBy); n < 1 || n > 2 {
		errs = append(errs, field.Invalid(groupPath, spec.GroupBy, "name one or two fields to group by"))
	}
	for i, label := range spec.GroupBy {
		col, ok := groupByLabels[label]
		switch {
		case !ok:
			errs = append(errs, field.NotSupported(groupPath.Index(i), label, sortedKeys(groupByLabels)))
		case slices.Contains(q.GroupBy, col):
			errs = append(errs, field.Duplicate(groupPath.Index(i), label))
		default:
			q.GroupBy = append(q.GroupBy, col)
		}
	}

	q.Bucket = spec.BucketSize.Duration
	if q.Bucket == 0 {
		q.Bucket = defaultBucket
	}
	bucketPath := specPath.Child("bucketSize")
	if q.Bucket < time.Second {
		errs = append(errs, field.Invalid(bucketPath, spec.BucketSize.Duration.String(), "must be at least 1s"))
	} else if n := len(bucketStarts(q.Since, until, q.Bucket)); n > maxBuckets {
		errs = append(errs, field.Invalid(bucketPath, q.Bucket.String(), fmt.Sprintf(
			"the window makes %d buckets of this size, more than %d: choose a larger bucketSize or a shorter window", n, maxBuckets)))
	}

	q.Top = int(spec.Top)
	if q.Top == 0 {
		q.Top = defaultTop
	}
	if q.Top < 1 || q.Top > maxTop {
		errs = append(errs, field.Invalid(specPath.Child("top"), spec.Top, fmt.Sprintf("must be between 1 and %d", maxTop)))
	}
	if len(errs) > 0 {
		kind := "EventRecordCount"
		if r.cluster {
			kind = "ClusterEventRecordCount"
		}
		return q, until, apierrors.NewInvalid(schema.GroupKind{Group: historyapi.GroupName, Kind: kind}, "", errs)
	}
	return q, until, nil
}

// bucketStarts lists the start of every bucket [since, until) touches;
// buckets start at multiples of bucket since the Unix epoch (store.CountQuery).
func bucketStarts(since, until time.Time, bucket time.Duration) []time.Time {
	ns := since.UnixNano()
	first := ns - ns%bucket.Nanoseconds()
	if ns < 0 && ns%bucket.Nanoseconds() != 0 {
		first -= bucket.Nanoseconds()
	}
	var starts []time.Time
	for t := time.Unix(0, first).UTC(); t.Before(until); t = t.Add(bucket) {
		if len(starts) > maxBuckets {
			break
		}
		starts = append(starts, t)
	}
	return starts
}

// countStatus lays the store's counts out as the API answers them: every
// bucket from since to until, and any bucket after until that holds
// versions (countQuery), a count per group in each.
func countStatus(q store.CountQuery, until time.Time, counts store.Counts) historyapi.EventRecordCountStatus {
	status := historyapi.EventRecordCountStatus{
		Since: metav1.NewTime(q.Since),
		Until: metav1.NewTime(until),
		Total: counts.Total,
		Other: counts.Total,
	}
	end := until
	for _, g := range counts.Groups {
		status.Groups = append(status.Groups, historyapi.EventRecordCountGroup{Values: g.Values, Total: g.Total})
		status.Other -= g.Total
		for start := range g.Buckets {
			if !start.Before(end) {
				end = start.Add(q.Bucket)
			}
		}
	}
	for _, start := range bucketStarts(q.Since, end, q.Bucket) {
		b := historyapi.EventRecordCountBucket{Start: metav1.NewTime(start), Counts: make([]int64, len(counts.Groups))}
		for i, g := range counts.Groups {
			b.Counts[i] = g.Buckets[start]
		}
		status.Buckets = append(status.Buckets, b)
	}
	return status
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
