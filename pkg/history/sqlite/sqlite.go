// Package sqlite is the embedded history store: one SQLite file, written
// through modernc.org/sqlite, a pure-Go translation of SQLite, so the server
// stays one static binary with nothing to install (no cgo, no shared
// library), and the file is the format every operator's tools can open.
//
// One table holds a row per Event version, indexed for "one object's
// history, newest first"; a second holds when each Event left etcd, so the
// order in which replicas write versions and deletions does not matter.
// Expiry is an indexed DELETE by observation time in bounded batches rather
// than one table per day: SQLite has no partitions, a table or attached
// file per day would turn every query into a UNION over up to --history-retention
// days, and a DELETE of a few thousand rows holds the write lock for
// milliseconds while WAL readers go on. Freed pages are reused, so the file
// stops growing at its retention size instead of shrinking (no VACUUM,
// which would rewrite the whole file under a lock).
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/eventapiserver/event-apiserver/pkg/history"
	"github.com/eventapiserver/event-apiserver/pkg/history/sqlstore"
)

// Store is a history.Store in one SQLite file.
type Store struct {
	*sqlstore.Store
	// db is the one writing connection: SQLite takes one writer at a time
	// anyway, and only this connection needs a page cache big enough for
	// the indexes that every insert walks.
	db *sql.DB
	// read serves queries, in WAL mode never waiting for db.
	read *sql.DB
	// merge merges the text search index between writes (merge.go).
	merge *searchMerger
}

var _ history.Store = &Store{}

// dialect is SQLite's part of the store.
type dialect struct {
	db, read *sql.DB
	merge    *searchMerger
}

var spelling = sqlstore.Spelling{
	Versions: "versions", Deletions: "deletions", Progress: "progress", Feed: "feed",
	Hourly: "versions_hourly", HourlyAll: "versions_hourly_all",
	Placeholder: func(int) string { return "?" },
	NoRows:      sql.ErrNoRows,
	Greatest:    "max",
	EndsJoin:    "CROSS JOIN",
	Text:        "TEXT", Int: "INTEGER", Bytes: "BLOB", ID: "INTEGER",
	// A version is identified by its etcd key and mod revision, (namespace,
	// name, revision), which the key index already orders for Get: its
	// uniqueness is what makes writes idempotent, so the table keeps no
	// primary key of its own (version 1 had (revision, uid), a tenth of
	// every insert's B-tree work for an index nothing read). Retention
	// deletes in insertion order, the rowid's, so no index on observed_at
	// either.
	VersionsKey:   "\n)",
	KeyIndex:      "key",
	KeyUnique:     true,
	PartialSparse: true,
	// counters.versions is the row count of versions, kept by Write and
	// Retain: count(*) reads the whole table, seconds at 10^7 rows. The
	// uid index finds an Event's versions for its end.
	Extra: `CREATE TABLE IF NOT EXISTS counters (
	name TEXT PRIMARY KEY,
	value INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS versions_by_uid ON versions (uid, revision);
`,
	Contains: searchSQL,
	RowID:    "rowid",
}

// searchSQL looks a term up in the note's FTS5 table (migration 9): its
// trigram tokenizer, case-insensitive by default (case_sensitive 0, Unicode
// case folding), answers a phrase of the term's trigrams with the rows that
// hold the term as a substring. The table is contentless (content=”): it
// holds the trigrams and rowids only, no second copy of every note, and
// contentless_delete lets retention's DELETE remove a row by its rowid
// (the trigger). Its rowids are the versions table's, which the server
// never changes (no VACUUM: the package doc; an operator's VACUUM of the
// file would renumber them, see docs/operations.md). The versions stored
// before the note column (NULL) are found by their partial index, for the
// reader to match on their Event. Inside the phrase's double quotes only a
// double quote is special, written twice; LIKE's wildcards are not read.
func searchSQL(column history.Column, term string, bind func(any) string) string {
	phrase := `"` + strings.ReplaceAll(term, `"`, `""`) + `"`
	return "v.rowid IN (SELECT rowid FROM versions_" + string(column) + "_search WHERE versions_" + string(column) + "_search MATCH " + bind(phrase) +
		" UNION ALL SELECT rowid FROM versions WHERE " + string(column) + " IS NULL)"
}

