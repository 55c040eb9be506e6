package postgres

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

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
// filled by fillBulk, checked, then VACUUM ANALYZEd as autovacuum would
// (Stats reads the planner's row count; the counts' index-only scans the
// visibility map). HISTORY_BENCH_PGDIR=<dir> keeps the cluster there and
// reuses it when it holds a complete fill of that size (its progress row
// says so), as the SQLite benchmarks' HISTORY_BENCH_DB does. The cluster
// runs until the benchmark and its sub-benchmarks are done.
//
//	HISTORY_BENCH_ROWS=1000000 HISTORY_BENCH_PGDIR=/tmp/pg1m go test -run NONE -bench CountReasonsWeek -benchtime 10x -timeout 0 ./pkg/history/postgres/
func benchStore(b *testing.B) (*Store, storetest.BenchHistory) {
	rows := 200000
	if v := os.Getenv("HISTORY_BENCH_ROWS"); v != "" {
		var err error
		if rows, err = strconv.Atoi(v); err != nil {
			b.Fatal(err)
		}
	}
	ctx := context.Background()
	var dsn string
	if dir := os.Getenv("HISTORY_BENCH_PGDIR"); dir != "" {
		dsn = pgtest.StartKept(b, dir)
	} else {
		dsn = pgtest.Start(b)
	}
	s, err := Open(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	var source string
	err = s.d.pool.QueryRow(ctx, `SELECT source FROM capture_progress WHERE source LIKE 'bench %'`).Scan(&source)
	if err == nil {
		var endNanos int64
		var kept int
		if _, err := fmt.Sscanf(source, "bench %d %d", &endNanos, &kept); err != nil || kept != rows {
			b.Fatalf("the kept cluster holds %q, not a fill of %d versions: remove its directory", source, rows)
		}
		h := storetest.NewBenchHistory(rows, time.Unix(0, endNanos))
		b.Logf("reusing the kept cluster: %d versions up to %v", rows, h.End.UTC())
		return s, h
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		b.Fatal(err)
	}
	h := storetest.NewBenchHistory(rows, time.Now().Truncate(time.Second))
	start := time.Now()
	if err := fillBulk(ctx, s, h, b.Logf); err != nil {
		b.Fatal(err)
	}
	if err := checkBenchFill(ctx, s, h); err != nil {
		b.Fatal(err)
	}
	if _, err := s.d.pool.Exec(ctx, `VACUUM ANALYZE`); err != nil {
		b.Fatal(err)
	}
	// Written last: a fill that stopped half way has none, and is refused.
	if err := s.Write(ctx, history.Batch{Source: fmt.Sprintf("bench %d %d", h.End.UnixNano(), rows), Revision: int64(rows)}); err != nil {
		b.Fatal(err)
	}
	stats, err := s.Stats(ctx)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("filled %d versions in %v: %d bytes (versions' partitions and their indexes), %.0f bytes/version",
		rows, time.Since(start).Round(time.Second), stats.Bytes, float64(stats.Bytes)/float64(rows))
	return s, h
}

// fillBulk writes h into the empty store s through Write, so the same rows,
// feed positions and deletions as capture's, at a bulk load's speed: the
// versions' secondary indexes (the text search's GIN among them) and the
// hourly counts' trigger are dropped while the rows go in, in batches of
// 50000, and then made again, each index built once by a sort rather than
// 10^6 insertions at random places, the hourly counts by their migrations'
// own backfills (hourlySQL, hourlyAllSQL).
func fillBulk(ctx context.Context, s *Store, h storetest.BenchHistory, logf func(string, ...any)) error {
	var stored int64
	if err := s.d.pool.QueryRow(ctx, `SELECT count(*) FROM event_versions`).Scan(&stored); err != nil || stored != 0 {
		return fmt.Errorf("the store holds %d versions (%v), not from a complete fill: remove it", stored, err)
	}
	rows, err := s.d.pool.Query(ctx, `SELECT i.relname, pg_get_indexdef(i.oid) FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid
		WHERE x.indrelid = 'event_versions'::regclass AND NOT x.indisprimary`)
	if err != nil {
		return err
	}
	indexes := map[string]string{}
	for rows.Next() {
		var name, create string
		if err := rows.Scan(&name, &create); err != nil {
			rows.Close()
			return err
		}
		// A partitioned index's definition reads ON ONLY, which would make
		// it on the parent alone.
		indexes[name] = strings.Replace(create, " ON ONLY ", " ON ", 1)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for name := range indexes {
		if _, err := s.d.pool.Exec(ctx, `DROP INDEX `+pgx.Identifier{name}.Sanitize()); err != nil {
			return err
		}
	}
	if _, err := s.d.pool.Exec(ctx, `DROP TRIGGER event_versions_hourly_counted ON event_versions`); err != nil {
		return err
	}
	start := time.Now()
	written := 0
	err = h.Generate(50000, func(batch history.Batch) error {
		written += len(batch.Versions)
		if written%(h.Rows/10+1) < len(batch.Versions) {
			logf("%d versions written in %v", written, time.Since(start).Round(time.Second))
		}
		return s.Write(ctx, batch)
	})
	if err != nil {
		return err
	}
	logf("%d versions written in %v; building %d indexes and the hourly counts", h.Rows, time.Since(start).Round(time.Second), len(indexes))
	built := time.Now()
	for _, create := range indexes {
		if _, err := s.d.pool.Exec(ctx, create); err != nil {
			return err
		}
	}
	// hourlySQL makes the trigger again with a function of the hourly
	// counts alone: hourlyAllSQL makes it count in both again, and
	// counts all namespaces from the hourly counts.
	for _, migration := range []string{hourlySQL(), hourlyAllSQL()} {
		if _, err := s.d.pool.Exec(ctx, migration); err != nil {
			return err
		}
	}
	var made int
	if err := s.d.pool.QueryRow(ctx, `SELECT count(*) FROM pg_index WHERE indrelid = 'event_versions'::regclass AND NOT indisprimary`).Scan(&made); err != nil {
		return err
	}
	if made != len(indexes) {
		return fmt.Errorf("%d indexes made again of the %d dropped", made, len(indexes))
	}
	logf("indexes and hourly counts built in %v", time.Since(built).Round(time.Second))
	return nil
}

// checkBenchFill checks a fill as the server reads it: every version and
// deletion stored, and the hourly counts (and those of all namespaces)
// equal to counting the versions of each hour and reason.
func checkBenchFill(ctx context.Context, s *Store, h storetest.BenchHistory) error {
	var versions, deletions, disagreeing int64
	if err := s.d.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM event_versions), (SELECT count(*) FROM event_deletions)`).Scan(&versions, &deletions); err != nil {
		return err
	}
	for _, table := range []string{spelling.Hourly, spelling.HourlyAll} {
		var wrong int64
		if err := s.d.pool.QueryRow(ctx, storetest.HourlyDisagreements(spelling.Versions, table)).Scan(&wrong); err != nil {
			return err
		}
		disagreeing += wrong
	}
	if versions != int64(h.Rows) || deletions != int64(h.Deletions()) || disagreeing != 0 {
		return fmt.Errorf("%d versions, %d deletions, %d hours counted wrong: want %d versions, %d deletions, none wrong",
			versions, deletions, disagreeing, h.Rows, h.Deletions())
	}
	return nil
}
