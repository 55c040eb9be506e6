package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/eventapiserver/event-apiserver/pkg/history"
)

// BenchmarkListOneObjectWeek measures the query an operator runs for "this
// pod's week" (regarding.uid, and regardingOrRelated.uid, since=168h, newest
// first, limit 500) in a history of HISTORY_BENCH_ROWS versions (default
// 200000) spread over 14 days and one object per 100 versions, each a
// core/v1 Event of about 600 bytes, written through Write in batches of 5000. It reports p50 and p99
// and the store's bytes per version. The database is built once per run
// (outside the timer); HISTORY_BENCH_DB=<file> keeps it there (and reuses
// it when it exists: a stopped fill resumes, or with HISTORY_BENCH_NOFILL=1
// is measured as it is), for the REST figure of TestHistoryQueryAtScale.
//
//	HISTORY_BENCH_ROWS=1000000 go test -run NONE -bench ListOneObjectWeek -benchtime 200x ./pkg/history/sqlite/
func BenchmarkListOneObjectWeek(b *testing.B) {
	// The testing package calls the function with b.N=1 first, then with
	// the real N: build the database once.
	benchDB.once.Do(func() { benchDB.store, benchDB.now, benchDB.objects, benchDB.err = buildBenchDB(b) })
	if benchDB.err != nil {
		b.Fatal(benchDB.err)
	}
	s, now, ctx := benchDB.store, benchDB.now, context.Background()
	stats, err := s.Stats(ctx)
	if err != nil {
		b.Fatal(err)
	}

	for _, tc := range []struct {
		name    string
		columns []history.Column
	}{
		{"regarding.uid", []history.Column{history.ColumnRegardingUID}},
		{"regardingOrRelated.uid", []history.Column{history.ColumnRegardingUID, history.ColumnRelatedUID}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			latencies := make([]time.Duration, 0, b.N)
			found := 0
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				query := history.Query{
					Conditions: []history.Condition{{Columns: tc.columns, Value: BenchObjectUID(i * 7919 % benchDB.objects)}},
					Since:      now.Add(-7 * 24 * time.Hour),
					Limit:      500,
				}
				t0 := time.Now()
				got, err := s.List(ctx, query)
				if err != nil {
					b.Fatal(err)
				}
				latencies = append(latencies, time.Since(t0))
				found += len(got)
			}
			b.StopTimer()
			sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
			b.ReportMetric(float64(latencies[len(latencies)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(latencies[len(latencies)*99/100].Microseconds()), "p99-µs")
			b.ReportMetric(float64(found)/float64(b.N), "versions/query")
			b.ReportMetric(float64(stats.Bytes)/float64(stats.Rows), "bytes/version")
		})
	}
}

// BenchObjectUID is the regarding uid of the benchmark history's object i.
func BenchObjectUID(i int) string {
	return fmt.Sprintf("%08x-1111-4222-8333-%012x", uint32(i*2654435761), i)
}

var benchDB struct {
	once    sync.Once
	dir     string
	store   *Store
	now     time.Time
	objects int
	err     error
}

