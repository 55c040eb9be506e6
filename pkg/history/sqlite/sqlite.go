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

	"k8s.io/klog/v2"

	"github.com/eventapiserver/event-apiserver/pkg/history"
)

// schemaVersion is the file's PRAGMA user_version once schema is in place.
// Files written before it was set (user_version 0) are migrated by migrate.
const schemaVersion = 4

// schema is version 3 (version 2 and the feed, feedSchema). A version is identified by its etcd key and mod
// revision, (namespace, name, revision), which versions_by_name already
// orders for Get: its uniqueness is what makes writes idempotent, so the
// table keeps no primary key of its own (version 1 had (revision, uid), a
// tenth of every insert's B-tree work for an index nothing read). Retention
// deletes in insertion order, the rowid's, so no index on observed_at either.
const schema = `
CREATE TABLE IF NOT EXISTS versions (
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
	seq INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS versions_by_time ON versions (last_seen DESC, revision DESC);
CREATE INDEX IF NOT EXISTS versions_by_namespace ON versions (namespace, last_seen DESC, revision DESC);
CREATE UNIQUE INDEX IF NOT EXISTS versions_by_key ON versions (namespace, name, revision);
CREATE INDEX IF NOT EXISTS versions_by_regarding_uid ON versions (regarding_uid, last_seen DESC, revision DESC);
CREATE INDEX IF NOT EXISTS versions_by_regarding_name ON versions (regarding_name, last_seen DESC, revision DESC);
-- Most Events have no related object: these hold only those that do, and
-- Query.Where says related_uid != '' so that the planner may use them.
CREATE INDEX IF NOT EXISTS versions_by_related_uid ON versions (related_uid, last_seen DESC, revision DESC) WHERE related_uid != '';
CREATE INDEX IF NOT EXISTS versions_by_related_name ON versions (related_name, last_seen DESC, revision DESC) WHERE related_name != '';
CREATE TABLE IF NOT EXISTS deletions (
	uid TEXT PRIMARY KEY,
	revision INTEGER NOT NULL,
	deleted_at INTEGER NOT NULL,
	seq INTEGER NOT NULL DEFAULT 0,
	first_seq INTEGER NOT NULL DEFAULT 0
);
-- counters.versions is the row count of versions, kept by Write and Retain:
-- count(*) reads the whole table, seconds at 10^7 rows.
CREATE TABLE IF NOT EXISTS counters (
	name TEXT PRIMARY KEY,
	value INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS progress (
	source TEXT PRIMARY KEY,
	revision INTEGER NOT NULL
);
` + feedSchema

// feedSchema is what schema version 3 added: the feed's positions (seq,
// 0 for rows stored before), their indexes (partial: rows from before
// the feed are never read by position), an Event's versions by uid for
// its end's latest version, and the feed's head and floor.
const feedSchema = `
CREATE INDEX IF NOT EXISTS versions_by_seq ON versions (seq) WHERE seq > 0;
CREATE INDEX IF NOT EXISTS versions_by_uid ON versions (uid, revision);
CREATE INDEX IF NOT EXISTS deletions_by_seq ON deletions (seq) WHERE seq > 0;
CREATE TABLE IF NOT EXISTS feed (
	id INTEGER PRIMARY KEY CHECK (id = 1),
	position INTEGER NOT NULL,
	floor INTEGER NOT NULL
);
INSERT OR IGNORE INTO feed (id, position, floor) VALUES (1, 1, 1);
`

// migrateV2 adds the feed's columns to a version 2 file; feedSchema, run
// after it, adds the rest. Existing rows keep position 0: they are in
// lists and a watch's initial state, never in a watch's changes.
const migrateV2 = `
ALTER TABLE versions ADD COLUMN seq INTEGER NOT NULL DEFAULT 0;
ALTER TABLE deletions ADD COLUMN seq INTEGER NOT NULL DEFAULT 0;
`

// migrateV3 gives an end its block of positions (history.Deletion's doc):
// first_seq is its first, seq its last. Ends stored before have 0, one
// position: their change stays the one on the Event's latest version.
const migrateV3 = `
ALTER TABLE deletions ADD COLUMN first_seq INTEGER NOT NULL DEFAULT 0;
`

