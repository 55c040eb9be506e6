// Package history serves history.eventapiserver.io/v1alpha1 EventRecords,
// read-only, from a history store: get, list and watch. A record's
// resourceVersion is the store's feed position of its last change, a
// list's is the position it was read as of, and a watch follows the feed
// from a position (package history's doc says why positions, not etcd
// revisions, and why nothing is missed or repeated).
package history

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/eventapiserver/event-apiserver/pkg/apis/core"
	historyapi "github.com/eventapiserver/event-apiserver/pkg/apis/history"
	"github.com/eventapiserver/event-apiserver/pkg/fieldselectors"
	store "github.com/eventapiserver/event-apiserver/pkg/history"
)

const (
	// maxPage bounds a response: a list without limit, or with a larger
	// one, gets this many records and a continue token.
	maxPage = 1000
	// scanFactor bounds the rows one request reads per record it may return
	// when filters the store cannot apply reject rows; the response then
	// ends early with a continue token, as a Kubernetes list may.
	scanFactor = 20
)

// REST is the read-only EventRecord storage.
type REST struct {
	tableConvertor
	store   store.Store
	decoder runtime.Decoder
	feed    FeedConfig
	hub     *feedHub
	limits  Limits
	// cluster names the server's own cluster (FeedConfig.Cluster).
	cluster string
}

var (
	_ rest.Getter               = &REST{}
	_ rest.Lister               = &REST{}
	_ rest.Scoper               = &REST{}
	_ rest.SingularNameProvider = &REST{}
	_ rest.Storage              = &REST{}
	_ rest.Watcher              = &REST{}
)

// NewREST serves the records of s; decoder reads the stored Events.
func NewREST(s store.Store, decoder runtime.Decoder, feed FeedConfig) *REST {
	feed = feed.withDefaults()
	return &REST{store: s, decoder: decoder, feed: feed, hub: newFeedHub(s, feed), cluster: feed.Cluster, limits: Limits{}.withDefaults()}
}

func (r *REST) New() runtime.Object     { return &historyapi.EventRecord{} }
func (r *REST) NewList() runtime.Object { return &historyapi.EventRecordList{} }
func (r *REST) Destroy()                {}
func (r *REST) NamespaceScoped() bool   { return true }
func (r *REST) GetSingularName() string { return "eventrecord" }

func (r *REST) Get(ctx context.Context, name string, _ *metav1.GetOptions) (runtime.Object, error) {
	notFound := apierrors.NewNotFound(historyapi.Resource("eventrecords"), name)
	i := strings.LastIndexByte(name, '.')
	if i <= 0 {
		return nil, notFound
	}
	revision, err := strconv.ParseInt(name[i+1:], 10, 64)
	if err != nil || revision <= 0 {
		return nil, notFound
	}
	namespace := genericapirequest.NamespaceValue(ctx)
	rec, err := r.store.Get(ctx, namespace, name[:i], revision)
	if errors.Is(err, store.ErrNotFound) {
		return nil, notFound
	}
	if err != nil {
		return nil, storeError(err)
	}
	if r.feed.Clusters != nil && r.mayRead(ctx, "") != nil && r.mayRead(ctx, r.clusterOf(rec)) != nil {
		// Not found, as if the record were not there: a 403 would tell
		// that a cluster one may not read holds a record of that name.
		return nil, notFound
	}
	return r.record(rec)
}

