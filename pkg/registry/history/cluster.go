package history

import (
	"context"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"

	historyapi "github.com/eventapiserver/event-apiserver/pkg/apis/history"
	historyv1alpha1 "github.com/eventapiserver/event-apiserver/pkg/apis/history/v1alpha1"
	store "github.com/eventapiserver/event-apiserver/pkg/history"
)

// parse is parseFieldSelector with the server's own cluster named: the
// store keeps its versions under "" (store.ColumnCluster), and a client
// names it as every record shows it, by r.cluster.
func (r *REST) parse(selector fields.Selector, now time.Time) (parsed, error) {
	p, err := parseFieldSelector(selector, now)
	if err != nil {
		return p, err
	}
	for i := range p.query.Conditions {
		c := &p.query.Conditions[i]
		if !slices.Equal(c.Columns, []store.Column{store.ColumnCluster}) {
			continue
		}
		// cluster= (no name) would select the server's own records by the
		// store's spelling; it names no cluster, so it matches none.
		own := func(v string) string {
			switch v {
			case r.cluster:
				return ""
			case "":
				return noCluster
			}
			return v
		}
		c.Value = own(c.Value)
		for j := range c.Values {
			c.Values[j] = own(c.Values[j])
		}
	}
	return p, nil
}

// noCluster is a value no cluster column holds: cluster names are DNS labels
// (--history-cluster-name, and the fleet's member names), which have no space.
const noCluster = " "

// clusterOf names the cluster of a stored version.
func (r *REST) clusterOf(row store.Record) string {
	if row.Cluster == "" {
		return r.cluster
	}
	return row.Cluster
}

// ClustersResource is the virtual resource of history.eventapiserver.io
// whose names are clusters: with FeedConfig.Clusters set (a fleet's hub), a
// person reads a cluster's records only with verb get on it, by name
// (resourceNames) or on all (a rule without resourceNames). It is served
// by nothing; RBAC, like any authorizer, does not need it to be.
const ClustersResource = "clusters"

// authorizeClusters refuses, with 403, a list or watch of clusters the
// requester may not read: one allowed every cluster passes; any other must
// select clusters it may read each of (cluster=b, cluster in (b,c)), so
// that no record, count or feed change of another cluster reaches it.
func (r *REST) authorizeClusters(ctx context.Context, q store.Query) error {
	if r.feed.Clusters == nil {
		return nil
	}
	if err := r.mayRead(ctx, ""); err == nil {
		return nil
	}
	for _, c := range q.Conditions {
		if c.Not || !slices.Equal(c.Columns, []store.Column{store.ColumnCluster}) {
			continue
		}
		// Conditions are ANDed: the records are among this one's clusters.
		values := c.Values
		if len(values) == 0 {
			values = []string{c.Value}
		}
		for _, v := range values {
			if v == noCluster {
				continue
			}
			if err := r.mayRead(ctx, r.clusterOf(store.Record{Version: store.Version{Cluster: v}})); err != nil {
				return err
			}
		}
		return nil
	}
	return forbidden(ctx, "", "select the clusters whose records you may read with the field selector cluster=<name> or cluster in (<names>)")
}

// mayRead asks whether the requester may read the records of cluster
// ("": of every cluster).
func (r *REST) mayRead(ctx context.Context, cluster string) error {
	user, ok := genericapirequest.UserFrom(ctx)
	if !ok {
		return apierrors.NewForbidden(historyapi.Resource(ClustersResource), cluster, fmt.Errorf("no user"))
	}
	decision, reason, err := r.feed.Clusters.Authorize(ctx, authorizer.AttributesRecord{
		User: user, Verb: "get", APIGroup: historyapi.GroupName, APIVersion: historyv1alpha1.SchemeGroupVersion.Version,
		Resource: ClustersResource, Name: cluster, ResourceRequest: true,
	})
	if decision == authorizer.DecisionAllow {
		return nil
	}
	if err != nil {
		reason = err.Error()
	}
	return forbidden(ctx, cluster, reason)
}

// forbidden is 403 as kube-apiserver words a refusal
// (k8s.io/apiserver endpoints/handlers/responsewriters.ForbiddenStatusError).
func forbidden(ctx context.Context, cluster, reason string) error {
	name := "unknown"
	if user, ok := genericapirequest.UserFrom(ctx); ok {
		name = user.GetName()
	}
	what := fmt.Sprintf("User %q cannot get resource %q in API group %q", name, ClustersResource, historyapi.GroupName)
	if cluster != "" {
		what = fmt.Sprintf("User %q cannot get %s %q in API group %q", name, ClustersResource, cluster, historyapi.GroupName)
	}
	if reason != "" {
		what += ": " + reason
	}
	return apierrors.NewForbidden(historyapi.Resource("eventrecords"), "", fmt.Errorf("%s", what))
}
