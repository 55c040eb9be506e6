package sqlite

import (
	"context"
	"database/sql"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/eventapiserver/event-apiserver/pkg/history"
	"github.com/eventapiserver/event-apiserver/pkg/history/storetest"
)

func openTest(t *testing.T) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "history", "history.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// objectVersions returns the versions of n Events "u1".."un" at revisions
// 1..n, each with an object of size bytes.
func objectVersions(n, size int) []history.Version {
	versions := make([]history.Version, 0, n)
	for i := 1; i <= n; i++ {
		v := storetest.Version(fmt.Sprint("u", i), int64(i), "p", i)
		v.Object = make([]byte, size)
		versions = append(versions, v)
	}
	return versions
}

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) history.Store { return openTest(t) })
}

func TestRetain(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	versions := objectVersions(50, 4096)
	if err := s.Write(ctx, history.Batch{Versions: versions, Deletions: []history.Deletion{{UID: "u1", Revision: 51, At: storetest.Base.Add(time.Second)}}}); err != nil {
		t.Fatal(err)
	}
	// Written again (a second replica, a resume): stored and counted once.
	if err := s.Write(ctx, history.Batch{Versions: versions[:20]}); err != nil {
		t.Fatal(err)
	}
	if st, err := s.Stats(ctx); err != nil || st.Rows != 50 {
		t.Fatalf("rows = %d (%v), want 50", st.Rows, err)
	}
	// Observed at storetest.Base+rev seconds: a cutoff at storetest.Base+11s removes revisions 1-10.
	n, err := s.Retain(ctx, storetest.Base.Add(11*time.Second), 0, 3)
	if err != nil || n != 10 {
		t.Fatalf("age retention deleted %d (%v), want 10", n, err)
	}
	before, _ := s.Stats(ctx)
	if before.Rows != 40 {
		t.Fatalf("rows = %d, want 40", before.Rows)
	}
	var deletions int
	if err := s.db.QueryRow(`SELECT count(*) FROM deletions`).Scan(&deletions); err != nil || deletions != 0 {
		t.Fatalf("deletions left = %d (%v): a deletion older than every version must go", deletions, err)
	}
	limit := before.Bytes / 2
	if _, err := s.Retain(ctx, time.Time{}, limit, 5); err != nil {
		t.Fatal(err)
	}
	after, _ := s.Stats(ctx)
	if after.Bytes > limit || after.Rows == 0 || after.Rows >= 40 {
		t.Fatalf("after size retention: %+v, limit %d", after, limit)
	}
	got, _ := s.List(ctx, history.Query{Limit: 1})
	if len(got) != 1 || got[0].Revision != 50 {
		t.Fatalf("size retention must drop the oldest first, newest left: %v", storetest.Revisions(got))
	}
}

// TestReopen: the row counter survives a restart, and a file made before it
// existed gets it counted once.
func TestReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "history.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Write(ctx, history.Batch{Versions: []history.Version{storetest.Version("a", 1, "p", 1), storetest.Version("b", 2, "p", 2)}}); err != nil {
		t.Fatal(err)
	}
	for i, drop := range []bool{false, true} {
		if drop {
			if _, err := s.db.Exec(`DELETE FROM counters`); err != nil {
				t.Fatal(err)
			}
		}
		s.Close()
		if s, err = Open(path); err != nil {
			t.Fatalf("reopen %d: %v", i, err)
		}
		if st, err := s.Stats(ctx); err != nil || st.Rows != 2 {
			t.Fatalf("reopen %d: rows = %d (%v), want 2", i, st.Rows, err)
		}
	}
	s.Close()
}

// TestWriteMany: batches that fill several multi-row INSERTs, exactly or
// with a remainder, store every version and deletion once, also when
// written again.
func TestWriteMany(t *testing.T) {
	ctx := context.Background()
	for _, n := range []int{1, 7, 8, 9, 42, 43, 100} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			s := openTest(t)
			var batch history.Batch
			for i := 1; i <= n; i++ {
				uid := fmt.Sprint("u", i)
				batch.Versions = append(batch.Versions, storetest.Version(uid, int64(i), "p", i))
				batch.Deletions = append(batch.Deletions, history.Deletion{UID: uid, Revision: int64(n + i), At: storetest.Base.Add(time.Duration(i) * time.Hour)})
			}
			for range 2 {
				if err := s.Write(ctx, batch); err != nil {
					t.Fatal(err)
				}
			}
			if st, err := s.Stats(ctx); err != nil || st.Rows != int64(n) {
				t.Fatalf("rows = %d (%v), want %d", st.Rows, err, n)
			}
			records, err := s.List(ctx, history.Query{})
			if err != nil || len(records) != n {
				t.Fatalf("listed %d (%v), want %d", len(records), err, n)
			}
			for _, r := range records {
				var i int64
				fmt.Sscanf(r.UID, "u%d", &i)
				if r.Revision != i || r.DeletedAt == nil || r.DeletedRevision != int64(n)+i {
					t.Errorf("%s: revision %d, deleted at %d (%v), want %d and %d", r.UID, r.Revision, r.DeletedRevision, r.DeletedAt, i, int64(n)+i)
				}
			}
		})
	}
}

