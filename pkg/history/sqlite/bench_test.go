package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eventapiserver/event-apiserver/pkg/history"
	"github.com/eventapiserver/event-apiserver/pkg/history/storetest"
	"github.com/eventapiserver/event-apiserver/pkg/search"
)

// BenchmarkListOneObjectWeek measures "one object's week"
// (storetest.ListOneObjectWeek) in storetest.BenchHistory's history of
// HISTORY_BENCH_ROWS versions (default 200000), filled once per run with
// fillBulk (outside the timer) and verified. HISTORY_BENCH_DB=<file> keeps
// the file there and reuses it when it holds a complete fill of that size
// (verified again with HISTORY_BENCH_VERIFY=1), for the REST figure of
// TestHistoryQueryAtScale.
//
//	HISTORY_BENCH_ROWS=10000000 HISTORY_BENCH_DB=/tmp/h10m/history.db go test -run NONE -bench ListOneObjectWeek -benchtime 300x -timeout 0 ./pkg/history/sqlite/
func BenchmarkListOneObjectWeek(b *testing.B) {
	// The testing package calls the function with b.N=1 first, then with
	// the real N: build the database once.
	benchDB.once.Do(func() { benchDB.store, benchDB.history, benchDB.err = buildBenchDB(b) })
	if benchDB.err != nil {
		b.Fatal(benchDB.err)
	}
	storetest.ListOneObjectWeek(b, benchDB.store, benchDB.history)
}

// BenchmarkCountReasonsWeek measures storetest.CountReasonsWeek in the
// history BenchmarkListOneObjectWeek fills (the same variables):
//
//	HISTORY_BENCH_ROWS=1000000 go test -run NONE -bench CountReasonsWeek -benchtime 20x -timeout 0 ./pkg/history/sqlite/
func BenchmarkCountReasonsWeek(b *testing.B) {
	benchDB.once.Do(func() { benchDB.store, benchDB.history, benchDB.err = buildBenchDB(b) })
	if benchDB.err != nil {
		b.Fatal(benchDB.err)
	}
	storetest.CountReasonsWeek(b, benchDB.store, benchDB.history)
}

// BenchmarkSearchRareWordWeek measures "what mentioned x509 this week"
// (storetest.SearchRareWordWeek) in BenchmarkListOneObjectWeek's history:
// the FTS5 trigram index, beside LIKE over the window's rows, and beside
// listing the window.
//
//	HISTORY_BENCH_ROWS=1000000 go test -run NONE -bench SearchRareWordWeek -benchtime 20x -timeout 0 ./pkg/history/sqlite/
func BenchmarkSearchRareWordWeek(b *testing.B) {
	benchDB.once.Do(func() { benchDB.store, benchDB.history, benchDB.err = buildBenchDB(b) })
	if benchDB.err != nil {
		b.Fatal(benchDB.err)
	}
	s := benchDB.store
	storetest.SearchRareWordWeek(b, s, benchDB.history, func(ctx context.Context, q history.Query, term string) (int, error) {
		// LIKE on the versions table, which no index answers: SQLite walks
		// the window by last_seen and matches each row's note.
		return storetest.CountRows(s.read.QueryContext(ctx, `SELECT v.uid, v.revision, v.object FROM versions v
			WHERE v.note LIKE ? ESCAPE '\' AND v.last_seen >= ? ORDER BY v.last_seen DESC, v.revision DESC LIMIT ?`,
			"%"+search.EscapeLike(term)+"%", q.Since.UnixNano(), q.Limit))
	})
}

var benchDB struct {
	once    sync.Once
	dir     string
	store   *Store
	history storetest.BenchHistory
	err     error
}