const (
	// writeCacheKiB is the writer's page cache. SQLite's default (2 MiB) is
	// smaller than the index pages one batch touches once the store holds a
	// few thousand versions; every insert then re-read pages with pread and
	// wrote them back, most of capture's CPU in BenchmarkWrite. From 8 MiB
	// up, BenchmarkWrite's CPU per version did not change (8, 16 and 32 MiB
	// over 70,000 and 320,000 versions; 4 MiB cost 40% more): the rest of a
	// large store's indexes is read from the OS's cache whatever this is.
	// BenchmarkWrite found 8 and 16 MiB equal again when this went to 8 MiB
	// (docs/benchmarks-log.md, 2026-11-26 05:18). All of it is resident
	// from the start (givePageCachePool), so it is no larger than that.
	writeCacheKiB = 8 << 10
	// maxReaders bounds concurrent queries and so the readers' page caches.
	maxReaders = 4
	// readCacheKiB is each reader's page cache, an eighth of SQLite's
	// default (2000 KiB). In WAL mode a reader drops its cache whenever
	// the file changed since its last transaction, which under capture is
	// nearly every query, so a larger cache served little but its size:
	// all of it is resident from the start (givePageCachePool).
	readCacheKiB = 256
	// walCheckpointPages is how many pages the WAL holds before the writer
	// copies them into the file (wal_autocheckpoint; SQLite's default is
	// 1000, 4 MiB). A page that several batches change in between, an
	// index's hot leaf or the table's last, is then copied once per
	// checkpoint rather than once per 1000 pages, which BenchmarkWrite's
	// spread case measures (CPU and bytes written per version; the log has
	// 1000, 4000, 10000 and 40000). The WAL file grows to about 40 MiB
	// before each checkpoint starts it over.
	walCheckpointPages = 10000
)

// Open opens or creates the database at path, in WAL mode so that queries
// never wait for capture's writes, and migrates it (schema.go). A file a
// newer server migrated opens, and refuses writes (history.Schema).
func Open(path string) (*Store, error) {
	setUpMemory()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("creating history directory: %w", err)
	}
	open := func(pragmas ...string) (*sql.DB, error) {
		params := url.Values{}
		for _, p := range append([]string{"journal_mode(WAL)", "synchronous(NORMAL)", "busy_timeout(10000)", "foreign_keys(OFF)"}, pragmas...) {
			params.Add("_pragma", p)
		}
		// Writers take the lock when they begin, not at their first write, so
		// two writers never deadlock upgrading a read lock.
		params.Set("_txlock", "immediate")
		return sql.Open("sqlite", "file:"+path+"?"+params.Encode())
	}
	db, err := open(fmt.Sprintf("cache_size(-%d)", writeCacheKiB), fmt.Sprintf("wal_autocheckpoint(%d)", walCheckpointPages))
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	db.SetConnMaxIdleTime(0)
	read, err := open(fmt.Sprintf("cache_size(-%d)", readCacheKiB))
	if err != nil {
		db.Close()
		return nil, err
	}
	read.SetMaxOpenConns(maxReaders)
	read.SetMaxIdleConns(maxReaders)
	merge := newSearchMerger(db)
	s := &Store{Store: sqlstore.New(&dialect{db: db, read: read, merge: merge}, schema), db: db, read: read, merge: merge}
	if err := s.Migrate(context.Background()); err != nil {
		s.Close()
		return nil, fmt.Errorf("history schema in %s: %w", path, err)
	}
	if s.Schema().WriteError() == nil {
		if err := initRowCount(db); err != nil {
			s.Close()
			return nil, fmt.Errorf("counting history rows in %s: %w", path, err)
		}
		// A file a newer server migrated is read only here: its index is
		// that server's to merge.
		merge.start()
	}
	return s, nil
}

// initRowCount fills the row counter of a file made before it existed.
func initRowCount(db *sql.DB) error {
	// count(*) in a subquery: as the outer aggregate it would yield a row
	// even when the counter exists, and it runs only when it does not.
	_, err := db.Exec(`INSERT INTO counters (name, value) SELECT 'versions', (SELECT count(*) FROM versions)
		WHERE NOT EXISTS (SELECT 1 FROM counters WHERE name = 'versions')`)
	return err
}

func (d *dialect) Spelling() sqlstore.Spelling { return spelling }

func (d *dialect) Read() sqlstore.Queryer { return sqlstore.SQL{DB: d.read} }

func (d *dialect) Close() error {
	d.merge.close()
	return errors.Join(d.read.Close(), d.db.Close())
}