// TestMigrateV1: a file written by schema version 1 (no user_version, a
// primary key on (revision, uid), versions_by_name and versions_by_observed,
// no feed) opens with its rows, at the feed's origin, takes writes
// idempotently, feeds the new ones and says the current version; a file
// from a newer schema is refused.
func TestMigrateV1(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "history.db")
	old, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	v1 := strings.Replace(strings.TrimSuffix(schema, feedSchema), ",\n\tseq INTEGER NOT NULL DEFAULT 0,\n\tfirst_seq INTEGER NOT NULL DEFAULT 0\n);", "\n);", 1)
	v1 = strings.ReplaceAll(v1, ",\n\tseq INTEGER NOT NULL DEFAULT 0\n);", "\n);")
	v1 = strings.Replace(v1, "\tobject BLOB NOT NULL\n);", "\tobject BLOB NOT NULL,\n\tPRIMARY KEY (revision, uid)\n);", 1)
	v1 = strings.Replace(v1, "CREATE UNIQUE INDEX IF NOT EXISTS versions_by_key", "CREATE INDEX IF NOT EXISTS versions_by_name", 1)
	v1 += "CREATE INDEX IF NOT EXISTS versions_by_observed ON versions (observed_at);"
	if _, err := old.Exec(v1); err != nil {
		t.Fatal(err)
	}
	a := storetest.Version("a", 1, "p", 1)
	if _, err := old.Exec(`INSERT INTO versions VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		a.UID, a.Revision, a.Namespace, a.Name, a.RegardingUID, a.RegardingName, a.RegardingNamespace, a.RegardingKind,
		a.RelatedUID, a.RelatedName, a.Reason, a.Type, a.ReportingController, a.LastSeen.UnixNano(), a.ObservedAt.UnixNano(), a.Object); err != nil {
		t.Fatal(err)
	}
	old.Close()

	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	batch := history.Batch{Versions: []history.Version{a, storetest.Version("b", 2, "p", 2)}}
	for range 2 {
		if err := s.Write(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	if st, err := s.Stats(ctx); err != nil || st.Rows != 2 {
		t.Fatalf("rows = %d (%v), want 2", st.Rows, err)
	}
	got, err := s.List(ctx, history.Query{})
	if err != nil || len(got) != 2 {
		t.Fatalf("listed %d (%v), want 2", len(got), err)
	}
	// b is new: in the feed. a was stored before it: at the origin.
	if got[0].UID != "b" || got[0].Position <= history.FeedOrigin || got[1].Position != history.FeedOrigin {
		t.Errorf("positions after migration: %s at %d, %s at %d", got[0].UID, got[0].Position, got[1].UID, got[1].Position)
	}
	if changes, err := s.Changes(ctx, history.ChangeQuery{After: history.FeedOrigin, Through: got[0].Position}); err != nil || len(changes) != 1 || changes[0].UID != "b" {
		t.Errorf("feed after migration: %v (%v), want b only", changes, err)
	}
	var version int
	var indexes string
	if err := s.db.QueryRow(`PRAGMA user_version`).Scan(&version); err != nil || version != schemaVersion {
		t.Fatalf("user_version = %d (%v), want %d", version, err, schemaVersion)
	}
	if err := s.db.QueryRow(`SELECT group_concat(name, ' ') FROM sqlite_schema WHERE type = 'index' AND name LIKE 'versions_by_%'`).Scan(&indexes); err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, name := range strings.Fields(indexes) {
		have[name] = true
	}
	if have["versions_by_observed"] || have["versions_by_name"] || !have["versions_by_key"] {
		t.Errorf("indexes after migration: %s", indexes)
	}
	if _, err := s.db.Exec(fmt.Sprintf(`PRAGMA user_version = %d`, schemaVersion+1)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if s, err := Open(path); err == nil {
		s.Close()
		t.Fatal("a file of a newer schema version opened")
	} else if !strings.Contains(err.Error(), fmt.Sprintf("schema version %d", schemaVersion+1)) {
		t.Errorf("refusal says %q", err)
	}
}

// TestPageCachePool checks that cached pages come from the pool Open gives
// SQLite: if the library were initialized before Open configured it (a
// driver change), SQLite would refuse the pool and every page would be
// malloc'ed again, which only BenchmarkWrite's CPU would show.
func TestPageCachePool(t *testing.T) {
	s := openTest(t)
	if err := s.Write(context.Background(), history.Batch{Versions: objectVersions(100, 1024)}); err != nil {
		t.Fatal(err)
	}
	tls := libc.NewTLS()
	defer tls.Close()
	counters := libc.Xmalloc(tls, 16)
	defer libc.Xfree(tls, counters)
	if rc := sqlite3.Xsqlite3_status(tls, sqlite3.SQLITE_STATUS_PAGECACHE_USED, counters, counters+8, 0); rc != sqlite3.SQLITE_OK {
		t.Fatalf("sqlite3_status: %d", rc)
	}
	if used := binary.NativeEndian.Uint32(libc.GoBytes(counters, 4)); used == 0 {
		t.Fatal("no page is in the page cache pool: SQLite did not take it")
	}
}
