package sqlite

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/eventapiserver/event-apiserver/pkg/history"
)

// BenchmarkListOneObjectWeek measures "one object's Events of the last week"
// in a history of HISTORY_BENCH_ROWS versions (default 200000) over 14 days
// about 10000 objects, with 600-byte objects, and reports the store's bytes
// per version. The database is built once per run (outside the timer).
//
//	HISTORY_BENCH_ROWS=1000000 go test -run NONE -bench ListOneObjectWeek ./pkg/history/sqlite/
func BenchmarkListOneObjectWeek(b *testing.B) {
	// The testing package calls the function with b.N=1 first, then with
	// the real N: build the database once.
	benchDB.once.Do(func() { benchDB.store, benchDB.now, benchDB.err = buildBenchDB(b) })
	if benchDB.err != nil {
		b.Fatal(benchDB.err)
	}
	s, now, ctx := benchDB.store, benchDB.now, context.Background()
	stats, err := s.Stats(ctx)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(stats.Bytes)/float64(stats.Rows), "bytes/version")

	query := history.Query{
		Conditions: []history.Condition{{Columns: []history.Column{history.ColumnRegardingUID}, Value: "uid-42"}},
		Since:      now.Add(-7 * 24 * time.Hour),
		Limit:      500,
	}
	latencies := make([]time.Duration, 0, b.N)
	found := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		got, err := s.List(ctx, query)
		if err != nil {
			b.Fatal(err)
		}
		latencies = append(latencies, time.Since(t0))
		found = len(got)
	}
	b.StopTimer()
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	p50 := latencies[len(latencies)/2]
	b.ReportMetric(float64(p50.Microseconds()), "p50-µs")
	b.ReportMetric(float64(found), "versions/query")
}

var benchDB struct {
	once  sync.Once
	dir   string
	store *Store
	now   time.Time
	err   error
}

// buildBenchDB writes the benchmark's history; it stays open for the process.
func buildBenchDB(b *testing.B) (*Store, time.Time, error) {
	rows := 200000
	if v := os.Getenv("HISTORY_BENCH_ROWS"); v != "" {
		var err error
		if rows, err = strconv.Atoi(v); err != nil {
			return nil, time.Time{}, err
		}
	}
	const objects = 10000
	ctx := context.Background()
	// Not b.TempDir: the testing package cleans that up after the first
	// call. TestMain removes it.
	dir, err := os.MkdirTemp("", "history-bench-")
	if err != nil {
		return nil, time.Time{}, err
	}
	benchDB.dir = dir
	s, err := Open(filepath.Join(dir, "history.db"))
	if err != nil {
		return nil, time.Time{}, err
	}
	now := time.Now()
	span := 14 * 24 * time.Hour
	payload := make([]byte, 600)
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	start := time.Now()
	const batchSize = 5000
	for i := 0; i < rows; i += batchSize {
		batch := history.Batch{Source: "bench", Revision: int64(i + batchSize)}
		for j := i; j < min(i+batchSize, rows); j++ {
			object := j % objects
			seen := now.Add(-span + span/time.Duration(rows)*time.Duration(j))
			batch.Versions = append(batch.Versions, history.Version{
				UID: fmt.Sprintf("event-%d", j/3), Revision: int64(j + 1), Namespace: fmt.Sprintf("ns-%d", object%100),
				Name: fmt.Sprintf("pod-%d.%x", object, j/3), RegardingUID: fmt.Sprintf("uid-%d", object),
				RegardingName: fmt.Sprintf("pod-%d", object), RegardingNamespace: fmt.Sprintf("ns-%d", object%100),
				RegardingKind: "Pod", Reason: "BackOff", Type: "Warning", ReportingController: "kubelet",
				LastSeen: seen, ObservedAt: seen, Object: payload,
			})
		}
		if err := s.Write(ctx, batch); err != nil {
			return nil, now, err
		}
	}
	stats, err := s.Stats(ctx)
	if err != nil {
		return nil, now, err
	}
	b.Logf("built %d versions in %v: %d bytes, %.0f bytes/version (object %d bytes)", stats.Rows, time.Since(start).Round(time.Second),
		stats.Bytes, float64(stats.Bytes)/float64(stats.Rows), len(payload))
	return s, now, nil

}

func TestMain(m *testing.M) {
	code := m.Run()
	if benchDB.dir != "" {
		benchDB.store.Close()
		os.RemoveAll(benchDB.dir)
	}
	os.Exit(code)
}
