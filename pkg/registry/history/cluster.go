package history

import (
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/fields"

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
