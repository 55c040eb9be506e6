package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/eventapiserver/event-apiserver/pkg/history"
	registry "github.com/eventapiserver/event-apiserver/pkg/registry/history"
	"github.com/eventapiserver/event-apiserver/pkg/search"
)

// Unindexed runs the query of SearchRareWordWeek as a store would without
// its text index: the note matched row by row over the window (LIKE), and
// returns how many versions it found. Each store package spells it.
type Unindexed func(ctx context.Context, q history.Query, term string) (int, error)

// SearchRareWordWeek measures "what mentioned x509 this week" in s, which
// holds h: a text search for BenchRareWord over the last 7 days of every
// namespace, newest first, limit 500, three ways:
//   - index: the store's List, from its trigram index;
//   - index-max-rows: the same with the server's row limit, which the
//     store checks by counting the selection (history.Query.MaxRows);
//   - no-index: the same query with the note matched row by row (unindexed);
//   - list-window: today's workaround without search, every version of the
//     window listed in pages of 1000 and matched on the client, here with
//     no HTTP, JSON or decoding in between, so the real one costs more.
//
// Each reports p50 and p99 and the versions found, which must agree.
func SearchRareWordWeek(b *testing.B, s history.Store, h BenchHistory, unindexed Unindexed) {
	ctx := context.Background()
	query := history.Query{
		Conditions: []history.Condition{{Columns: []history.Column{history.ColumnNote}, Value: BenchRareWord, Contains: true}},
		Since:      h.End.Add(-7 * 24 * time.Hour),
		Limit:      500,
	}
	pages := ListSamplePages(b)
	// A sample's runs list sampled of the window's versions and find only
	// the rare versions among them: its check is against the index's find,
	// and its latencies are scaled to the window (ReportLatencies).
	var windowVersions, sampled int64
	window := func(ctx context.Context) (int, error) {
		found := 0
		n, err := ListWindow(ctx, s, history.Query{Since: query.Since, Limit: 1000}, pages, h.End, func(r history.Record) {
			if search.ContainsFold(r.Note, BenchRareWord) && found < query.Limit {
				found++
			}
		})
		if pages > 0 {
			sampled = int64(n)
			return -1, err
		}
		return found, err
	}
	if pages > 0 {
		c, err := s.(history.Counter).Count(ctx, history.CountQuery{Query: history.Query{Since: query.Since},
			GroupBy: []history.Column{history.ColumnReason}, Bucket: time.Hour, Top: 10})
		if err != nil {
			b.Fatal(err)
		}
		windowVersions = c.Total
	}
	want := -1
	for _, tc := range []struct {
		name string
		run  func(context.Context) (int, error)
	}{
		{"index", func(ctx context.Context) (int, error) {
			got, err := s.List(ctx, query)
			return len(got), err
		}},
		{"index-max-rows", func(ctx context.Context) (int, error) {
			// As the server asks it: a search may select at most its row
			// limit (history.Query.MaxRows), which the store checks too.
			limited := query
			limited.MaxRows = registry.DefaultMaxQueryRows
			got, err := s.List(ctx, limited)
			return len(got), err
		}},
		{"no-index", func(ctx context.Context) (int, error) { return unindexed(ctx, query, BenchRareWord) }},
		{"list-window", window},
	} {
		b.Run(tc.name, func(b *testing.B) {
			latencies := make([]time.Duration, 0, b.N)
			found := 0
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				n, err := tc.run(ctx)
				if err != nil {
					b.Fatal(err)
				}
				latencies = append(latencies, time.Since(t0))
				found = n
			}
			b.StopTimer()
			if found < 0 {
				// A sample (ListSamplePages): the index's find is what
				// the whole window would have found.
				found = want
			} else if want >= 0 && found != want {
				b.Fatalf("found %d versions, the index found %d", found, want)
			}
			want = found
			ReportLatencies(b, latencies, &sampled, windowVersions)
			if found >= 0 {
				b.ReportMetric(float64(found), "versions/query")
			}
		})
	}
}

// CountRows counts a query's rows for an Unindexed, reading them to the
// end, which closes them (database/sql's and pgx's alike).
func CountRows[R interface {
	Next() bool
	Err() error
}](rows R, err error) (int, error) {
	if err != nil {
		return 0, err
	}
	n := 0
	for rows.Next() {
		n++
	}
	return n, rows.Err()
}
