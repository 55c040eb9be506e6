package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/eventapiserver/event-apiserver/internal/pgtest"
	"github.com/eventapiserver/event-apiserver/pkg/history"
	"github.com/eventapiserver/event-apiserver/pkg/history/sqlstore"
	"github.com/eventapiserver/event-apiserver/pkg/history/storetest"
)

// unversioned is the schema the servers before versions ran at every
// start, ADD COLUMN IF NOT EXISTS included (postgres.go until 2026-11-28).
const unversioned = `
CREATE TABLE IF NOT EXISTS event_versions (
	uid text NOT NULL,
	revision bigint NOT NULL,
	namespace text NOT NULL,
	name text NOT NULL,
	regarding_uid text NOT NULL,
	regarding_name text NOT NULL,
	regarding_namespace text NOT NULL,
	regarding_kind text NOT NULL,
	related_uid text NOT NULL,
	related_name text NOT NULL,
	reason text NOT NULL,
	type text NOT NULL,
	reporting_controller text NOT NULL,
	last_seen bigint NOT NULL,
	observed_at bigint NOT NULL,
	object bytea NOT NULL,
	PRIMARY KEY (uid, revision, last_seen)
) PARTITION BY RANGE (last_seen);
CREATE INDEX IF NOT EXISTS event_versions_by_time ON event_versions (last_seen DESC, revision DESC);
CREATE INDEX IF NOT EXISTS event_versions_by_namespace ON event_versions (namespace, last_seen DESC, revision DESC);
CREATE INDEX IF NOT EXISTS event_versions_by_name ON event_versions (namespace, name, revision);
CREATE INDEX IF NOT EXISTS event_versions_by_regarding_uid ON event_versions (regarding_uid, last_seen DESC, revision DESC);
CREATE INDEX IF NOT EXISTS event_versions_by_regarding_name ON event_versions (regarding_name, last_seen DESC, revision DESC);
CREATE INDEX IF NOT EXISTS event_versions_by_related_uid ON event_versions (related_uid, last_seen DESC, revision DESC);
CREATE INDEX IF NOT EXISTS event_versions_by_related_name ON event_versions (related_name, last_seen DESC, revision DESC);
CREATE TABLE IF NOT EXISTS event_deletions (
	uid text PRIMARY KEY,
	revision bigint NOT NULL,
	deleted_at bigint NOT NULL
);
CREATE TABLE IF NOT EXISTS capture_progress (
	source text PRIMARY KEY,
	revision bigint NOT NULL
);
ALTER TABLE event_versions ADD COLUMN IF NOT EXISTS seq bigint NOT NULL DEFAULT 0;
ALTER TABLE event_deletions ADD COLUMN IF NOT EXISTS seq bigint NOT NULL DEFAULT 0;
CREATE INDEX IF NOT EXISTS event_versions_by_seq ON event_versions (seq) WHERE seq > 0;
CREATE INDEX IF NOT EXISTS event_deletions_by_seq ON event_deletions (seq) WHERE seq > 0;
-- An end's block of feed positions, first_seq to seq (the SQLite store's
-- endPosition); 0 for ends stored before blocks, which have one, seq.
ALTER TABLE event_deletions ADD COLUMN IF NOT EXISTS first_seq bigint NOT NULL DEFAULT 0;
CREATE TABLE IF NOT EXISTS feed_head (
	id int PRIMARY KEY CHECK (id = 1),
	position bigint NOT NULL,
	floor bigint NOT NULL
);
INSERT INTO feed_head (id, position, floor) VALUES (1, 1, 1) ON CONFLICT (id) DO NOTHING;
`

// beforeFeed is what it was before the feed: its first statements.
var beforeFeed = unversioned[:strings.Index(unversioned, "ALTER TABLE")]

// exec runs a statement in the database at dsn.
func exec(t testing.TB, dsn, statement string, args ...any) {
	t.Helper()
	if _, err := connect(t, dsn).Exec(context.Background(), statement, args...); err != nil {
		t.Fatalf("%s: %v", statement, err)
	}
}

