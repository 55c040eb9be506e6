package sqlstore_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eventapiserver/event-apiserver/pkg/history"
	"github.com/eventapiserver/event-apiserver/pkg/history/sqlite"
)

func openSQLite(t *testing.T) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(filepath.Join(t.TempDir(), "history.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestQueryPlans: on SQLite, the selectors of "one object's history" read an index
// (the partial ones on related_* included, inside an OR too), never the
// whole table.
func TestQueryPlans(t *testing.T) {
	s := openSQLite(t)
	since := time.Now().Add(-168 * time.Hour)
	for _, tc := range []struct {
		name      string
		columns   []history.Column
		namespace string
		want      []string
	}{
		{"regarding.uid", []history.Column{history.ColumnRegardingUID}, "", []string{"versions_by_regarding_uid"}},
		{"related.uid", []history.Column{history.ColumnRelatedUID}, "", []string{"versions_by_related_uid"}},
		{"regardingOrRelated.uid", []history.Column{history.ColumnRegardingUID, history.ColumnRelatedUID}, "",
			[]string{"versions_by_regarding_uid", "versions_by_related_uid"}},
		{"regardingOrRelated.name", []history.Column{history.ColumnRegardingName, history.ColumnRelatedName}, "",
			[]string{"versions_by_regarding_name", "versions_by_related_name"}},
		{"regardingOrRelated.uid in a namespace", []history.Column{history.ColumnRegardingUID, history.ColumnRelatedUID}, "ns",
			[]string{"versions_by_regarding_uid", "versions_by_related_uid"}},
		{"regarding.uid in a namespace", []history.Column{history.ColumnRegardingUID}, "ns", []string{"versions_by_regarding_uid"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := history.Query{Conditions: []history.Condition{{Columns: tc.columns, Value: "x"}}, Since: since, Limit: 500}
			if tc.namespace != "" {
				q.Conditions = append(q.Conditions, history.Condition{Columns: []history.Column{history.ColumnNamespace}, Value: tc.namespace})
			}
			query, args, err := s.ListQuery(q)
			if err != nil {
				t.Fatal(err)
			}
			joined := queryPlan(t, s, query, args)
			for _, index := range tc.want {
				if !strings.Contains(joined, index) {
					t.Errorf("the plan does not use %s:\n%s", index, joined)
				}
			}
			if strings.Contains(joined, "SCAN v\n") || strings.HasSuffix(joined, "SCAN v") {
				t.Errorf("the plan scans the versions table:\n%s", joined)
			}
		})
	}
}

// TestChangesPlan: a feed read walks the versions and the ends by their
// position indexes (an end's versions by uid), never the whole versions
// table, with or without a filter.
func TestChangesPlan(t *testing.T) {
	s := openSQLite(t)
	for name, conditions := range map[string][]history.Condition{
		"all":           nil,
		"regarding.uid": {{Columns: []history.Column{history.ColumnRegardingUID}, Value: "x"}},
	} {
		t.Run(name, func(t *testing.T) {
			query, args, err := s.ChangesQuery(history.ChangeQuery{After: 5, Through: 100, Limit: 100, Conditions: conditions})
			if err != nil {
				t.Fatal(err)
			}
			joined := queryPlan(t, s, query, args)
			for _, index := range []string{"deletions_by_seq", "versions_by_uid"} {
				if !strings.Contains(joined, index) {
					t.Errorf("the plan does not use %s:\n%s", index, joined)
				}
			}
			if strings.Contains(joined, "SCAN v ") || strings.Contains(joined, "SCAN v\n") || strings.HasSuffix(joined, "SCAN v") {
				t.Errorf("the plan scans the versions table:\n%s", joined)
			}
		})
	}
}

// queryPlan is SQLite's plan for query, one step a line.
func queryPlan(t *testing.T, s *sqlite.Store, query string, args []any) string {
	t.Helper()
	plan, err := s.SQLitePlan(context.Background(), query, args)
	if err != nil {
		t.Fatal(err)
	}
	return plan
}

// TestSearchPlan: on SQLite, a text search reads the note's FTS5 index and
// the NULL notes' partial index, then the versions it found by rowid: never
// the window's rows, alone or beside the namespace's condition.
func TestSearchPlan(t *testing.T) {
	s := openSQLite(t)
	search := history.Condition{Columns: []history.Column{history.ColumnNote}, Value: "x509", Contains: true}
	for name, conditions := range map[string][]history.Condition{
		"alone":        {search},
		"in namespace": {search, {Columns: []history.Column{history.ColumnNamespace}, Value: "ns"}},
		"with reason":  {search, {Columns: []history.Column{history.ColumnReason}, Value: "BackOff"}},
	} {
		t.Run(name, func(t *testing.T) {
			query, args, err := s.ListQuery(history.Query{Conditions: conditions, Since: time.Now().Add(-168 * time.Hour), Limit: 500})
			if err != nil {
				t.Fatal(err)
			}
			joined := queryPlan(t, s, query, args)
			for _, want := range []string{"VIRTUAL TABLE INDEX", "versions_by_null_note", "INTEGER PRIMARY KEY (rowid=?)"} {
				if !strings.Contains(joined, want) {
					t.Errorf("the plan does not use %s:\n%s", want, joined)
				}
			}
			if strings.Contains(joined, "SCAN v\n") || strings.HasSuffix(joined, "SCAN v") || strings.Contains(joined, "SCAN v USING") {
				t.Errorf("the plan scans the versions table:\n%s", joined)
			}
			// The matches' keys are sorted and cut first (keysFirst):
			// only the page's versions are read with their ends.
			page, ends := strings.Index(joined, "SCAN p\n"), strings.Index(joined, "SEARCH d ")
			if page < 0 || ends < page {
				t.Errorf("the plan reads the ends of more than the page:\n%s", joined)
			}
		})
	}
}

// TestCountPlan: on SQLite, a count by the hourly counts' columns reads the
// window's whole hours from them by their key (from those of all
// namespaces where it neither groups by nor selects a namespace), and its
// partial hours at the edges from the versions' covering index by
// last_seen; a window of whole hours reads no version at all. A count by
// the regarding name reads the versions (their covering index), the
// hourly counts holding no names.
func TestCountPlan(t *testing.T) {
	s := openSQLite(t)
	hour := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	byReason := []history.Column{history.ColumnReason}
	inNamespace := []history.Condition{{Columns: []history.Column{history.ColumnNamespace}, Value: "ns"}}
	for _, tc := range []struct {
		name         string
		since, until time.Time
		groupBy      []history.Column
		conditions   []history.Condition
		want, not    []string
		// hourly is the table of hourly counts the statement reads.
		hourly string
	}{
		{"whole hours", hour.Add(-168 * time.Hour), hour, byReason, nil,
			[]string{"PRIMARY KEY (hour>? AND hour<?)"}, []string{"versions_by", "SCAN v"}, "versions_hourly_all"},
		{"whole hours in a namespace", hour.Add(-168 * time.Hour), hour, byReason, inNamespace,
			[]string{"PRIMARY KEY (hour>? AND hour<?)"}, []string{"versions_by", "SCAN v"}, "versions_hourly"},
		{"whole hours by namespace", hour.Add(-168 * time.Hour), hour, []history.Column{history.ColumnNamespace}, nil,
			[]string{"PRIMARY KEY (hour>? AND hour<?)"}, []string{"versions_by", "SCAN v"}, "versions_hourly"},
		{"partial hours", hour.Add(-168*time.Hour + time.Minute), hour.Add(time.Minute), byReason, nil,
			[]string{"PRIMARY KEY (hour>? AND hour<?)", "versions_by_counted (last_seen>? AND last_seen<?)"}, []string{"SCAN v"}, "versions_hourly_all"},
		{"by regarding name", hour.Add(-168 * time.Hour), hour, []history.Column{history.ColumnRegardingName}, nil,
			[]string{"versions_by_counted (last_seen>? AND last_seen<?)"}, []string{"PRIMARY KEY", "SCAN v"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			query, args, err := s.CellsQuery(history.CountQuery{Query: history.Query{Conditions: tc.conditions, Since: tc.since, Until: tc.until, Through: 100},
				GroupBy: tc.groupBy, Bucket: time.Hour, Top: 10})
			if err != nil {
				t.Fatal(err)
			}
			for _, table := range []string{"versions_hourly", "versions_hourly_all"} {
				if reads := strings.Contains(query, "FROM "+table+" v "); reads != (table == tc.hourly) {
					t.Errorf("the statement reads %s: %v, want %v:\n%s", table, reads, !reads, query)
				}
			}
			joined := queryPlan(t, s, query, args)
			for _, want := range tc.want {
				if !strings.Contains(joined, want) {
					t.Errorf("the plan does not use %s:\n%s", want, joined)
				}
			}
			for _, not := range tc.not {
				if strings.Contains(joined, not) {
					t.Errorf("the plan has %s:\n%s", not, joined)
				}
			}
		})
	}
}