// Write's transaction holds SQLite's one write lock from its start
// (_txlock=immediate), so positions are taken and committed in order: the
// feed's proof in package history's doc. The notes of the versions it
// stores are indexed for text search by one statement at its end
// (indexNotesAfter), and the index is merged apart from it (merge.go).
func (d *dialect) Write(ctx context.Context, versions []history.Version, fn func(sqlstore.Tx) error) error {
	d.merge.writeBegins()
	defer d.merge.writeEnded()
	return d.transact(ctx, func(tx sqlstore.Tx) error {
		// Every row inserted below takes a rowid past the largest before
		// it, the transaction holding the write lock throughout.
		var last int64
		if len(versions) > 0 {
			if err := tx.QueryRow(ctx, `SELECT coalesce(max(rowid), 0) FROM versions`).Scan(&last); err != nil {
				return err
			}
		}
		if err := fn(tx); err != nil || len(versions) == 0 {
			return err
		}
		return tx.Exec(ctx, indexNotesAfter, last)
	})
}

// Migrate's lock is the write lock: processes opening one file at once
// take turns, and nothing writes meanwhile.
func (d *dialect) Migrate(ctx context.Context, fn func(sqlstore.Tx) error) error {
	return d.transact(ctx, fn)
}

func (d *dialect) transact(ctx context.Context, fn func(sqlstore.Tx) error) error {
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	if err := fn(sqlstore.SQL{DB: tx}); err != nil {
		return err
	}
	return tx.Commit()
}

func execer(tx sqlstore.Tx) interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
} {
	return tx.(sqlstore.SQL).DB
}

// paramsPerInsert bounds the parameters of one multi-row INSERT.
// modernc.org/sqlite prepares a statement's SQL again on every Exec (it keeps
// no prepared statement between calls) and binds each parameter by a linear
// search of the arguments: with one row per statement, parsing the INSERT
// was a sixth of BenchmarkWrite's CPU. More rows per statement parse less
// but bind more, and past about 10 versions (160 parameters) the statement's
// program and registers outgrow the C allocator's largest size class
// (16 KiB), so each statement paid an mmap and an munmap: 8 versions
// measured best.
const paramsPerInsert = 128

// InsertIgnore inserts the rows in as few statements as paramsPerInsert
// allows; it returns how many rows were new. OR IGNORE rather than ON CONFLICT DO NOTHING: it also covers
// the NOT NULL constraints (no value is ever NULL), so no row can abort a
// statement and SQLite keeps no statement journal of the pages a multi-row
// INSERT changes, which cost more than the insert itself.
func (d *dialect) InsertIgnore(ctx context.Context, tx sqlstore.Tx, table string, names []string, n int, row func(i int, args []any) []any) (int64, error) {
	head := "INSERT OR IGNORE INTO " + table + " (" + strings.Join(names, ", ") + ") VALUES "
	columns := len(names)
	perStatement := max(1, paramsPerInsert/columns)
	tuple := "(" + strings.Repeat("?, ", columns-1) + "?)"
	statement := func(rows int) string {
		return head + strings.Repeat(tuple+", ", rows-1) + tuple
	}
	full := ""
	args := make([]any, 0, perStatement*columns)
	var inserted int64
	for from := 0; from < n; from += perStatement {
		to := min(from+perStatement, n)
		args = args[:0]
		for i := from; i < to; i++ {
			args = row(i, args)
		}
		query := full
		if to-from < perStatement {
			query = statement(to - from)
		} else if full == "" {
			full = statement(perStatement)
			query = full
		}
		res, err := execer(tx).ExecContext(ctx, query, args...)
		if err != nil {
			return inserted, err
		}
		added, err := res.RowsAffected()
		if err != nil {
			return inserted, err
		}
		inserted += added
	}
	return inserted, nil
}

// Counted keeps the row counter.
func (d *dialect) Counted(ctx context.Context, tx sqlstore.Tx, n int64) error {
	if n == 0 {
		return nil
	}
	return tx.Exec(ctx, `UPDATE counters SET value = value + ? WHERE name = 'versions'`, n)
}

// NotLive fills a temporary table with the live uids: one parameter each
// would outgrow a statement's limit.
func (d *dialect) NotLive(ctx context.Context, tx sqlstore.Tx, uids []string, _ func(any) string) (string, error) {
	if err := tx.Exec(ctx, `CREATE TEMP TABLE IF NOT EXISTS live (uid TEXT PRIMARY KEY)`); err != nil {
		return "", err
	}
	if err := tx.Exec(ctx, `DELETE FROM live`); err != nil {
		return "", err
	}
	for _, uid := range uids {
		if err := tx.Exec(ctx, `INSERT OR IGNORE INTO live (uid) VALUES (?)`, uid); err != nil {
			return "", err
		}
	}
	return "v.uid NOT IN (SELECT uid FROM live)", nil
}

