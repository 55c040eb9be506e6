package history

import (
	"context"
	"database/sql"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/jackc/pgx/v5"
	_ "modernc.org/sqlite" // to forget a kept SQLite file's capture position

	"github.com/eventapiserver/event-apiserver/internal/pgtest"
	historyv1alpha1 "github.com/eventapiserver/event-apiserver/pkg/apis/history/v1alpha1"
	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// TestHistoryCaptureUnderQueryLoad measures whether capture keeps pace while
// heavy queries run (issue 45: capture never waits behind a reader):
// EVENT_APISERVER_HISTORY_BENCH=1 to run it. kube-apiserver v1.36.3 and a
// history-only replica with the default batches, as
// TestHistoryOnlyCaptureCost runs them, on the store captureLoadStore
// picks; EVENT_APISERVER_HISTORY_BENCH_ROUNDS rounds (default 10) of
// EVENT_APISERVER_HISTORY_BENCH_CREATES creates (default 2000) add to the
// history the queries read. Then one round measures capture's lag and the
// creates quietly, and one more while four clients each run the
// heaviest count the limits allow in a loop: across all namespaces, over
// the longest window (--history-max-query-window, 336h), by regarding name
// and reason, which the hourly counts cannot answer, of the versions whose
// note holds "container" (case-insensitive: kubelet's BackOff notes, most
// of the stores' benchmark histories, and every note the rounds create),
// in hourly buckets, the top 100. The text search is what makes it the
// heaviest: no row limit bounds a count's, and each version it finds is
// read from its row, where the same count without it reads only the
// counts' covering index (at 10^6, three to four times as long). A count
// that reaches --history-query-timeout (a large history) is answered 504,
// as documented, and its client asks again: it loaded the store all the
// same.
// A measured round is, by default, one round of back-to-back creates
// (closed loop: the rate is what kube-apiserver and the creators reach on
// the machine, so CPU the counts take lowers it); with
// EVENT_APISERVER_HISTORY_BENCH_RATE=<n> it offers n creates a second for
// EVENT_APISERVER_HISTORY_BENCH_SECONDS (default 60), open loop
// (captureBench.paced): the same rate quietly and loaded, so capture
// keeping pace shows as the creates answered, missed none, and the lag.
func TestHistoryCaptureUnderQueryLoad(t *testing.T) {
	b, kube, rounds := startCaptureBench(t, captureLoadStore)
	for r := 0; r < rounds; r++ {
		b.round()
	}
	b.stored()
	if os.Getenv("EVENT_APISERVER_HISTORY_BENCH_RATE") != "" {
		b.paced(kube, framework.BenchEnvInt(t, "EVENT_APISERVER_HISTORY_BENCH_RATE", 0),
			time.Duration(framework.BenchEnvInt(t, "EVENT_APISERVER_HISTORY_BENCH_SECONDS", 60))*time.Second)
	}
	quiet := b.lagRound()

	// The counting clients wait far longer than --history-query-timeout
	// (30 s) and ask for as long (the timeout parameter): a count cut there
	// is answered with the server's 504, not abandoned by the client, and
	// one that overruns it (SQLite's text search at 10^6 ran past 2
	// minutes) still holds its reader until the server ends it.
	patient := *b.replica.Client
	httpClient := *patient.HTTP
	httpClient.Timeout = 10 * time.Minute
	patient.HTTP = &httpClient
	history := framework.HistoryClient(t, &patient)
	spec := historyv1alpha1.EventRecordCountSpec{GroupBy: []string{"regarding.name", "reason"}, FieldSelector: "since=336h,note.contains=container",
		BucketSize: metav1.Duration{Duration: time.Hour}, Top: 100}
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var queries, timeouts, counted, longest atomic.Int64
	var mu sync.Mutex
	var errs []error
	started := time.Now()
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				t0 := time.Now()
				got, err := history.ClusterEventRecordCounts().Create(ctx, &historyv1alpha1.ClusterEventRecordCount{Spec: spec}, metav1.CreateOptions{})
				if ctx.Err() != nil {
					return
				}
				for took := int64(time.Since(t0)); ; {
					old := longest.Load()
					if took <= old || longest.CompareAndSwap(old, took) {
						break
					}
				}
				if apierrors.IsTimeout(err) {
					timeouts.Add(1)
					continue
				}
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
				queries.Add(1)
				counted.Store(got.Status.Total)
			}
		}()
	}
	// The queries are running before the round starts: the replica serves
	// all four (apiserver_current_inflight_requests, the most mutating
	// requests in flight in the last second: a count is a create), or the
	// first answer came.
	err := wait.PollUntilContextTimeout(ctx, framework.PollInterval, 10*time.Minute, true, func(context.Context) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return queries.Load()+timeouts.Load() > 0 || len(errs) > 0 ||
			b.replica.Metric(t, `apiserver_current_inflight_requests{request_kind="mutating"}`) >= 4, nil
	})
	if err != nil {
		t.Fatalf("no count answered: %v", err)
	}
	loaded := b.lagRound()
	stop()
	wg.Wait()
	elapsed := time.Since(started)
	if len(errs) > 0 {
		t.Fatalf("the queries failed: %v", errs)
	}
	t.Logf("quiet: %s", quiet)
	t.Logf("under 4 clients counting in a loop (%d counts in %v, %.2f/s, each of %d versions; %d more cut at the query timeout; the longest ended took %v): %s",
		queries.Load(), elapsed.Round(time.Second), float64(queries.Load())/elapsed.Seconds(), counted.Load(), timeouts.Load(),
		time.Duration(longest.Load()).Round(time.Millisecond), loaded)
	t.Logf("p99 lag %.2f s quiet, %.2f s loaded; creates answered %.0f/s quiet, %.0f/s loaded (offered %d/s, 0 for back to back; missed %d quiet, %d loaded); drain %v quiet, %v loaded",
		quiet.pct(0.99), loaded.pct(0.99), quiet.rate, loaded.rate, b.rate, quiet.missed, loaded.missed, quiet.drain.Round(time.Millisecond), loaded.drain.Round(time.Millisecond))
}

