package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/eventapiserver/event-apiserver/internal/pgtest"
	"github.com/eventapiserver/event-apiserver/pkg/history"
	"github.com/eventapiserver/event-apiserver/pkg/history/storetest"
)

// BenchmarkWriteBatch measures one capture batch of 100 versions of
// storetest.BenchHistory (a fleet member's second at 100 Events/s) written
// by Store.Write, one writer at a time: nearly all of it is under the feed's
// lock (feed_head FOR UPDATE), which every other writer's batch waits for.
// "no-hourly" drops the hourly counts' trigger first: the difference is
// what the trigger adds to a batch; "hourly-namespaced" makes its function
// count in the hourly counts alone, as before the counts of all namespaces
// (hourlyAllSQL): the difference is what those add.
//
//	go test -run NONE -bench WriteBatch -benchtime 200x ./pkg/history/postgres/
func BenchmarkWriteBatch(b *testing.B) {
	dsn := pgtest.Start(b)
	for _, way := range []struct{ name, setup string }{
		{"hourly", ""},
		{"hourly-namespaced", hourlyTrigger(hourly)},
		{"no-hourly", `DROP TRIGGER event_versions_hourly_counted ON event_versions`},
	} {
		b.Run(way.name, func(b *testing.B) {
			ctx := context.Background()
			s, err := Open(ctx, newDatabase(b, dsn))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			if err := s.Migrate(ctx); err != nil {
				b.Fatal(err)
			}
			if way.setup != "" {
				if _, err := s.d.pool.Exec(ctx, way.setup); err != nil {
					b.Fatal(err)
				}
			}
			const perBatch = 100
			var batches []history.Batch
			h := storetest.NewBenchHistory((b.N+1)*perBatch, time.Now().Truncate(time.Second))
			// The last hour, as capture's batches are: a partition or two,
			// not one made every few batches.
			h.Span = time.Hour
			if err := h.Generate(perBatch, func(batch history.Batch) error {
				batches = append(batches, batch)
				return nil
			}); err != nil {
				b.Fatal(err)
			}
			// The first batch makes the day's partition, which the
			// others find made.
			if err := s.Write(ctx, batches[0]); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := s.Write(ctx, batches[1+i%(len(batches)-1)]); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*perBatch), "µs/version")
		})
	}
}
