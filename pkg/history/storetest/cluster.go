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
	var versions []history.Version
	for i, cluster := range clusters {
		v := Version(fmt.Sprint("u", i), int64(i+1), "p", i)
		v.Cluster = cluster
		versions = append(versions, v)
	}
	if err := s.Write(ctx, history.Batch{Versions: versions}); err != nil {
		t.Fatal(err)
	}
	cluster := []history.Column{history.ColumnCluster}
	for _, tc := range []struct {
		name      string
		condition history.Condition
		want      []int64
	}{
		{"equal", history.Condition{Columns: cluster, Value: "b"}, []int64{2}},
		{"own", history.Condition{Columns: cluster, Value: ""}, []int64{1}},
		{"not equal", history.Condition{Columns: cluster, Value: "b", Not: true}, []int64{3, 1}},
		{"in", history.Condition{Columns: cluster, Value: "b", Values: []string{"b", ""}}, []int64{2, 1}},
		{"notin", history.Condition{Columns: cluster, Value: "b", Values: []string{"b", "c"}, Not: true}, []int64{1}},
		{"unknown", history.Condition{Columns: cluster, Value: "d"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.List(ctx, history.Query{Conditions: []history.Condition{tc.condition}})
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(Revisions(got)) != fmt.Sprint(tc.want) {
				t.Fatalf("revisions = %v, want %v", Revisions(got), tc.want)
			}
			changes, err := s.Changes(ctx, history.ChangeQuery{Through: 1 << 40, Conditions: []history.Condition{tc.condition}})
			if err != nil || len(changes) != len(tc.want) {
				t.Fatalf("%d changes (%v), want %d", len(changes), err, len(tc.want))
			}
		})
	}
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