// migrateV1 turns a version 1 file into version 2 in one transaction: the
// unique key index replaces versions_by_name, the observed_at index goes.
// Its primary key stays (SQLite cannot drop one without copying the table):
// such a file keeps paying for that index on insert, and nothing else differs.
const migrateV1 = `
CREATE UNIQUE INDEX IF NOT EXISTS versions_by_key ON versions (namespace, name, revision);
DROP INDEX IF EXISTS versions_by_name;
DROP INDEX IF EXISTS versions_by_observed;
`

// Store is a history.Store in one SQLite file.
type Store struct {
	// db is the one writing connection: SQLite takes one writer at a time
	// anyway, and only this connection needs a page cache big enough for
	// the indexes that every insert walks.
	db *sql.DB
	// read serves queries, in WAL mode never waiting for db.
	read *sql.DB
}

var _ history.Store = &Store{}

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
// never wait for capture's writes.
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
	if err := migrate(db); err != nil {
		db.Close()
		return nil, fmt.Errorf("history schema in %s: %w", path, err)
	}
	if err := initRowCount(db); err != nil {
		db.Close()
		return nil, fmt.Errorf("counting history rows in %s: %w", path, err)
	}
	read, err := open(fmt.Sprintf("cache_size(-%d)", readCacheKiB))
	if err != nil {
		db.Close()
		return nil, err
	}
	read.SetMaxOpenConns(maxReaders)
	read.SetMaxIdleConns(maxReaders)
	return &Store{db: db, read: read}, nil
}

// migrate creates the schema in a new file, brings a version 1 file to
// version 2, and refuses a file from a newer server rather than write rows
// its indexes would not describe.
func migrate(db *sql.DB) error {
	tx, err := db.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	var version int
	if err := tx.QueryRow(`PRAGMA user_version`).Scan(&version); err != nil {
		return err
	}
	switch {
	case version == schemaVersion:
		return nil
	case version > schemaVersion:
		return fmt.Errorf("the file has schema version %d, this server knows up to %d: "+
			"run a newer event-apiserver, or move the file away to start an empty history", version, schemaVersion)
	}
	var tables int
	if err := tx.QueryRow(`SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'versions'`).Scan(&tables); err != nil {
		return err
	}
	if tables > 0 && version < 2 {
		klog.InfoS("Migrating the Event history file to schema version 2: building the unique key index once", "version", version)
		if _, err := tx.Exec(migrateV1); err != nil {
			return fmt.Errorf("migrating from schema version 1: %w", err)
		}
	}
	if tables > 0 && version < 3 {
		klog.InfoS("Migrating the Event history file to schema version 3: the feed's columns and indexes", "version", max(version, 1))
		if _, err := tx.Exec(migrateV2); err != nil {
			return fmt.Errorf("migrating to schema version 3: %w", err)
		}
	}
	if tables > 0 {
		klog.InfoS("Migrating the Event history file to schema version 4: an end's block of feed positions", "version", max(version, 1))
		if _, err := tx.Exec(migrateV3); err != nil {
			return fmt.Errorf("migrating to schema version 4: %w", err)
		}
	}
	if _, err := tx.Exec(schema); err != nil {
		return err
	}
	// PRAGMA takes no parameter; the value is a constant.
	if _, err := tx.Exec(fmt.Sprintf(`PRAGMA user_version = %d`, schemaVersion)); err != nil {
		return err
	}
	return tx.Commit()
}

// initRowCount fills the row counter of a file made before it existed.
func initRowCount(db *sql.DB) error {
	// count(*) in a subquery: as the outer aggregate it would yield a row
	// even when the counter exists, and it runs only when it does not.
	_, err := db.Exec(`INSERT INTO counters (name, value) SELECT 'versions', (SELECT count(*) FROM versions)
		WHERE NOT EXISTS (SELECT 1 FROM counters WHERE name = 'versions')`)
	return err
}

func (s *Store) Close() error { return errors.Join(s.read.Close(), s.db.Close()) }