// buildBenchDB writes the benchmark's history; it stays open for the process.
func buildBenchDB(b *testing.B) (*Store, time.Time, int, error) {
	rows := 200000
	if v := os.Getenv("HISTORY_BENCH_ROWS"); v != "" {
		var err error
		if rows, err = strconv.Atoi(v); err != nil {
			return nil, time.Time{}, 0, err
		}
	}
	objects := max(rows/100, 1)
	ctx := context.Background()
	path := os.Getenv("HISTORY_BENCH_DB")
	if path == "" {
		// Not b.TempDir: the testing package cleans that up after the
		// first call. TestMain removes it.
		dir, err := os.MkdirTemp("", "history-bench-")
		if err != nil {
			return nil, time.Time{}, 0, err
		}
		benchDB.dir = dir
		path = filepath.Join(dir, "history.db")
	}
	s, err := Open(path)
	if err != nil {
		return nil, time.Time{}, 0, err
	}
	// The progress row says how far a kept file got and when its history
	// ends: a fill that was stopped resumes, a full one is reused.
	now := time.Now().Truncate(time.Second)
	var source string
	var done int64
	err = s.read.QueryRowContext(ctx, `SELECT source, revision FROM progress WHERE source LIKE 'bench %'`).Scan(&source, &done)
	if err == nil {
		var end, total int64
		if _, err := fmt.Sscanf(source, "bench %d %d", &end, &total); err != nil || total != int64(rows) {
			return nil, now, 0, fmt.Errorf("%s was filled for another size (%q): remove it", path, source)
		}
		now = time.Unix(0, end)
	} else if !errors.Is(err, sql.ErrNoRows) {
		return nil, now, 0, err
	}
	source = fmt.Sprintf("bench %d %d", now.UnixNano(), rows)
	if done >= int64(rows) || (done > 0 && os.Getenv("HISTORY_BENCH_NOFILL") == "1") {
		// A partial fill covers the span's start: the week is the one
		// before its newest version.
		var newest int64
		if err := s.read.QueryRowContext(ctx, `SELECT max(last_seen) FROM versions`).Scan(&newest); err != nil {
			return nil, now, 0, err
		}
		b.Logf("reusing %s: %d versions, the newest at %v", path, done, time.Unix(0, newest).UTC())
		return s, time.Unix(0, newest), objects, nil
	}
	span := 14 * 24 * time.Hour
	// Real core/v1 Events in etcd's protobuf envelope, agreeing with their
	// columns: the server serves the file (TestHistoryQueryAtScale) and
	// matches its field selectors on the decoded Events too.
	var payload bytes.Buffer
	encoder := protobuf.NewSerializer(clientgoscheme.Scheme, clientgoscheme.Scheme)
	event := &corev1.Event{
		TypeMeta:       metav1.TypeMeta{APIVersion: "v1", Kind: "Event"},
		ObjectMeta:     metav1.ObjectMeta{Name: "pod-1.187a", Namespace: "ns-1", UID: "6a3b"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "ns-1", Name: "pod-1", UID: "1111"},
		Reason:         "BackOff", Message: strings.Repeat("Back-off restarting failed container ", 12), Type: corev1.EventTypeWarning,
		Source: corev1.EventSource{Component: "kubelet", Host: "node-1"}, Count: 1,
	}
	start := time.Now()
	const batchSize = 5000
	for i := int(done); i < rows; i += batchSize {
		batch := history.Batch{Source: source, Revision: int64(min(i+batchSize, rows))}
		for j := i; j < min(i+batchSize, rows); j++ {
			// Objects take turns, so each one's versions spread over the
			// whole span, as the Events of a long-lived pod do.
			object := j % objects
			seen := now.Add(-span + time.Duration(float64(span)*float64(j)/float64(rows)))
			event.Namespace, event.Name = fmt.Sprintf("ns-%d", object%1000), fmt.Sprintf("pod-%d.%016x", object, j/3)
			event.UID = types.UID(fmt.Sprintf("%08x-6a3b-4c1d-9e2f-%012x", uint32(j/3*2654435761), j/3))
			event.InvolvedObject.Namespace, event.InvolvedObject.Name = event.Namespace, fmt.Sprintf("pod-%d", object)
			event.InvolvedObject.UID = types.UID(BenchObjectUID(object))
			event.LastTimestamp = metav1.NewTime(seen)
			payload.Reset()
			if err := encoder.Encode(event, &payload); err != nil {
				return nil, now, 0, err
			}
			batch.Versions = append(batch.Versions, history.Version{
				UID:       fmt.Sprintf("%08x-6a3b-4c1d-9e2f-%012x", uint32(j/3*2654435761), j/3),
				Revision:  int64(j + 1),
				Namespace: fmt.Sprintf("ns-%d", object%1000), Name: fmt.Sprintf("pod-%d.%016x", object, j/3),
				RegardingUID: BenchObjectUID(object), RegardingName: fmt.Sprintf("pod-%d", object),
				RegardingNamespace: fmt.Sprintf("ns-%d", object%1000), RegardingKind: "Pod",
				Reason: "BackOff", Type: "Warning", ReportingController: "kubelet",
				LastSeen: seen, ObservedAt: seen, Object: bytes.Clone(payload.Bytes()),
			})
		}
		if err := s.Write(ctx, batch); err != nil {
			return nil, now, objects, err
		}
		if done := i + batchSize; done%(rows/20+1) < batchSize {
			b.Logf("%d versions written in %v", done, time.Since(start).Round(time.Second))
		}
	}
	stats, err := s.Stats(ctx)
	if err != nil {
		return nil, now, objects, err
	}
	b.Logf("built %d versions in %v: %d bytes, %.0f bytes/version (object %d bytes)", stats.Rows, time.Since(start).Round(time.Second),
		stats.Bytes, float64(stats.Bytes)/float64(stats.Rows), payload.Len())
	return s, now, objects, nil
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
