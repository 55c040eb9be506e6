package sqlite

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
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

// v1Schema is what servers of schema version 1 made: no user_version, a
// primary key on (revision, uid), versions_by_name and versions_by_observed,
// no feed.
const v1Schema = `
CREATE TABLE versions (
	uid TEXT NOT NULL,
	revision INTEGER NOT NULL,
	namespace TEXT NOT NULL,
	name TEXT NOT NULL,
	regarding_uid TEXT NOT NULL,
	regarding_name TEXT NOT NULL,
	regarding_namespace TEXT NOT NULL,
	regarding_kind TEXT NOT NULL,
	related_uid TEXT NOT NULL,
	related_name TEXT NOT NULL,
	reason TEXT NOT NULL,
	type TEXT NOT NULL,
	reporting_controller TEXT NOT NULL,
	last_seen INTEGER NOT NULL,
	observed_at INTEGER NOT NULL,
	object BLOB NOT NULL,
	PRIMARY KEY (revision, uid)
);
CREATE INDEX versions_by_time ON versions (last_seen DESC, revision DESC);
CREATE INDEX versions_by_namespace ON versions (namespace, last_seen DESC, revision DESC);
CREATE INDEX versions_by_name ON versions (namespace, name, revision);
CREATE INDEX versions_by_regarding_uid ON versions (regarding_uid, last_seen DESC, revision DESC);
CREATE INDEX versions_by_regarding_name ON versions (regarding_name, last_seen DESC, revision DESC);
CREATE INDEX versions_by_related_uid ON versions (related_uid, last_seen DESC, revision DESC) WHERE related_uid != '';
CREATE INDEX versions_by_related_name ON versions (related_name, last_seen DESC, revision DESC) WHERE related_name != '';
CREATE TABLE deletions (
	uid TEXT PRIMARY KEY,
	revision INTEGER NOT NULL,
	deleted_at INTEGER NOT NULL
);
CREATE TABLE counters (
	name TEXT PRIMARY KEY,
	value INTEGER NOT NULL
);
CREATE TABLE progress (
	source TEXT PRIMARY KEY,
	revision INTEGER NOT NULL
);
CREATE INDEX versions_by_observed ON versions (observed_at);
`

// legacySchemas are the files of the servers before the versioned core, by
// their user_version: each what the one before it became.
var legacySchemas = map[int]string{
	1: v1Schema,
	2: strings.NewReplacer("CREATE INDEX versions_by_name ON", "CREATE UNIQUE INDEX versions_by_key ON",
		"CREATE INDEX versions_by_observed ON versions (observed_at);\n", "PRAGMA user_version = 2;\n").Replace(v1Schema),
}

func init() {
	legacySchemas[3] = strings.Replace(legacySchemas[2], "PRAGMA user_version = 2;", `
ALTER TABLE versions ADD COLUMN seq INTEGER NOT NULL DEFAULT 0;
ALTER TABLE deletions ADD COLUMN seq INTEGER NOT NULL DEFAULT 0;
CREATE INDEX versions_by_seq ON versions (seq) WHERE seq > 0;
CREATE INDEX versions_by_uid ON versions (uid, revision);
CREATE INDEX deletions_by_seq ON deletions (seq) WHERE seq > 0;
CREATE TABLE feed (
	id INTEGER PRIMARY KEY CHECK (id = 1),
	position INTEGER NOT NULL,
	floor INTEGER NOT NULL
);
INSERT INTO feed (id, position, floor) VALUES (1, 1, 1);
PRAGMA user_version = 3;`, 1)
	legacySchemas[4] = strings.Replace(legacySchemas[3], "PRAGMA user_version = 3;",
		"ALTER TABLE deletions ADD COLUMN first_seq INTEGER NOT NULL DEFAULT 0;\nPRAGMA user_version = 4;", 1)
}

// TestMigrate: a file written by each schema version before the versioned
// core opens with its rows, at the feed's origin, takes writes
// idempotently, feeds the new ones, says the current version, and has the
// columns and indexes of a new file.
func TestMigrate(t *testing.T) {
	ctx := context.Background()
	fresh := openTest(t)
	for version := 1; version <= 4; version++ {
		t.Run(fmt.Sprint("version ", version), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "history.db")
			old, err := sql.Open("sqlite", "file:"+path)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := old.Exec(legacySchemas[version]); err != nil {
				t.Fatal(err)
			}
			insert, args := storetest.LegacyInsert("versions", func(int) string { return "?" })
			if _, err := old.Exec(insert, args...); err != nil {
				t.Fatal(err)
			}
			old.Close()

			s, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			storetest.Migrated(t, s, schema.Known())
			if st, err := s.Stats(ctx); err != nil || st.Rows != 2 {
				t.Fatalf("rows = %d (%v), want 2", st.Rows, err)
			}
			var user int
			if err := s.db.QueryRow(`PRAGMA user_version`).Scan(&user); err != nil || user != schema.Known() {
				t.Fatalf("user_version = %d (%v), want %d", user, err, schema.Known())
			}
			for _, table := range []string{"versions", "deletions", "feed", "counters", "progress", "history_schema"} {
				query := `SELECT name || ' ' || type || ' ' || "notnull" || ' ' || coalesce(dflt_value, '') FROM pragma_table_info('` + table + `') ORDER BY name`
				if got, want := dump(t, s.read, query), dump(t, fresh.read, query); got != want {
					t.Errorf("%s's columns after migration:\n%s\nin a new file:\n%s", table, got, want)
				}
			}
			// A version 1 file keeps its primary key's index; no other differs.
			indexes := `SELECT name || ': ' || sql FROM sqlite_schema WHERE type = 'index' AND sql IS NOT NULL ORDER BY name`
			if got, want := dump(t, s.read, indexes), dump(t, fresh.read, indexes); normalize(got) != normalize(want) {
				t.Errorf("indexes after migration:\n%s\nin a new file:\n%s", got, want)
			}
		})
	}
}