func (s *Store) Write(ctx context.Context, batch history.Batch) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	// The transaction holds SQLite's one write lock from its start
	// (_txlock=immediate), so positions are taken and committed in order:
	// the feed's proof in package history's doc.
	var position int64
	if err := tx.QueryRowContext(ctx, `SELECT position FROM feed WHERE id = 1`).Scan(&position); err != nil {
		return err
	}
	if len(batch.Versions) > 0 {
		inserted, err := insertVersions(ctx, tx, batch.Versions, position)
		if err != nil {
			return err
		}
		position += int64(len(batch.Versions))
		if err := addRows(ctx, tx, inserted); err != nil {
			return err
		}
	}
	if position, err = insertDeletions(ctx, tx, batch.Deletions, position); err != nil {
		return err
	}
	if g := batch.Gone; g != nil {
		if position, err = recordGone(ctx, tx, g, position); err != nil {
			return err
		}
	}
	if _, err := tx.ExecContext(ctx, `UPDATE feed SET position = ? WHERE id = 1`, position); err != nil {
		return err
	}
	if batch.Source != "" {
		if _, err := tx.ExecContext(ctx, `INSERT INTO progress (source, revision) VALUES (?, ?)
			ON CONFLICT (source) DO UPDATE SET revision = CASE WHEN ? THEN excluded.revision ELSE max(revision, excluded.revision) END`,
			batch.Source, batch.Revision, batch.Rewind); err != nil {
			return err
		}
	}
	return tx.Commit()
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

