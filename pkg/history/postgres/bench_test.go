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
	"github.com/eventapiserver/event-apiserver/pkg/search"
)

// BenchmarkListOneObjectWeek measures "one object's week"
// (storetest.ListOneObjectWeek) in benchStore's history, filled before the
// timer starts.
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

// BenchmarkSearchRareWordWeek measures "what mentioned x509 this week"
// (storetest.SearchRareWordWeek) in the same history: pg_trgm's GIN index,
// beside ILIKE over the window's rows, and beside listing the window.
//
//	HISTORY_BENCH_ROWS=1000000 go test -run NONE -bench SearchRareWordWeek -benchtime 20x -timeout 0 ./pkg/history/postgres/
func BenchmarkSearchRareWordWeek(b *testing.B) {
	s, h := benchStore(b)
	storetest.SearchRareWordWeek(b, s, h, func(ctx context.Context, q history.Query, term string) (int, error) {
		// note || '' is no column pg_trgm's index holds: the planner reads
		// the window (the partitions' last_seen) and matches each row.
		return storetest.CountRows(s.d.pool.Query(ctx, `SELECT v.uid, v.revision, v.object FROM event_versions v
			WHERE (v.note || '') ILIKE $1 AND v.last_seen >= $2 ORDER BY v.last_seen DESC, v.revision DESC LIMIT $3`,
			"%"+search.EscapeLike(term)+"%", q.Since.UnixNano(), q.Limit))
	})
}

// benchStore is a private PostgreSQL cluster (pgtest) holding
// HISTORY_BENCH_ROWS versions (default 200000) of storetest.BenchHistory,
// written as capture writes them (Write in batches of 5000, every index in
// place), then ANALYZEd as autovacuum would (Stats reads the planner's row
// count). The cluster lives until the benchmark and its sub-benchmarks are
// done.
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
