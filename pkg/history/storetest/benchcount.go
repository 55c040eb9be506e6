package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/eventapiserver/event-apiserver/pkg/history"
	"github.com/eventapiserver/event-apiserver/pkg/history/sqlstore"
)

// CountReasonsWeek measures "which reasons rose this week": the versions of
// the last 7 days in all namespaces counted by reason in hourly buckets
// (Count, as eventrecordcounts asks it: the window's whole hours from the
// hourly counts of all namespaces, its partial hours at the edges from the
// versions), beside the same count from the hourly counts by namespace
// (sqlstore.ReadHourlyAll off), and from the versions alone
// (sqlstore.ReadHourly off), and
// beside the workaround without it: listing the window page by page (1000 a
// page, as the API's largest) and counting on the client. It reports p50
// and p99 of each and the versions counted, which all must agree on.
func CountReasonsWeek(b *testing.B, s history.Store, h BenchHistory) {
	ctx := context.Background()
	since := h.End.Add(-7 * 24 * time.Hour)
	window := history.Query{Since: since, Until: h.End.Add(time.Second)}
	var want int64
	// sampled, if not nil, is how many versions each run of a sample
	// (ListSamplePages) really read: its latencies are scaled to the
	// versions counted.
	measure := func(b *testing.B, run func() (int64, error), sampled *int64) {
		latencies := make([]time.Duration, 0, b.N)
		var counted int64
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			t0 := time.Now()
			n, err := run()
			if err != nil {
				b.Fatal(err)
			}
			latencies = append(latencies, time.Since(t0))
			counted = n
		}
		b.StopTimer()
		if want == 0 {
			want = counted
		} else if counted != want {
			b.Fatalf("counted %d versions, the count before %d", counted, want)
		}
		ReportLatencies(b, latencies, sampled, counted)
		b.ReportMetric(float64(counted), "versions")
	}
	count := func() (int64, error) {
		c, err := s.(history.Counter).Count(ctx, history.CountQuery{Query: window, GroupBy: []history.Column{history.ColumnReason}, Bucket: time.Hour, Top: 10})
		return c.Total, err
	}
	// Each way with the store's reads it turns off (none: as it runs).
	for _, way := range []struct {
		name string
		off  *bool
	}{{"count", nil}, {"count-namespaced", &sqlstore.ReadHourlyAll}, {"count-versions", &sqlstore.ReadHourly}} {
		b.Run(way.name, func(b *testing.B) {
			if way.off != nil {
				*way.off = false
				defer func() { *way.off = true }()
			}
			measure(b, count, nil)
		})
	}
	b.Run("list-and-count", func(b *testing.B) {
		pages := ListSamplePages(b)
		var windowVersions, sampled int64
		if pages > 0 {
			// A sample lists fewer versions than the other ways count:
			// its check is the window's count, and its latencies are
			// scaled to it.
			var err error
			if windowVersions, err = count(); err != nil {
				b.Fatal(err)
			}
		}
		measure(b, func() (int64, error) {
			counts := map[string]map[int64]int64{}
			var total int64
			q := window
			q.Limit = 1000
			_, err := ListWindow(ctx, s, q, pages, h.End, func(r history.Record) {
				byHour := counts[r.Reason]
				if byHour == nil {
					byHour = map[int64]int64{}
					counts[r.Reason] = byHour
				}
				byHour[r.LastSeen.Unix()/3600]++
				total++
			})
			if pages > 0 {
				sampled = total
				return windowVersions, err
			}
			return total, err
		}, &sampled)
	})
}
