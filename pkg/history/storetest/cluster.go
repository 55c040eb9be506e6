package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/eventapiserver/event-apiserver/pkg/history"
)

// testCluster: the cluster column is stored, read back and matched with =,
// != and sets, in lists and the feed; "" is the server's own cluster; and a
// relist's Gone marks deleted only its own cluster's Events, whose
// revisions are another sequence than the other clusters'.
func testCluster(t *testing.T, s history.Store) {
	ctx := context.Background()
	clusters := []string{"", "b", "c"}
	writeColumn(t, s, clusters, func(v *history.Version, value string) { v.Cluster = value })
	cluster := []history.Column{history.ColumnCluster}
	checkConditions(t, s, []columnCase{
		{"equal", history.Condition{Columns: cluster, Value: "b"}, []int64{2}},
		{"own", history.Condition{Columns: cluster, Value: ""}, []int64{1}},
		{"not equal", history.Condition{Columns: cluster, Value: "b", Not: true}, []int64{3, 1}},
		{"in", history.Condition{Columns: cluster, Value: "b", Values: []string{"b", ""}}, []int64{2, 1}},
		{"notin", history.Condition{Columns: cluster, Value: "b", Values: []string{"b", "c"}, Not: true}, []int64{1}},
		{"unknown", history.Condition{Columns: cluster, Value: "d"}, nil},
	})
	for i, cluster := range clusters {
		r, err := s.Get(ctx, "ns", fmt.Sprint("ev-u", i), int64(i+1))
		if err != nil || r.Cluster != cluster {
			t.Fatalf("Get: cluster %q (%v), want %q", r.Cluster, err, cluster)
		}
	}
	// Cluster b relists at its revision 10 and has none of its Events left:
	// the Events of "" and c, at lower revisions, stay live.
	deletedAt := Base.Add(time.Hour)
	if err := s.Write(ctx, history.Batch{Gone: &history.Gone{Cluster: "b", Revision: 10, At: deletedAt}}); err != nil {
		t.Fatal(err)
	}
	records, err := s.List(ctx, history.Query{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range records {
		if deleted := r.DeletedAt != nil; deleted != (r.Cluster == "b") {
			t.Errorf("cluster %q: deleted %v after cluster b's relist", r.Cluster, deleted)
		}
	}
}