// captureLoadStore is the store EVENT_APISERVER_HISTORY_BENCH_STORE names:
// sqlite (the default, the replica's own file, or with HISTORY_BENCH_DB
// the file the SQLite store's benchmarks filled there, pkg/history/sqlite's
// buildBenchDB) or postgres, a pgtest cluster, or with HISTORY_BENCH_PGDIR
// the one kept there by the PostgreSQL store's benchmarks
// (pkg/history/postgres, benchStore). A kept history is what the queries
// read, and the replica's capture adds to it; the replica keeps every
// version (--history-retention=0): retention would delete the kept
// history's oldest hours, which a later benchmark reuses. A kept history's
// capture position is forgotten first (forgetCapturePosition), so that one
// fill serves any number of runs.
func captureLoadStore(t *testing.T) []string {
	switch store := os.Getenv("EVENT_APISERVER_HISTORY_BENCH_STORE"); store {
	case "", "sqlite":
		if path := os.Getenv("HISTORY_BENCH_DB"); path != "" {
			// A missing file would be created empty, and the run would
			// measure a small history while saying it read a large one.
			if _, err := os.Stat(path); err != nil {
				t.Fatalf("HISTORY_BENCH_DB: %v (fill it with pkg/history/sqlite's benchmarks first)", err)
			}
			db, err := sql.Open("sqlite", path)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			forgetCapturePosition(t, func(ctx context.Context, statement string) error {
				_, err := db.ExecContext(ctx, statement)
				return err
			}, "progress")
			return []string{"--history-dsn=" + path, "--history-retention=0"}
		}
		return nil
	case "postgres":
		if dir := os.Getenv("HISTORY_BENCH_PGDIR"); dir != "" {
			dsn := pgtest.StartKept(t, dir)
			conn, err := pgx.Connect(context.Background(), dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(context.Background())
			forgetCapturePosition(t, func(ctx context.Context, statement string) error {
				_, err := conn.Exec(ctx, statement)
				return err
			}, "capture_progress")
			return []string{"--history-store=postgres", "--history-dsn=" + dsn, "--history-retention=0"}
		}
		return []string{"--history-store=postgres", "--history-dsn=" + pgtest.Start(t)}
	default:
		t.Fatalf("EVENT_APISERVER_HISTORY_BENCH_STORE=%q: want sqlite or postgres", store)
		return nil
	}
}

// forgetCapturePosition deletes what a kept history's last run captured up
// to: resourceVersions of that run's kube-apiserver, ahead of the new one's,
// which the replica would take for an etcd restored from a backup and relist
// after --history-capture-behind-timeout, while its capture_revision still
// showed the old position (docs/benchmarks.md, SQLite at 10^6). With no
// position the replica captures the new kube-apiserver from its start, as on
// an empty history; the versions the queries read are kept. table is the
// store's capture-position table (its Spelling's Progress).
func forgetCapturePosition(t *testing.T, exec func(context.Context, string) error, table string) {
	t.Helper()
	// The stores' benchmarks mark a complete fill with a position of
	// their own ("bench <end> <rows>"), which they look for to reuse it.
	if err := exec(context.Background(), "DELETE FROM "+table+" WHERE source NOT LIKE 'bench %'"); err != nil {
		t.Fatalf("forgetting the kept history's capture position: %v", err)
	}
}