// buildBenchDB fills the benchmark's history with fillBulk and verifies it,
// or reuses the complete fill kept at HISTORY_BENCH_DB; the store stays open
// for the process.
func buildBenchDB(b *testing.B) (*Store, storetest.BenchHistory, error) {
	rows := 200000
	if v := os.Getenv("HISTORY_BENCH_ROWS"); v != "" {
		var err error
		if rows, err = strconv.Atoi(v); err != nil {
			return nil, storetest.BenchHistory{}, err
		}
	}
	ctx := context.Background()
	path := os.Getenv("HISTORY_BENCH_DB")
	if path == "" {
		// Not b.TempDir: the testing package cleans that up after the
		// first call. TestMain removes it.
		dir, err := os.MkdirTemp("", "history-bench-")
		if err != nil {
			return nil, storetest.BenchHistory{}, err
		}
		benchDB.dir = dir
		path = filepath.Join(dir, "history.db")
	}
	end, err := benchFillEnd(ctx, path, rows)
	if err != nil {
		return nil, storetest.BenchHistory{}, err
	}
	h := storetest.NewBenchHistory(rows, end)
	if end.IsZero() {
		h.End = time.Now().Truncate(time.Second)
		if err := fillBulk(ctx, path, h, benchSource(h), b.Logf); err != nil {
			return nil, storetest.BenchHistory{}, err
		}
	} else {
		b.Logf("reusing %s: %d versions up to %v", path, rows, end.UTC())
	}
	s, err := Open(path)
	if err != nil {
		return nil, storetest.BenchHistory{}, err
	}
	if end.IsZero() || os.Getenv("HISTORY_BENCH_VERIFY") == "1" {
		if err := verifyBenchDB(ctx, s, h, 20, b.Logf); err != nil {
			s.Close()
			return nil, storetest.BenchHistory{}, err
		}
	}
	return s, h, nil
}

// benchSource names a complete fill in the progress table: when its history
// ends and how many versions it holds.
func benchSource(h storetest.BenchHistory) string {
	return fmt.Sprintf("bench %d %d", h.End.UnixNano(), h.Rows)
}

// benchFillEnd is the end of the complete fill of rows versions at path, or
// zero when there is no file there.
func benchFillEnd(ctx context.Context, path string, rows int) (time.Time, error) {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return time.Time{}, nil
	}
	s, err := Open(path)
	if err != nil {
		return time.Time{}, err
	}
	defer s.Close()
	var source string
	err = s.read.QueryRowContext(ctx, `SELECT source FROM progress WHERE source LIKE 'bench %'`).Scan(&source)
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, fmt.Errorf("%s holds no complete benchmark fill: remove it", path)
	}
	if err != nil {
		return time.Time{}, err
	}
	var end, total int64
	if _, err := fmt.Sscanf(source, "bench %d %d", &end, &total); err != nil || total != int64(rows) {
		return time.Time{}, fmt.Errorf("%s was filled for another size (%q): remove it", path, source)
	}
	return time.Unix(0, end), nil
}

