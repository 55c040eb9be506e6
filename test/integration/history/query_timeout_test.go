package history

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/eventapiserver/event-apiserver/internal/pgtest"
	historyv1alpha1 "github.com/eventapiserver/event-apiserver/pkg/apis/history/v1alpha1"
	"github.com/eventapiserver/event-apiserver/pkg/history"
	"github.com/eventapiserver/event-apiserver/pkg/history/postgres"
	"github.com/eventapiserver/event-apiserver/pkg/history/sqlite"
	"github.com/eventapiserver/event-apiserver/pkg/history/storetest"
	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// queryTimeoutRows is the history the timed-out queries read: the count
// and the search below read every version's note, so their cost grows
// with it, where a plain list's first page reads a few index entries
// whatever the size. At this size the count takes a few hundred
// milliseconds on either store, and the search sorts the window's some
// 26,000 versions holding the word by time: queryTimeout is short enough
// that neither ends within it on a fast machine, and long enough for a
// plain list's first page, a few milliseconds.
const (
	queryTimeoutRows = 30000
	queryTimeout     = "10ms"
)

// TestHistoryQueryTimeout is issue 45's statement timeout on both stores:
// the heaviest count the limits allow and a text search past
// --history-query-timeout are answered with kube-apiserver's 504 naming
// the flag, with no Retry-After (client-go would run the query that just
// ran out of time again, up to ten times: counts answered after 11 times
// the limit), before the client's own timeout; the database's work ends
// with them (PostgreSQL shows no statement left running), and the server
// answers the next list.
func TestHistoryQueryTimeout(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// fill opens the store, fills it and returns the server's flags
		// for it, and the DSN for pg_stat_activity ("" for SQLite).
		fill func(t *testing.T, ctx context.Context, h storetest.BenchHistory) ([]string, string)
	}{
		{"sqlite", func(t *testing.T, ctx context.Context, h storetest.BenchHistory) ([]string, string) {
			path := filepath.Join(t.TempDir(), "history.db")
			s, err := sqlite.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			fillHistory(t, ctx, s, h)
			return []string{"--history-dsn=" + path}, ""
		}},
		{"postgres", func(t *testing.T, ctx context.Context, h storetest.BenchHistory) ([]string, string) {
			dsn := pgtest.Start(t)
			s, err := postgres.Open(ctx, dsn)
			if err != nil {
				t.Fatal(err)
			}
			fillHistory(t, ctx, s, h)
			return []string{"--history-store=postgres", "--history-dsn=" + dsn}, dsn
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := framework.PollCtx(t)
			args, dsn := tc.fill(t, ctx, storetest.NewBenchHistory(queryTimeoutRows, time.Now()))
			server := framework.StartServer(t, framework.ServerOptions{
				EtcdServers: framework.StartEtcd(t).ClientURL(),
				ExtraArgs:   append(args, "--history-query-timeout="+queryTimeout),
			})
			raw := framework.AdminRawClient(t, server)
			client := framework.HistoryClient(t, raw)
			const group = "/apis/history.eventapiserver.io/v1alpha1/"
			// As TestHistoryCaptureUnderQueryLoad's clients count.
			spec := historyv1alpha1.EventRecordCountSpec{GroupBy: []string{"regarding.name", "reason"}, FieldSelector: "since=336h,note.contains=container",
				BucketSize: metav1.Duration{Duration: time.Hour}, Top: 100}
			body, err := json.Marshal(&historyv1alpha1.ClusterEventRecordCount{
				TypeMeta: metav1.TypeMeta{APIVersion: historyv1alpha1.SchemeGroupVersion.String(), Kind: "ClusterEventRecordCount"}, Spec: spec})
			if err != nil {
				t.Fatal(err)
			}
			search := group + "eventrecords?limit=500&fieldSelector=" + url.QueryEscape("since=336h,note.contains=container")
			for _, q := range []struct {
				what   string
				method string
				path   string
				body   []byte
			}{
				{"count", http.MethodPost, group + "clustereventrecordcounts", body},
				{"text search", http.MethodGet, search, nil},
			} {
				resp := raw.Do(t, q.method, q.path, q.body, map[string]string{"Content-Type": "application/json"})
				var status metav1.Status
				if err := json.Unmarshal(resp.Body, &status); err != nil {
					t.Fatalf("%s: %d %s", q.what, resp.Code, resp.Body)
				}
				if resp.Code != http.StatusGatewayTimeout || status.Reason != metav1.StatusReasonTimeout ||
					!strings.Contains(status.Message, "(--history-query-timeout)") {
					t.Errorf("%s: %d %s, want 504 Timeout naming --history-query-timeout", q.what, resp.Code, resp.Body)
				}
				if after := resp.Header.Get("Retry-After"); after != "" {
					t.Errorf("%s: Retry-After %q: client-go would run the query again", q.what, after)
				}
			}
			// Through client-go, which retries what asks for a retry: the
			// 504 comes before the client's own timeout.
			patient, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			_, err = client.ClusterEventRecordCounts().Create(patient, &historyv1alpha1.ClusterEventRecordCount{Spec: spec}, metav1.CreateOptions{})
			if !apierrors.IsTimeout(err) || !strings.Contains(err.Error(), "--history-query-timeout") || patient.Err() != nil {
				t.Errorf("count through client-go: %v, want its 504 before the client's timeout", err)
			}

			if dsn != "" {
				// Nothing the server started is left running: a cut
				// statement is canceled on the server, not only abandoned by
				// its client.
				conn, err := pgx.Connect(ctx, dsn)
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = conn.Close(context.Background()) }()
				var running []string
				err = wait.PollUntilContextTimeout(ctx, framework.PollInterval, 30*time.Second, true, func(ctx context.Context) (bool, error) {
					running = nil
					rows, err := conn.Query(ctx, `SELECT query FROM pg_stat_activity WHERE state = 'active' AND pid <> pg_backend_pid() AND query ILIKE '%note%'`)
					if err != nil {
						return false, err
					}
					running, err = pgx.CollectRows(rows, pgx.RowTo[string])
					return err == nil && len(running) == 0, err
				})
				if err != nil {
					t.Errorf("statements still running after their 504: %v: %q", err, running)
				}
			}

			// The server answers the next queries, a plain list's first
			// page (polled: this one too is under the small limit, and the
			// machine may be slow for a moment).
			err = wait.PollUntilContextTimeout(ctx, framework.PollInterval, 30*time.Second, true, func(ctx context.Context) (bool, error) {
				list, err := client.EventRecords("").List(ctx, metav1.ListOptions{Limit: 5})
				return err == nil && len(list.Items) == 5, nil
			})
			if err != nil {
				t.Fatalf("no plain list answered after the timeouts: %v", err)
			}
		})
	}
}

// fillHistory writes h into s as capture would have, then closes s.
func fillHistory(t *testing.T, ctx context.Context, s history.Store, h storetest.BenchHistory) {
	t.Helper()
	if err := h.Generate(5000, func(b history.Batch) error { return s.Write(ctx, b) }); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}
