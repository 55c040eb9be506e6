package storetest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/eventapiserver/event-apiserver/pkg/history"
)

// Legacy is the version the stores' migration tests put in a database of
// an older schema, with that schema's own INSERT (LegacyInsert).
var Legacy = Version("a", 1, "p", 1)

// LegacyInsert stores Legacy in table in every schema before the feed; ph
// spells the n-th placeholder.
func LegacyInsert(table string, ph func(n int) string) (string, []any) {
	holders := make([]string, 16)
	for i := range holders {
		holders[i] = ph(i + 1)
	}
	a := Legacy
	return `INSERT INTO ` + table + ` (uid, revision, namespace, name, regarding_uid, regarding_name, regarding_namespace,
		regarding_kind, related_uid, related_name, reason, type, reporting_controller, last_seen, observed_at, object)
		VALUES (` + strings.Join(holders, ", ") + `)`, []any{a.UID, a.Revision, a.Namespace, a.Name, a.RegardingUID, a.RegardingName,
			a.RegardingNamespace, a.RegardingKind, a.RelatedUID, a.RelatedName, a.Reason, a.Type, a.ReportingController,
			a.LastSeen.UnixNano(), a.ObservedAt.UnixNano(), a.Object}
}

// Migrated checks a store migrated from a database that held Legacy: it
// takes writes idempotently, Legacy stays at the feed's origin (in lists,
// never a change) while a new version is fed, a text search keeps it for
// the reader, and the store is at known.
func Migrated(t *testing.T, s history.Store, known int) {
	t.Helper()
	ctx := context.Background()
	batch := history.Batch{Versions: []history.Version{Legacy, Version("b", 2, "p", 2)}}
	for range 2 {
		if err := s.Write(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.List(ctx, history.Query{})
	if err != nil || len(got) != 2 {
		t.Fatalf("listed %d (%v), want 2", len(got), err)
	}
	// b is new: in the feed. a was stored before it: at the origin.
	if got[0].UID != "b" || got[0].Position <= history.FeedOrigin || got[1].Position != history.FeedOrigin {
		t.Errorf("positions after migration: %s at %d, %s at %d", got[0].UID, got[0].Position, got[1].UID, got[1].Position)
	}
	// Stored before the cluster column: the server's own cluster's.
	own, err := s.List(ctx, history.Query{Conditions: []history.Condition{{Columns: []history.Column{history.ColumnCluster}, Value: ""}}})
	if err != nil || len(own) != 2 || got[1].Cluster != "" {
		t.Errorf("the server's own cluster after migration: %d versions (%v), legacy's cluster %q; want 2 and \"\"", len(own), err, got[1].Cluster)
	}
	changes, err := s.Changes(ctx, history.ChangeQuery{After: history.FeedOrigin, Through: got[0].Position})
	if err != nil || len(changes) != 1 || changes[0].UID != "b" {
		t.Errorf("feed after migration: %v (%v), want b only", changes, err)
	}
	// A text search keeps Legacy, whose note the store never read (NULL),
	// for the reader to match on its Event; b's empty note holds no term.
	search := history.Condition{Columns: []history.Column{history.ColumnNote}, Value: "anything", Contains: true}
	if found, err := s.List(ctx, history.Query{Conditions: []history.Condition{search}}); err != nil || len(found) != 1 || found[0].UID != "a" {
		t.Errorf("search after migration: %d records (%v), want a only", len(found), err)
	}
	// The hourly counts' migration counted Legacy, stored before them, and
	// that of the hourly counts of all namespaces summed those; b is
	// counted by their trigger, once however often it is written. The
	// window is the hour, whole, of all namespaces: the hourly counts of
	// all namespaces alone answer it.
	hour := history.CountQuery{Query: history.Query{Since: Base, Until: Base.Add(time.Hour)},
		GroupBy: []history.Column{history.ColumnReason}, Bucket: time.Hour, Top: 1}
	if c, err := s.(history.Counter).Count(ctx, hour); err != nil || c.Total != 2 || len(c.Groups) != 1 || c.Groups[0].Buckets[Base] != 2 {
		t.Errorf("count after migration: %+v (%v), want 2 in the hour from %s", c, err, Base)
	}
	// A count reads no Event: Legacy, which a search keeps for the reader,
	// holds no note to count (history.CountQuery).
	hour.Conditions = []history.Condition{search}
	if c, err := s.(history.Counter).Count(ctx, hour); err != nil || c.Total != 0 {
		t.Errorf("count of a search after migration: %+v (%v), want none", c, err)
	}
	if st := s.Schema(); st.Version != known || st.WriteError() != nil {
		t.Errorf("schema after migration: %+v, want version %d", st, known)
	}
}