// normalize folds the spelling of index definitions (IF NOT EXISTS, white
// space) that the files' history varies in.
func normalize(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, " IF NOT EXISTS", "")), " ")
}

// TestNewerSchema: a file a newer server migrated opens; this server
// refuses to write it, saying why, and reads it unless the newer schema
// says servers of this version read it wrongly.
func TestNewerSchema(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "history.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Write(ctx, history.Batch{Source: "src", Revision: 1, Versions: []history.Version{storetest.Version("a", 1, "p", 1)}}); err != nil {
		t.Fatal(err)
	}
	known := schema.Known()
	for _, tc := range []struct {
		readableFrom int
		reads        bool
	}{{known, true}, {known + 1, false}} {
		if _, err := s.db.Exec(fmt.Sprintf(`PRAGMA user_version = %d`, known+1)); err != nil {
			t.Fatal(err)
		}
		if _, err := s.db.Exec(`UPDATE history_schema SET version = ?, readable_from = ?`, known+1, tc.readableFrom); err != nil {
			t.Fatal(err)
		}
		s.Close()
		if s, err = Open(path); err != nil {
			t.Fatalf("a file of a newer schema did not open: %v", err)
		}
		if err := s.Write(ctx, history.Batch{Versions: []history.Version{storetest.Version("b", 2, "p", 2)}}); !errors.Is(err, history.ErrSchemaNewer) {
			t.Errorf("readable from %d: a write was answered %v, want a refusal", tc.readableFrom, err)
		}
		if _, err := s.Retain(ctx, time.Now(), 0, 10); !errors.Is(err, history.ErrSchemaNewer) {
			t.Errorf("readable from %d: retention was answered %v, want a refusal", tc.readableFrom, err)
		}
		got, err := s.List(ctx, history.Query{})
		if tc.reads && (err != nil || len(got) != 1) {
			t.Errorf("readable from %d: list: %d records, %v; want the one stored", tc.readableFrom, len(got), err)
		}
		if !tc.reads && !errors.Is(err, history.ErrSchemaNewer) {
			t.Errorf("readable from %d: list answered %v, want a refusal", tc.readableFrom, err)
		}
		if err := s.Schema().WriteError(); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("version %d", known+1)) {
			t.Errorf("the refusal says %v", err)
		}
	}
	s.Close()
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

// TestSearchMergedApartFromWrites: a write adds a segment to the text
// search index and merges none (migration 12), and the merger merges them
// between writes; a search finds every note before and after.
func TestSearchMergedApartFromWrites(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	for setting, want := range map[string]int{"automerge": 0, "crisismerge": searchCrisisSegments} {
		var got int
		if err := s.db.QueryRow(`SELECT v FROM versions_note_search_config WHERE k = ?`, setting).Scan(&got); err != nil || got != want {
			t.Fatalf("%s = %d (%v), want %d", setting, got, err, want)
		}
	}
	// The index's pages: two of its own (its structure and averages), and
	// a leaf per segment of one note.
	pages := func() int {
		var n int
		if err := s.db.QueryRow(`SELECT count(*) FROM versions_note_search_data`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	found := func(want int) {
		t.Helper()
		got, err := s.List(ctx, history.Query{Limit: 100, Conditions: []history.Condition{{Columns: []history.Column{history.ColumnNote}, Value: "x509", Contains: true}}})
		if err != nil || len(got) != want {
			t.Fatalf("search found %d (%v), want %d", len(got), err, want)
		}
	}
	write := func(i int) {
		v := storetest.Version(fmt.Sprint("u", i), int64(i+1), "p", i)
		v.Note = fmt.Sprintf("x509: certificate %d signed by unknown authority", i)
		if err := s.Write(ctx, history.Batch{Versions: []history.Version{v}}); err != nil {
			t.Fatal(err)
		}
	}
	s.merge.close()
	const writes = 40 // below searchCrisisSegments: FTS5 merges nothing itself
	for i := range writes {
		write(i)
	}
	if n := pages(); n < writes {
		t.Fatalf("%d writes left %d index pages: a write merged segments", writes, n)
	}
	found(writes)
	s.merge.start()
	deadline := time.Now().Add(time.Minute)
	for pages() > writes/4 {
		if time.Now().After(deadline) {
			t.Fatalf("the merger left %d index pages of %d segments", pages(), writes)
		}
		time.Sleep(10 * time.Millisecond)
	}
	found(writes)
	write(writes)
	found(writes + 1)
}