// Retain deletes in rowid order, the order capture inserted versions in,
// which is the order it observed them in up to the clocks of replicas: no
// index on observed_at to keep up on every insert. A pass stops at the
// first batchSize rows in a row that are all too young, so a row observed
// later than its neighbours (a replica's clock ahead) holds up no other.
func (d *dialect) Retain(ctx context.Context, cutoff time.Time, maxBytes int64, batchSize int) (int64, error) {
	if batchSize <= 0 {
		batchSize = 1000
	}
	var deleted int64
	// The oldest rows, and of those the ones observed before cutoff. A row
	// kept by the filter stays at the head of the next batch: the window
	// moves on only by what was deleted, so a pass ends once a whole window
	// is young.
	byAge := `SELECT rowid FROM
		(SELECT rowid, observed_at FROM versions ORDER BY rowid LIMIT ?) WHERE observed_at < ?`
	for !cutoff.IsZero() && ctx.Err() == nil {
		n, err := d.deleteOldest(ctx, byAge, batchSize, cutoff.UnixNano())
		if err != nil {
			return deleted, err
		}
		deleted += n
		if n == 0 {
			break
		}
	}
	bySize := `SELECT rowid FROM versions ORDER BY rowid LIMIT ?`
	for maxBytes > 0 && ctx.Err() == nil {
		stats, err := d.Stats(ctx)
		if err != nil {
			return deleted, err
		}
		if stats.Bytes <= maxBytes || stats.Rows == 0 {
			break
		}
		n, err := d.deleteOldest(ctx, bySize, batchSize)
		if err != nil {
			return deleted, err
		}
		deleted += n
		if n == 0 {
			break
		}
	}
	if deleted > 0 {
		if err := d.deleteEnds(ctx, batchSize); err != nil {
			return deleted, err
		}
	}
	return deleted, ctx.Err()
}

// deleteEnds deletes the ends older than every remaining version, raising
// the feed's floor past them.
func (d *dialect) deleteEnds(ctx context.Context, batchSize int) error {
	// A version is observed before its Event's deletion, so a deletion
	// older than every remaining version belongs to no remaining row.
	// The oldest rows by rowid stand for every row: a few thousand
	// rather than a scan of the table.
	old := `FROM deletions WHERE deleted_at < (SELECT coalesce(min(observed_at), 9223372036854775807) FROM
		(SELECT observed_at FROM versions ORDER BY rowid LIMIT ?))`
	return d.Write(ctx, nil, func(tx sqlstore.Tx) error {
		if err := tx.Exec(ctx, sqlstore.RaiseFloor(spelling, `SELECT max(seq) `+old), batchSize); err != nil {
			return err
		}
		return tx.Exec(ctx, `DELETE `+old, batchSize)
	})
}

// deleteOldest deletes the versions victims selects in its own transaction,
// so that capture's writes wait for one batch at most, and raises the
// feed's floor to the newest position it deletes: a reader behind it would
// miss that change.
func (d *dialect) deleteOldest(ctx context.Context, victims string, args ...any) (int64, error) {
	var n int64
	err := d.Write(ctx, nil, func(tx sqlstore.Tx) error {
		// A removed version's end is a change too (its endPosition, at
		// most its end's seq), now gone with it.
		if err := tx.Exec(ctx, sqlstore.RaiseFloor(spelling, `SELECT max(max(v.seq, coalesce(d.seq, 0)))
			FROM versions v LEFT JOIN deletions d ON d.uid = v.uid WHERE v.rowid IN (`+victims+`)`), args...); err != nil {
			return err
		}
		res, err := execer(tx).ExecContext(ctx, `DELETE FROM versions WHERE rowid IN (`+victims+`)`, args...)
		if err != nil {
			return err
		}
		if n, err = res.RowsAffected(); err != nil {
			return err
		}
		return d.Counted(ctx, tx, -n)
	})
	return n, err
}

// Stats reports the rows and the bytes the file uses, free pages excluded:
// those are reused before the file grows again.
func (d *dialect) Stats(ctx context.Context) (history.Stats, error) {
	var st history.Stats
	var pages, free, pageSize int64
	if err := d.read.QueryRowContext(ctx, `SELECT value FROM counters WHERE name = 'versions'`).Scan(&st.Rows); err != nil {
		return st, err
	}
	for pragma, dst := range map[string]*int64{"page_count": &pages, "freelist_count": &free, "page_size": &pageSize} {
		if err := d.read.QueryRowContext(ctx, "PRAGMA "+pragma).Scan(dst); err != nil {
			return st, err
		}
	}
	st.Bytes = (pages - free) * pageSize
	return st, nil
}
