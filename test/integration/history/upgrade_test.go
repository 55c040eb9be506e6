package history

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/eventapiserver/event-apiserver/internal/pgtest"
	"github.com/eventapiserver/event-apiserver/test/integration/framework"
)

// TestHistoryRollingUpgrade replaces, one after the other, the two
// replicas capturing side by side into one PostgreSQL with a build whose
// schema is one version newer (the tag historyupgradetest adds a migration
// only that build has), while Events keep coming. Once the first newer
// replica has migrated the database, the old one left refuses to write as
// docs/operations.md says: its log, event_apiserver_history_schema_refused
// and /readyz (event-history-schema) say so, and it still serves
// eventrecords. In the end every Event version etcd held is in the
// database exactly once, by (uid, resourceVersion).
func TestHistoryRollingUpgrade(t *testing.T) {
	t.Parallel()
	newer := buildNewerServer(t)
	dsn := pgtest.Start(t)
	etcd := framework.StartEtcd(t)
	opts := framework.ServerOptions{
		EtcdServers: etcd.ClientURL(),
		ExtraArgs:   []string{"--history-store=postgres", "--history-dsn=" + dsn, "--history-batch-interval=300ms"},
	}
	first := framework.StartServer(t, opts)
	second := framework.StartServer(t, opts)
	known := schemaVersion(t, dsn)
	truth := framework.WatchEtcdTruth(t, etcd.Client(t))
	ctx := framework.PollCtx(t)
	ns := framework.UniqueName("upgrade")
	w := framework.StartHistoryWriter(second.Client(t), ns)
	defer func() { w.Stop() }()
	waitVersions := func(what string, n int) { t.Helper(); truth.WaitVersions(ctx, t, w, what, n) }
	waitVersions("both old replicas capturing", 60)

	// The first replica is replaced by the newer build, which migrates.
	if err := first.Stop(); err != nil {
		t.Fatal(err)
	}
	upgraded := opts
	upgraded.Binary = newer
	first = framework.StartServer(t, upgraded)
	if got := schemaVersion(t, dsn); got != known+1 {
		t.Fatalf("after the newer replica started the schema is at %d, want %d", got, known+1)
	}
	before, _ := truth.Snapshot(t)
	waitVersions("the old and the newer replica side by side", len(before)+60)

	// The old replica refuses to write, and says so three ways.
	old := framework.AdminRawClient(t, second)
	err := wait.PollUntilContextTimeout(ctx, framework.PollInterval, 60*time.Second, true, func(context.Context) (bool, error) {
		return second.LogContains("Refusing to write Event history"), nil
	})
	if err != nil {
		t.Fatal("the old replica never logged its refusal to write")
	}
	config := second.Config(t)
	if v := framework.MetricValue(t, config, "event_apiserver_history_schema_refused", map[string]string{"access": "write"}); v != 1 {
		t.Errorf("old replica: schema_refused{access=write} = %v, want 1", v)
	}
	if v := framework.MetricValue(t, config, "event_apiserver_history_schema_refused", map[string]string{"access": "read"}); v != 0 {
		t.Errorf("old replica: schema_refused{access=read} = %v, want 0: the newer migration only adds a column", v)
	}
	for side, want := range map[string]int{"store": known + 1, "server": known} {
		if v := framework.MetricValue(t, config, "event_apiserver_history_schema_version", map[string]string{"schema": side}); v != float64(want) {
			t.Errorf("old replica: schema_version{schema=%s} = %v, want %d", side, v, want)
		}
	}
	if resp := old.Do(t, "GET", "/readyz?verbose", nil, nil); resp.Code == 200 || !strings.Contains(string(resp.Body), "[-]event-history-schema failed") {
		t.Errorf("old replica's /readyz: %d %s", resp.Code, resp.Body)
	}
	if resp := framework.AdminRawClient(t, first).Do(t, "GET", "/readyz?verbose", nil, nil); resp.Code != 200 || !strings.Contains(string(resp.Body), "[+]event-history-schema ok") {
		t.Errorf("newer replica's /readyz: %d %s", resp.Code, resp.Body)
	}
	// It still serves reads: the newer schema only adds a column.
	if records := framework.ListAllEventRecords(t, old, ns, "", 500); len(records) < len(before) {
		t.Errorf("the old replica lists %d records, etcd held %d versions before the upgrade began", len(records), len(before))
	}

	// The rollout ends: the second replica is replaced too, Events now
	// written through the first.
	w.Stop()
	if errs := w.Errors(); len(errs) > 0 {
		t.Fatalf("writer: %v", errs)
	}
	w = framework.StartHistoryWriter(first.Client(t), framework.UniqueName("upgrade"))
	if err := second.Stop(); err != nil {
		t.Fatal(err)
	}
	second = framework.StartServer(t, upgraded)
	after, _ := truth.Snapshot(t)
	waitVersions("after the rollout", len(after)+60)
	w.Stop()
	if errs := w.Errors(); len(errs) > 0 {
		t.Fatalf("writer: %v", errs)
	}

	// Every version etcd held is stored exactly once.
	head, err := etcd.Client(t).Get(ctx, framework.EventsPrefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	var stored map[framework.VersionKey]int
	err = wait.PollUntilContextTimeout(ctx, framework.PollInterval, 60*time.Second, true, func(context.Context) (bool, error) {
		if truth.Revision() < head.Header.Revision {
			return false, nil
		}
		versions, _ := truth.Snapshot(t)
		stored = storedVersions(t, dsn)
		for k := range versions {
			if stored[k] == 0 {
				return false, nil
			}
		}
		return true, nil
	})
	versions, _ := truth.Snapshot(t)
	t.Logf("etcd held %d versions; the database holds %d", len(versions), len(stored))
	missing := 0
	for k := range versions {
		if stored[k] == 0 {
			missing++
			if missing <= 10 {
				t.Errorf("version %v is missing from history", k)
			}
		}
	}
	if err != nil || missing > 0 {
		t.Errorf("%d of %d versions missing (%v)", missing, len(versions), err)
	}
	for k, n := range stored {
		if n != 1 {
			t.Errorf("version %v stored %d times", k, n)
		}
		if versions[k] == nil {
			t.Errorf("version %v is in history but etcd never held it", k)
		}
	}
}

// buildNewerServer builds the server with the tag historyupgradetest,
// which adds one migration to its PostgreSQL schema.
func buildNewerServer(t *testing.T) string {
	t.Helper()
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "event-apiserver")
	args := []string{"build", "-tags", "historyupgradetest", "-o", out}
	if framework.RaceEnabled() {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, "./cmd/event-apiserver")...)
	cmd.Dir = root
	if output, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the newer server: %v\n%s", err, output)
	}
	return out
}

// schemaVersion is the schema version recorded in the database at dsn.
func schemaVersion(t *testing.T, dsn string) int {
	t.Helper()
	var version int
	queryDatabase(t, dsn, func(conn *pgx.Conn) error {
		return conn.QueryRow(context.Background(), `SELECT version FROM history_schema`).Scan(&version)
	})
	return version
}

// storedVersions counts the rows of the database at dsn by version.
func storedVersions(t *testing.T, dsn string) map[framework.VersionKey]int {
	t.Helper()
	stored := map[framework.VersionKey]int{}
	queryDatabase(t, dsn, func(conn *pgx.Conn) error {
		rows, err := conn.Query(context.Background(), `SELECT uid, revision::text FROM event_versions`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var k framework.VersionKey
			if err := rows.Scan(&k.UID, &k.RV); err != nil {
				return err
			}
			stored[k]++
		}
		return rows.Err()
	})
	return stored
}

func queryDatabase(t *testing.T, dsn string, query func(*pgx.Conn) error) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if err := query(conn); err != nil {
		t.Fatal(err)
	}
}