// dump renders a query's rows in the database at dsn as text.
func dump(t *testing.T, dsn, query string) string {
	t.Helper()
	rows, err := connect(t, dsn).Query(context.Background(), query)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out strings.Builder
	for rows.Next() {
		values, err := rows.Values()
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintln(&out, values...)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// columnsAndIndexes describes the schema of the tables history keeps.
const columnsAndIndexes = `SELECT table_name, column_name, data_type, is_nullable, coalesce(column_default, '')
	FROM information_schema.columns WHERE table_schema = 'public' AND table_name NOT LIKE 'event_versions_%'
	ORDER BY table_name, column_name`

const indexes = `SELECT indexname, regexp_replace(indexdef, ' ON (ONLY )?', ' ON ') FROM pg_indexes
	WHERE schemaname = 'public' AND tablename NOT LIKE 'event_versions_%' ORDER BY indexname`

// TestMigrateUnversioned: a database of a server from before versions
// (the last one's, and one from before the feed) opens with its rows at
// the feed's origin, takes writes idempotently, feeds the new ones, and is
// then at the known version with the columns and indexes of a new one.
func TestMigrateUnversioned(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.Start(t)
	fresh := openTest(t, dsn)
	if _, err := fresh.Feed(ctx); err != nil {
		t.Fatal(err)
	}
	freshDSN := fresh.d.pool.Config().ConnString()
	d := dayOf(storetest.Legacy.LastSeen.UnixNano())
	for name, old := range map[string]string{"last unversioned": unversioned, "before the feed": beforeFeed} {
		t.Run(name, func(t *testing.T) {
			db := newDatabase(t, dsn)
			exec(t, db, old)
			exec(t, db, fmt.Sprintf(`CREATE TABLE %s PARTITION OF event_versions FOR VALUES FROM (%d) TO (%d)`,
				partitionName(d), dayStart(d), dayStart(d+1)))
			insert, args := storetest.LegacyInsert("event_versions", spelling.Placeholder)
			exec(t, db, insert, args...)
			s, err := Open(ctx, db)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			storetest.Migrated(t, s, schema.Known())
			for _, query := range []string{columnsAndIndexes, indexes} {
				if got, want := dump(t, db, query), dump(t, freshDSN, query); got != want {
					t.Errorf("after migration:\n%s\nin a new database:\n%s", got, want)
				}
			}
		})
	}
}

// TestMigrateTogether: replicas opening a new database at once take turns
// migrating it, and each finds it at the version it knows.
func TestMigrateTogether(t *testing.T) {
	ctx := context.Background()
	db := newDatabase(t, pgtest.Start(t))
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := Open(ctx, db)
			if err == nil {
				defer s.Close()
				if _, err = s.Feed(ctx); err == nil && s.Schema().Version != schema.Known() {
					err = fmt.Errorf("schema %+v", s.Schema())
				}
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	// Nothing since the baseline broke reads: a server of any version reads.
	if got := dump(t, db, `SELECT version, readable_from FROM history_schema`); got != fmt.Sprintln(schema.Known(), schema.Baseline.Version) {
		t.Errorf("history_schema holds %q", got)
	}
}

// newer is this server's schema and one more migration, as a newer build's.
func newer(base sqlstore.Schema, breaksReads bool) sqlstore.Schema {
	version := base.Known() + 1
	base.After = append(append([]sqlstore.Migration{}, base.After...), sqlstore.Migration{
		Version: version, About: "a test's", BreaksReads: breaksReads,
		SQL: fmt.Sprintf(`ALTER TABLE event_versions ADD COLUMN test_%d text`, version),
	})
	return base
}

// TestNewerSchema: a replica writes batches while a newer one opens the same
// database and migrates it. Every batch the old one stored before is there,
// the migration waited for the one in flight, and from then on the old one
// refuses to write, saying why, and still reads; after a migration that
// breaks reads, it refuses those too.
func TestNewerSchema(t *testing.T) {
	ctx := context.Background()
	db := newDatabase(t, pgtest.Start(t))
	old, err := Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	started := make(chan struct{})
	stored := make(chan int, 1)
	go func() {
		n := 0
		for ; ; n++ {
			v := storetest.Version(fmt.Sprint("u", n), int64(n+1), "p", n%60)
			if err := old.Write(ctx, history.Batch{Source: "src", Revision: int64(n + 1), Versions: []history.Version{v}}); err != nil {
				if !errors.Is(err, history.ErrSchemaNewer) {
					t.Errorf("write %d: %v", n, err)
				}
				stored <- n
				return
			}
			if n == 10 {
				close(started)
			}
		}
	}()
	<-started
	next, err := open(ctx, db, newer(schema, false))
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	if st := next.Schema(); st.Version != schema.Known()+1 {
		t.Fatalf("the newer replica's schema: %+v", st)
	}
	n := <-stored
	got, err := old.List(ctx, history.Query{})
	if err != nil || len(got) != n {
		t.Fatalf("the old replica reads %d versions (%v); it stored %d", len(got), err, n)
	}
	if rev, _, err := next.Progress(ctx, "src"); err != nil || rev != int64(n) {
		t.Errorf("progress %d (%v), want %d: the refused batch left none", rev, err, n)
	}
	if err := old.Schema().WriteError(); err == nil || old.Schema().ReadError() != nil {
		t.Errorf("the old replica's schema state: %+v", old.Schema())
	}
	if err := next.Write(ctx, history.Batch{Versions: []history.Version{storetest.Version("new", 1000, "p", 1)}}); err != nil {
		t.Fatalf("the newer replica's write: %v", err)
	}

	breaking, err := open(ctx, db, newer(newer(schema, false), true))
	if err != nil {
		t.Fatal(err)
	}
	defer breaking.Close()
	if _, err := breaking.Feed(ctx); err != nil {
		t.Fatal(err)
	}
	// The old replica learns of it at its next write, and reads no more.
	if err := old.Write(ctx, history.Batch{}); !errors.Is(err, history.ErrSchemaNewer) {
		t.Fatalf("write after a breaking migration: %v", err)
	}
	if _, err := old.List(ctx, history.Query{}); !errors.Is(err, history.ErrSchemaNewer) {
		t.Errorf("read after a breaking migration: %v, want a refusal", err)
	}
	if err := next.Write(ctx, history.Batch{}); !errors.Is(err, history.ErrSchemaNewer) {
		t.Errorf("the once newer replica's write after a newer migration: %v", err)
	}
}