// insertRows inserts n rows of columns values each into head ("INSERT OR
// IGNORE INTO t (c1, ...) VALUES "), as few statements as paramsPerInsert
// allows, row(i, args) appending row i's values; it returns how many rows
// were new. OR IGNORE rather than ON CONFLICT DO NOTHING: it also covers
// the NOT NULL constraints (no value is ever NULL), so no row can abort a
// statement and SQLite keeps no statement journal of the pages a multi-row
// INSERT changes, which cost more than the insert itself.
func insertRows(ctx context.Context, tx *sql.Tx, head string, columns, n int, row func(i int, args []any) []any) (int64, error) {
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
		res, err := tx.ExecContext(ctx, query, args...)
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

// insertVersions gives the i-th version position after+i+1; a version
// already stored keeps its own, and its new one is a gap in the feed.
func insertVersions(ctx context.Context, tx *sql.Tx, versions []history.Version, after int64) (int64, error) {
	return insertRows(ctx, tx, `INSERT OR IGNORE INTO versions (uid, revision, namespace, name,
		regarding_uid, regarding_name, regarding_namespace, regarding_kind, related_uid, related_name,
		reason, type, reporting_controller, last_seen, observed_at, object, seq) VALUES `, 17, len(versions),
		func(i int, args []any) []any {
			v := &versions[i]
			return append(args, v.UID, v.Revision, v.Namespace, v.Name,
				v.RegardingUID, v.RegardingName, v.RegardingNamespace, v.RegardingKind, v.RelatedUID, v.RelatedName,
				v.Reason, v.Type, v.ReportingController, v.LastSeen.UnixNano(), v.ObservedAt.UnixNano(), v.Object,
				after+int64(i)+1)
		})
}

// insertDeletions gives each end the next block of positions, one per
// version of its Event stored so far (at least one), and returns the last
// position taken; an end already stored keeps its own, and the block it was
// offered is a gap in the feed.
func insertDeletions(ctx context.Context, tx *sql.Tx, deletions []history.Deletion, after int64) (int64, error) {
	if len(deletions) == 0 {
		return after, nil
	}
	count, err := tx.PrepareContext(ctx, `SELECT count(*) FROM versions WHERE uid = ?`)
	if err != nil {
		return after, err
	}
	defer count.Close()
	first := make([]int64, len(deletions))
	last := make([]int64, len(deletions))
	for i := range deletions {
		var n int64
		if err := count.QueryRowContext(ctx, deletions[i].UID).Scan(&n); err != nil {
			return after, err
		}
		first[i], last[i] = after+1, after+max(n, 1)
		after = last[i]
	}
	_, err = insertRows(ctx, tx, `INSERT OR IGNORE INTO deletions (uid, revision, deleted_at, seq, first_seq) VALUES `, 5, len(deletions),
		func(i int, args []any) []any {
			d := &deletions[i]
			return append(args, d.UID, d.Revision, d.At.UnixNano(), last[i], first[i])
		})
	return after, err
}

type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

func addRows(ctx context.Context, db execer, n int64) error {
	if n == 0 {
		return nil
	}
	_, err := db.ExecContext(ctx, `UPDATE counters SET value = value + ? WHERE name = 'versions'`, n)
	return err
}

// recordGone stores the unseen deletions in blocks of positions after
// after, as insertDeletions does, and returns the last position taken.
func recordGone(ctx context.Context, tx *sql.Tx, g *history.Gone, after int64) (int64, error) {
	if _, err := tx.ExecContext(ctx, `CREATE TEMP TABLE IF NOT EXISTS live (uid TEXT PRIMARY KEY)`); err != nil {
		return 0, err
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM live`); err != nil {
		return 0, err
	}
	for _, uid := range g.Live {
		if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO live (uid) VALUES (?)`, uid); err != nil {
			return 0, err
		}
	}
	// "WHERE true" keeps the upsert clause from being read as the join's ON.
	if _, err := tx.ExecContext(ctx, `INSERT INTO deletions (uid, revision, deleted_at, seq, first_seq)
		SELECT uid, ?, ?, ? + sum(n) OVER (ORDER BY uid), ? + sum(n) OVER (ORDER BY uid) - n + 1 FROM
		(SELECT u.uid, (SELECT count(*) FROM versions h WHERE h.uid = u.uid) AS n FROM (SELECT DISTINCT v.uid FROM versions v
		WHERE v.revision <= ? AND v.uid NOT IN (SELECT uid FROM live) AND v.uid NOT IN (SELECT uid FROM deletions)) u) WHERE true
		ON CONFLICT (uid) DO NOTHING`, g.Revision, g.At.UnixNano(), after, after, g.Revision); err != nil {
		return after, err
	}
	var last int64
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(seq), 0) FROM deletions WHERE seq > ?`, after).Scan(&last); err != nil {
		return after, err
	}
	return max(after, last), nil
}

func (s *Store) Progress(ctx context.Context, source string) (int64, bool, error) {
	var rev int64
	err := s.read.QueryRowContext(ctx, `SELECT revision FROM progress WHERE source = ?`, source).Scan(&rev)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	return rev, err == nil, err
}

// endPosition is the feed position of the end of version v's Event d on v
// (NULL without an end): an end takes one position per version stored
// before it, first_seq to seq in revision order, so the Event's latest
// version's is seq and each older one's is one lower per version above it.
// Retention removing a version above v moves v's up, never past seq nor
// below first_seq. An end stored before blocks (first_seq 0) has one
// position, seq, on its latest version.
//
// CASE first: a record without an end (most, in a list) costs no count.
const endPosition = `CASE WHEN d.seq IS NULL THEN NULL ELSE max(CASE WHEN d.first_seq > 0 THEN d.first_seq ELSE d.seq END,
	d.seq - (SELECT count(*) FROM versions h WHERE h.uid = v.uid AND h.seq < d.seq AND h.revision > v.revision)) END`

// recordColumns are what scanRecord reads, from versions v and deletions d.
const recordColumns = `v.uid, v.revision, v.namespace, v.name, v.regarding_uid, v.regarding_name,
	v.regarding_namespace, v.regarding_kind, v.related_uid, v.related_name, v.reason, v.type,
	v.reporting_controller, v.last_seen, v.observed_at, v.object, v.seq, d.revision AS deleted_revision, d.deleted_at,
	` + endPosition + ` AS end_position`

// selectRecord reads versions with their Event's end, as of feed position
// through (0: all that is committed).
func selectRecord(through int64) string {
	join := ""
	if through > 0 {
		join = fmt.Sprintf(" AND d.seq <= %d", through)
	}
	return `SELECT ` + recordColumns + ` FROM versions v LEFT JOIN deletions d ON d.uid = v.uid` + join
}

func (s *Store) List(ctx context.Context, q history.Query) ([]history.Record, error) {
	where, args, err := whereClause(q)
	if err != nil {
		return nil, err
	}
	query := selectRecord(q.Through) + where + ` ORDER BY v.last_seen DESC, v.revision DESC`
	if q.Limit > 0 {
		query += ` LIMIT ?`
		args = append(args, q.Limit)
	}
	rows, err := s.read.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []history.Record
	for rows.Next() {
		r, err := scanRecord(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

func (s *Store) Get(ctx context.Context, namespace, name string, revision int64) (history.Record, error) {
	row := s.read.QueryRowContext(ctx, selectRecord(0)+` WHERE v.namespace = ? AND v.name = ? AND v.revision = ?`,
		namespace, name, revision)
	r, err := scanRecord(row)
	if errors.Is(err, sql.ErrNoRows) {
		return r, history.ErrNotFound
	}
	return r, err
}

// whereClause binds ? placeholders in order.
func whereClause(q history.Query) (string, []any, error) {
	var args []any
	where, err := q.Where(func(v any) string {
		args = append(args, v)
		return "?"
	})
	return where, args, err
}

type scanner interface {
	Scan(dest ...any) error
}

func scanRecord(row scanner, extra ...any) (history.Record, error) {
	var r history.Record
	var lastSeen, observed, seq int64
	var delRev, delAt, delSeq sql.NullInt64
	v := &r.Version
	err := row.Scan(append([]any{&v.UID, &v.Revision, &v.Namespace, &v.Name, &v.RegardingUID, &v.RegardingName,
		&v.RegardingNamespace, &v.RegardingKind, &v.RelatedUID, &v.RelatedName, &v.Reason, &v.Type,
		&v.ReportingController, &lastSeen, &observed, &v.Object, &seq, &delRev, &delAt, &delSeq}, extra...)...)
	if err != nil {
		return r, err
	}
	v.LastSeen = time.Unix(0, lastSeen).UTC()
	v.ObservedAt = time.Unix(0, observed).UTC()
	r.Position = max(seq, history.FeedOrigin)
	if delAt.Valid {
		at := time.Unix(0, delAt.Int64).UTC()
		r.DeletedAt = &at
		r.DeletedRevision = delRev.Int64
		r.Position = max(r.Position, delSeq.Int64)
	}
	return r, nil
}

func (s *Store) Feed(ctx context.Context) (history.FeedState, error) {
	var f history.FeedState
	err := s.read.QueryRowContext(ctx, `SELECT position, floor FROM feed WHERE id = 1`).Scan(&f.Position, &f.Floor)
	return f, err
}

// changesQuery is Changes' statement. The ends leg is a CROSS JOIN, which
// SQLite reads in the order written: the ends by their position index, then
// each end's versions by uid; left to choose, the planner walked all of
// versions (TestChangesPlan). v.seq > 0 and d.seq > 0 state the position
// indexes' condition, without which SQLite does not use a partial index:
// the versions leg then walked the whole table on every read.
func changesQuery(q history.ChangeQuery) (string, []any, error) {
	var args []any
	bind := func(v any) string { args = append(args, v); return "?" }
	limit := q.Limit
	if limit <= 0 {
		limit = 1000
	}
	versionsWhere, err := q.Where("v.seq", bind)
	if err != nil {
		return "", nil, err
	}
	versions := `SELECT * FROM (SELECT ` + recordColumns + `, v.seq AS position, 0 AS ended
		FROM versions v LEFT JOIN deletions d ON d.uid = v.uid AND d.seq < v.seq` + versionsWhere +
		` AND v.seq > 0 ORDER BY v.seq LIMIT ` + bind(limit) + `)`
	endsWhere, err := q.Where("d.seq", bind)
	if err != nil {
		return "", nil, err
	}
	// An end from before blocks is on its Event's latest version only.
	ends := `SELECT * FROM (SELECT ` + recordColumns + `, ` + endPosition + ` AS position, 1 AS ended
		FROM deletions d CROSS JOIN versions v ON v.uid = d.uid AND v.seq < d.seq` + endsWhere +
		` AND d.seq > 0 AND ` + endPosition + ` > ` + bind(q.After) + `
		AND (d.first_seq > 0 OR v.rowid = (SELECT l.rowid FROM versions l
			WHERE l.uid = d.uid AND l.seq < d.seq ORDER BY l.revision DESC LIMIT 1))
		ORDER BY d.seq, v.revision LIMIT ` + bind(limit) + `)`
	return versions + ` UNION ALL ` + ends + ` ORDER BY position, revision LIMIT ` + bind(limit), args, nil
}

// Changes reads new versions and Events' ends, each leg by its position
// index, and merges them. A version's end shows on it only when the end
// came first (it is then delivered once, as part of the version); a later
// end is a change on each version stored before it, at that version's
// endPosition, in the order of the positions (the ends' by seq, then each
// end's versions by revision), so that a page may stop inside an end's
// block and the next resume after the last version delivered.
func (s *Store) Changes(ctx context.Context, q history.ChangeQuery) ([]history.Change, error) {
	query, args, err := changesQuery(q)
	if err != nil {
		return nil, err
	}
	rows, err := s.read.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []history.Change
	for rows.Next() {
		var c history.Change
		var position, ended int64
		if c.Record, err = scanRecord(rows, &position, &ended); err != nil {
			return nil, err
		}
		c.Position, c.Ended = position, ended == 1
		out = append(out, c)
	}
	return out, rows.Err()
}

// Retain deletes in rowid order, the order capture inserted versions in,
// which is the order it observed them in up to the clocks of replicas: no
// index on observed_at to keep up on every insert. A pass stops at the
// first batchSize rows in a row that are all too young, so a row observed
// later than its neighbours (a replica's clock ahead) holds up no other.
func (s *Store) Retain(ctx context.Context, cutoff time.Time, maxBytes int64, batchSize int) (int64, error) {
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
		n, err := s.deleteOldest(ctx, byAge, batchSize, cutoff.UnixNano())
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
		stats, err := s.Stats(ctx)
		if err != nil {
			return deleted, err
		}
		if stats.Bytes <= maxBytes || stats.Rows == 0 {
			break
		}
		n, err := s.deleteOldest(ctx, bySize, batchSize)
		if err != nil {
			return deleted, err
		}
		deleted += n
		if n == 0 {
			break
		}
	}
	if deleted > 0 {
		if err := s.deleteEnds(ctx, batchSize); err != nil {
			return deleted, err
		}
	}
	return deleted, ctx.Err()
}

// deleteEnds deletes the ends older than every remaining version, raising
// the feed's floor past them.
func (s *Store) deleteEnds(ctx context.Context, batchSize int) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	// A version is observed before its Event's deletion, so a deletion
	// older than every remaining version belongs to no remaining row.
	// The oldest rows by rowid stand for every row: a few thousand
	// rather than a scan of the table.
	old := `FROM deletions WHERE deleted_at < (SELECT coalesce(min(observed_at), 9223372036854775807) FROM
		(SELECT observed_at FROM versions ORDER BY rowid LIMIT ?))`
	if _, err := tx.ExecContext(ctx, `UPDATE feed SET floor = max(floor, coalesce((SELECT max(seq) `+old+`), 0)) WHERE id = 1`, batchSize); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `DELETE `+old, batchSize); err != nil {
		return err
	}
	return tx.Commit()
}

// deleteOldest deletes the versions victims selects in its own transaction,
// so that capture's writes wait for one batch at most, and raises the
// feed's floor to the newest position it deletes: a reader behind it would
// miss that change.
func (s *Store) deleteOldest(ctx context.Context, victims string, args ...any) (int64, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	// A removed version's end is a change too (its endPosition, at most
	// its end's seq), now gone with it.
	if _, err := tx.ExecContext(ctx, `UPDATE feed SET floor = max(floor, coalesce((SELECT max(max(v.seq, coalesce(d.seq, 0)))
		FROM versions v LEFT JOIN deletions d ON d.uid = v.uid WHERE v.rowid IN (`+victims+`)), 0)) WHERE id = 1`, args...); err != nil {
		return 0, err
	}
	res, err := tx.ExecContext(ctx, `DELETE FROM versions WHERE rowid IN (`+victims+`)`, args...)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, err
	}
	if err := addRows(ctx, tx, -n); err != nil {
		return 0, err
	}
	return n, tx.Commit()
}

// Stats reports the rows and the bytes the file uses, free pages excluded:
// those are reused before the file grows again.
func (s *Store) Stats(ctx context.Context) (history.Stats, error) {
	var st history.Stats
	var pages, free, pageSize int64
	if err := s.read.QueryRowContext(ctx, `SELECT value FROM counters WHERE name = 'versions'`).Scan(&st.Rows); err != nil {
		return st, err
	}
	for pragma, dst := range map[string]*int64{"page_count": &pages, "freelist_count": &free, "page_size": &pageSize} {
		if err := s.read.QueryRowContext(ctx, "PRAGMA "+pragma).Scan(dst); err != nil {
			return st, err
		}
	}
	st.Bytes = (pages - free) * pageSize
	return st, nil
}