func (r *REST) List(ctx context.Context, options *metainternalversion.ListOptions) (runtime.Object, error) {
	if options == nil {
		options = &metainternalversion.ListOptions{}
	}
	now := time.Now()
	p, err := r.parse(options.FieldSelector, now)
	if err != nil {
		return nil, err
	}
	if err := r.authorizeClusters(ctx, p.query); err != nil {
		return nil, err
	}
	if p.search {
		if err := r.limits.CheckWindow(p.query.Since, p.query.Until, now); err != nil {
			return nil, err
		}
		p.query.MaxRows = r.limits.MaxRows
	}
	var through int64
	if p.query.After, through, err = decodeContinue(options.Continue); err != nil {
		return nil, err
	}
	if through == 0 {
		if through, err = r.listPosition(ctx, options); err != nil {
			return nil, err
		}
	} else if options.ResourceVersion != "" {
		// etcd3's GetList refuses both as well.
		return nil, apierrors.NewBadRequest("specifying resource version is not allowed when using continue")
	}
	p.query.Through = through
	if namespace := genericapirequest.NamespaceValue(ctx); namespace != "" {
		p.query.Conditions = append(p.query.Conditions, store.Condition{Columns: []store.Column{store.ColumnNamespace}, Value: namespace})
	}
	label := options.LabelSelector
	if label == nil {
		label = labels.Everything()
	}
	predicate := fieldselectors.Matcher(label, p.field)

	limit := int(options.Limit)
	if limit <= 0 || limit > maxPage {
		limit = maxPage
	}
	out := &historyapi.EventRecordList{ListMeta: metav1.ListMeta{ResourceVersion: strconv.FormatInt(through, 10)}}
	budget := scanFactor*limit + maxPage
	var last *store.Cursor
	ctx, cancel := r.limits.within(ctx)
	defer cancel()
	for budget > 0 {
		// One more than needed tells whether another page follows.
		p.query.Limit = min(limit-len(out.Items)+1, budget)
		rows, err := query(ctx, r.limits, func(ctx context.Context) ([]store.Record, error) { return r.store.List(ctx, p.query) })
		if err != nil {
			return nil, err
		}
		budget -= len(rows)
		for _, row := range rows {
			if len(out.Items) == limit {
				out.Continue = encodeContinue(*last, through)
				return out, nil
			}
			cursor := store.Cursor{LastSeen: row.LastSeen, Revision: row.Revision}
			last = &cursor
			rec, err := r.record(row)
			if err != nil {
				return nil, err
			}
			if ok, err := predicate.Matches(&rec.Event); err != nil || !ok || !matchOwn(p.query, &rec.Event) {
				continue
			}
			out.Items = append(out.Items, *rec)
		}
		if len(rows) < p.query.Limit {
			return out, nil
		}
		p.query.After = last
	}
	if last != nil {
		out.Continue = encodeContinue(*last, through)
	}
	return out, nil
}

// listPosition is the feed position a list reads as of, by its
// resourceVersion as kube-apiserver reads one (k8s.io/apiserver's
// storage.ListOptions semantics): "" and "0" the newest; a position with
// resourceVersionMatch NotOlderThan (or none) the newest once the store has
// reached it; with Exact that position, 410 if retention has removed a
// change after it.
func (r *REST) listPosition(ctx context.Context, options *metainternalversion.ListOptions) (int64, error) {
	state, err := r.store.Feed(ctx)
	if err != nil {
		return 0, storeError(err)
	}
	rv := options.ResourceVersion
	if rv == "" || rv == "0" {
		return state.Position, nil
	}
	requested, err := parsePosition(rv)
	if err != nil {
		return 0, err
	}
	if requested > state.Position {
		if state, err = r.waitFor(ctx, requested); err != nil {
			return 0, err
		}
	}
	if options.ResourceVersionMatch != metav1.ResourceVersionMatchExact {
		return state.Position, nil
	}
	if requested < state.Floor {
		// etcd3's answer to a list at a compacted revision.
		return 0, apierrors.NewResourceExpired("The resourceVersion for the provided list is too old.")
	}
	return requested, nil
}

// record turns a stored version into an EventRecord.
func (r *REST) record(row store.Record) (*historyapi.EventRecord, error) {
	obj, _, err := r.decoder.Decode(row.Object, nil, &core.Event{})
	event, ok := obj.(*core.Event)
	if err != nil || !ok {
		return nil, apierrors.NewInternalError(fmt.Errorf("history holds an undecodable Event %s/%s at revision %d: %v", row.Namespace, row.Name, row.Revision, err))
	}
	// etcd values carry no resourceVersion; the storage layer sets it from
	// the revision when it reads, and so does history.
	event.ResourceVersion = strconv.FormatInt(row.Revision, 10)
	rec := &historyapi.EventRecord{
		ObjectMeta: metav1.ObjectMeta{
			Name:              fmt.Sprintf("%s.%d", row.Name, row.Revision),
			Namespace:         row.Namespace,
			ResourceVersion:   strconv.FormatInt(max(row.Position, store.FeedOrigin), 10),
			CreationTimestamp: metav1.NewTime(row.ObservedAt),
		},
		Event:    *event,
		LastSeen: metav1.NewTime(row.LastSeen),
		Live:     row.DeletedAt == nil,
		Cluster:  r.clusterOf(row),
	}
	if row.DeletedAt != nil {
		t := metav1.NewTime(*row.DeletedAt)
		rec.DeletedAt = &t
	}
	return rec, nil
}

// storeError reports an unavailable store as 503, which clients retry: the
// store's failure is not the request's fault. A query past the request's
// own deadline is kube-apiserver's 504, which asks for no retry (query).
func storeError(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return apierrors.NewTimeoutError("history query did not finish in time", 0)
	}
	return apierrors.NewServiceUnavailable(fmt.Sprintf("history store: %v", err))
}