// TestBenchFillBulk: the bulk fill leaves the file that capture's path
// (Write with every index in place) leaves, row for row, with the same
// schema and a sound B-tree, and the verification passes on it.
func TestBenchFillBulk(t *testing.T) {
	ctx := context.Background()
	// Two of fillWrite's batches. Under -short (the unit tier, with the
	// race detector, which makes SQLite's translated C 10 to 30 times
	// slower: 6000 versions took minutes) a tenth, in the same two batches.
	rows, batchSize, sample := 6000, 5000, 20
	if testing.Short() {
		rows, batchSize, sample = 600, 500, 5
	}
	h := storetest.NewBenchHistory(rows, time.Now().Truncate(time.Second))
	bulkPath := filepath.Join(t.TempDir(), "bulk.db")
	if err := fillBulk(ctx, bulkPath, h, benchSource(h), t.Logf); err != nil {
		t.Fatal(err)
	}
	bulk, err := Open(bulkPath)
	if err != nil {
		t.Fatal(err)
	}
	defer bulk.Close()
	written, err := Open(filepath.Join(t.TempDir(), "written.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer written.Close()
	if err := fillWrite(ctx, written, h, benchSource(h), batchSize); err != nil {
		t.Fatal(err)
	}
	for _, query := range []string{
		`SELECT type, name, tbl_name, coalesce(sql, '') FROM sqlite_master ORDER BY name`,
		// Feed positions follow the batches, which differ: not compared.
		`SELECT ` + storedColumns() + ` FROM versions ORDER BY revision, uid`,
		`SELECT uid, revision, deleted_at FROM deletions ORDER BY uid`,
		`SELECT * FROM counters ORDER BY name`,
		`SELECT * FROM progress ORDER BY source`,
		`SELECT * FROM versions_note_search_config ORDER BY k`,
		// The text search finds the same versions (the same rowids: both
		// insert them in the same order).
		`SELECT rowid FROM versions_note_search WHERE note MATCH '"` + storetest.BenchRareWord + `"' ORDER BY rowid`,
		`SELECT count(*) FROM versions_note_search WHERE note MATCH '"Back-off restarting"'`,
		`PRAGMA journal_mode`,
	} {
		got, want := dump(t, bulk.read, query), dump(t, written.read, query)
		if got != want {
			t.Errorf("%s: the bulk fill differs from Write's (%d and %d bytes)", query, len(got), len(want))
		}
	}
	// The same rows, not the same bytes: CREATE INDEX fills index pages,
	// inserts at random places leave them part empty.
	for name, st := range map[string]*Store{"bulk": bulk, "written": written} {
		stats, err := st.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %.0f bytes/version", name, float64(stats.Bytes)/float64(stats.Rows))
	}
	if got := dump(t, bulk.read, `PRAGMA integrity_check`); got != "ok\n" {
		t.Errorf("integrity_check: %s", got)
	}
	if _, err := bulk.db.Exec(`INSERT INTO versions_note_search (versions_note_search) VALUES ('integrity-check')`); err != nil {
		t.Errorf("the text search's integrity-check: %v", err)
	}
	if err := verifyBenchDB(ctx, bulk, h, sample, t.Logf); err != nil {
		t.Error(err)
	}
}

// storedColumns are a version's columns but its feed position, which
// follows the batches.
func storedColumns() string {
	columns := []string{"uid", "revision"}
	for _, c := range history.Columns {
		columns = append(columns, string(c.Name))
	}
	return strings.Join(append(columns, "last_seen", "observed_at", "object"), ", ")
}

// dump renders a query's rows as text.
func dump(t *testing.T, db *sql.DB, query string) string {
	t.Helper()
	rows, err := db.Query(query)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	columns, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	values := make([]any, len(columns))
	for rows.Next() {
		pointers := make([]any, len(columns))
		for i := range values {
			pointers[i] = &values[i]
		}
		if err := rows.Scan(pointers...); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintln(&out, values...)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// TestBenchHistoryFile verifies the history kept at HISTORY_BENCH_DB
// (HISTORY_BENCH_ROWS versions) as verifyBenchDB does after a fill.
func TestBenchHistoryFile(t *testing.T) {
	path, rows := os.Getenv("HISTORY_BENCH_DB"), os.Getenv("HISTORY_BENCH_ROWS")
	if path == "" || rows == "" {
		t.Skip("set HISTORY_BENCH_DB and HISTORY_BENCH_ROWS to a file BenchmarkListOneObjectWeek filled")
	}
	n, err := strconv.Atoi(rows)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	end, err := benchFillEnd(ctx, path, n)
	if err != nil || end.IsZero() {
		t.Fatalf("%s: %v", path, err)
	}
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := verifyBenchDB(ctx, s, storetest.NewBenchHistory(n, end), 20, t.Logf); err != nil {
		t.Fatal(err)
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	if benchDB.store != nil {
		benchDB.store.Close()
	}
	if benchDB.dir != "" {
		os.RemoveAll(benchDB.dir)
	}
	os.Exit(code)
}
