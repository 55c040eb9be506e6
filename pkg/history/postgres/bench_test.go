package postgres

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/eventapiserver/event-apiserver/internal/pgtest"
	"github.com/eventapiserver/event-apiserver/pkg/history"
	"github.com/eventapiserver/event-apiserver/pkg/history/storetest"
)

// BenchmarkListOneObjectWeek measures "one object's week"
// (storetest.ListOneObjectWeek) on a private PostgreSQL cluster (pgtest)
// holding HISTORY_BENCH_ROWS versions (default 200000) of
// storetest.BenchHistory, written as capture writes them (Write in batches
// of 5000, every index in place) before the timer starts, then ANALYZEd as
// autovacuum would (Stats reads the planner's row count).
//
//	HISTORY_BENCH_ROWS=1000000 go test -run NONE -bench ListOneObjectWeek -benchtime 300x -timeout 0 ./pkg/history/postgres/
func BenchmarkListOneObjectWeek(b *testing.B) {
	// A benchmark with sub-benchmarks runs once: the cluster lives until
	// they are done.
	s, h := benchStore(b)
	storetest.ListOneObjectWeek(b, s, h)
}

// BenchmarkCountReasonsWeek measures storetest.CountReasonsWeek in the
// history BenchmarkListOneObjectWeek fills (the same variable):
//
//	HISTORY_BENCH_ROWS=1000000 go test -run NONE -bench CountReasonsWeek -benchtime 20x -timeout 0 ./pkg/history/postgres/
func BenchmarkCountReasonsWeek(b *testing.B) {
	s, h := benchStore(b)
	// What autovacuum does to insert-only tables since PostgreSQL 13
	// (autovacuum_vacuum_insert_threshold): the visibility map lets the
	// count read its covering index alone.
	if _, err := s.d.pool.Exec(context.Background(), `VACUUM ANALYZE`); err != nil {
		b.Fatal(err)
	}
	storetest.CountReasonsWeek(b, s, h)
}

// benchStore starts a cluster, fills it with storetest.BenchHistory and
// ANALYZEs it; both live until b ends.
func benchStore(b *testing.B) (*Store, storetest.BenchHistory) {
	rows := 200000
	if v := os.Getenv("HISTORY_BENCH_ROWS"); v != "" {
		var err error
		if rows, err = strconv.Atoi(v); err != nil {
			b.Fatal(err)
		}
	}
	ctx := context.Background()
	s, err := Open(ctx, pgtest.Start(b))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	h := storetest.NewBenchHistory(rows, time.Now().Truncate(time.Second))
	start := time.Now()
	written := 0
	err = h.Generate(5000, func(batch history.Batch) error {
		written += len(batch.Versions)
		if written%(rows/10+1) < len(batch.Versions) {
			b.Logf("%d versions written in %v", written, time.Since(start).Round(time.Second))
		}
		return s.Write(ctx, batch)
	})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.d.pool.Exec(ctx, `ANALYZE`); err != nil {
		b.Fatal(err)
	}
	var exact int64
	if err := s.d.pool.QueryRow(ctx, `SELECT count(*) FROM event_versions`).Scan(&exact); err != nil || exact != int64(rows) {
		b.Fatalf("%d versions stored (%v), want %d", exact, err, rows)
	}
	stats, err := s.Stats(ctx)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("wrote %d versions in %v: %d bytes (versions' partitions and their indexes), %.0f bytes/version",
		rows, time.Since(start).Round(time.Second), stats.Bytes, float64(stats.Bytes)/float64(rows))
	return s, h
}
