// Package sqlstore is the history store written once for every SQL
// database: its queries, row scanning, cursors, the feed (package history's
// doc), the writes with their feed positions, the shared parts of retention,
// and versioned migrations with the refusal of a newer schema (schema.go).
// A Dialect holds what a database does its own way (package sqlite: one
// file, multi-row inserts, retention by rowid; package postgres: a shared
// database, pgx batches, day partitions), as kine keeps one generic SQL
// layer over small per-database dialects.
package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/eventapiserver/event-apiserver/pkg/history"
)

// Store is a history.Store over a Dialect.
type Store struct {
	d      Dialect
	sp     Spelling
	schema Schema
	sql    statements

	// mu guards the schema state; migrated is set once the schema was
	// migrated (or found newer). Until then every call tries to migrate,
	// so a database that is down when the server starts delays history,
	// never the server.
	mu       sync.Mutex
	migrated bool
	state    history.Schema
}

var _ history.Store = &Store{}

// statements are the fixed statements, spelled for the dialect once.
type statements struct {
	recordColumns, changeColumns, endPosition  string
	selectRecord, pageColumns, pageRecord      string
	versionColumns                             []string
	head, schema, setSchema, setHead, progress string
	readProgress, feed, countVersions          string
	lastDeletion                               string
}

// New is a Store of d, whose schema is s. It does not touch the database:
// Migrate does, else the first call.
func New(d Dialect, s Schema) *Store {
	sp := d.Spelling()
	spell := strings.NewReplacer("{versions}", sp.Versions, "{deletions}", sp.Deletions,
		"{progress}", sp.Progress, "{feed}", sp.Feed, "{greatest}", sp.Greatest)
	// Fixed statements are written with ? and numbered for the dialect.
	render := func(q string) string {
		q = spell.Replace(q)
		var b strings.Builder
		n := 0
		for _, part := range strings.Split(q, "?") {
			if n > 0 {
				b.WriteString(sp.Placeholder(n))
			}
			b.WriteString(part)
			n++
		}
		return b.String()
	}
	st := statements{
		endPosition:    render(endPosition),
		recordColumns:  render(recordColumns(endPosition)),
		changeColumns:  render(recordColumns("NULL")),
		pageColumns:    pageColumns(),
		pageRecord:     render(pageRecord()),
		versionColumns: versionColumns(),
		// The schema's version in the same round trip: the lock is held
		// from this statement to the commit, and each round trip in
		// between is waited for by every other writer.
		head: render(`SELECT f.position, s.version, s.readable_from FROM {feed} f, history_schema s
			WHERE f.id = 1 AND s.id = 1` + sp.LockHead),
		schema: `SELECT version, readable_from FROM history_schema WHERE id = 1`,
		setSchema: render(`INSERT INTO history_schema (id, version, readable_from) VALUES (1, ?, ?)
			ON CONFLICT (id) DO UPDATE SET version = excluded.version, readable_from = excluded.readable_from`),
		setHead: render(`UPDATE {feed} SET position = ? WHERE id = 1`),
		progress: render(`INSERT INTO {progress} (source, revision) VALUES (?, ?)
			ON CONFLICT (source) DO UPDATE SET revision = CASE WHEN CAST(? AS BOOLEAN) THEN excluded.revision
			ELSE {greatest}({progress}.revision, excluded.revision) END`),
		readProgress:  render(`SELECT revision FROM {progress} WHERE source = ?`),
		feed:          render(`SELECT position, floor FROM {feed} WHERE id = 1`),
		countVersions: spell.Replace(`SELECT uid, count(*) FROM {versions} WHERE uid IN (`),
		lastDeletion:  render(`SELECT coalesce(max(seq), 0) FROM {deletions} WHERE seq > 0 AND seq > ?`),
	}
	st.selectRecord = `SELECT ` + st.recordColumns + ` FROM ` + sp.Versions + ` v LEFT JOIN ` + sp.Deletions + ` d ON d.uid = v.uid`
	return &Store{d: d, sp: sp, schema: s, sql: st, state: history.Schema{Known: s.Known()}}
}

func (s *Store) Close() error { return s.d.Close() }

func (s *Store) Write(ctx context.Context, batch history.Batch) error {
	if err := s.writable(ctx); err != nil {
		return err
	}
	return s.d.Write(ctx, batch.Versions, func(tx Tx) error {
		// The head's lock, held to the commit, makes every writer's batches
		// take positions one after the other, in commit order: the feed's
		// proof in package history's doc.
		var position int64
		var version, readableFrom int
		if err := tx.QueryRow(ctx, s.sql.head).Scan(&position, &version, &readableFrom); err != nil {
			return fmt.Errorf("reading the feed's head and the history schema's version: %w", err)
		}
		// Read under the lock: a migration holds it (Dialect.Migrate), so
		// a schema made newer meanwhile is seen here, before any write.
		if err := s.checkSchema(version, readableFrom); err != nil {
			return err
		}
		if len(batch.Versions) > 0 {
			// The i-th version takes position+i+1; one already stored
			// keeps its own, and its new one is a gap in the feed.
			inserted, err := s.d.InsertIgnore(ctx, tx, s.sp.Versions, s.sql.versionColumns, len(batch.Versions),
				func(i int, args []any) []any { return versionRow(args, &batch.Versions[i], position+int64(i)+1) })
			if err != nil {
				return err
			}
			position += int64(len(batch.Versions))
			if err := s.d.Counted(ctx, tx, inserted); err != nil {
				return err
			}
		}
		// The versions go first: an end's block has a position for each
		// version of its Event stored before it, these included.
		position, err := s.insertDeletions(ctx, tx, batch.Deletions, position)
		if err != nil {
			return err
		}
		if batch.Gone != nil {
			if position, err = s.recordGone(ctx, tx, batch.Gone, position); err != nil {
				return err
			}
		}
		if err := tx.Exec(ctx, s.sql.setHead, position); err != nil {
			return err
		}
		if batch.Source == "" {
			return nil
		}
		return tx.Exec(ctx, s.sql.progress, batch.Source, batch.Revision, batch.Rewind)
	})
}

// countChunk bounds the uids of one count: databases bound a statement's
// parameters.
const countChunk = 1000

// versionCounts counts the versions stored of each uid.
func (s *Store) versionCounts(ctx context.Context, tx Tx, uids []string) (map[string]int64, error) {
	counts := make(map[string]int64, len(uids))
	for from := 0; from < len(uids); from += countChunk {
		chunk := uids[from:min(from+countChunk, len(uids))]
		args := make([]any, 0, len(chunk))
		bind := s.sp.bind(&args)
		holders := make([]string, 0, len(chunk))
		for _, uid := range chunk {
			holders = append(holders, bind(uid))
		}
		rows, err := tx.Query(ctx, s.sql.countVersions+strings.Join(holders, ", ")+`) GROUP BY uid`, args...)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var uid string
			var n int64
			if err := rows.Scan(&uid, &n); err != nil {
				rows.Close()
				return nil, err
			}
			counts[uid] = n
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	return counts, nil
}

// insertDeletions gives each end the next block of positions, one per
// version of its Event stored so far (at least one), and returns the last
// position taken; an end already stored keeps its own, and the block it was
// offered is a gap in the feed.
func (s *Store) insertDeletions(ctx context.Context, tx Tx, deletions []history.Deletion, after int64) (int64, error) {
	if len(deletions) == 0 {
		return after, nil
	}
	uids := make([]string, 0, len(deletions))
	for _, d := range deletions {
		uids = append(uids, d.UID)
	}
	counts, err := s.versionCounts(ctx, tx, uids)
	if err != nil {
		return after, err
	}
	first := make([]int64, len(deletions))
	last := make([]int64, len(deletions))
	for i := range deletions {
		first[i], last[i] = after+1, after+max(counts[deletions[i].UID], 1)
		after = last[i]
	}
	_, err = s.d.InsertIgnore(ctx, tx, s.sp.Deletions, []string{"uid", "revision", "deleted_at", "seq", "first_seq"}, len(deletions),
		func(i int, args []any) []any {
			d := &deletions[i]
			return append(args, d.UID, d.Revision, d.At.UnixNano(), last[i], first[i])
		})
	return after, err
}

// recordGone stores the unseen deletions in blocks of positions after
// after, as insertDeletions does, and returns the last position taken.
func (s *Store) recordGone(ctx context.Context, tx Tx, g *history.Gone, after int64) (int64, error) {
	var args []any
	bind := s.sp.bind(&args)
	// Placeholders are bound in the order they appear: SQLite's ? are.
	// The sums number each unseen Event's block of positions, one per
	// version stored (insertDeletions' rule); "WHERE true" keeps SQLite
	// from reading the upsert clause as the join's ON.
	query := `INSERT INTO ` + s.sp.Deletions + ` (uid, revision, deleted_at, seq, first_seq)
		SELECT uid, CAST(` + bind(g.Revision) + ` AS BIGINT), CAST(` + bind(g.At.UnixNano()) + ` AS BIGINT),
		CAST(` + bind(after) + ` AS BIGINT) + sum(n) OVER (ORDER BY uid), CAST(` + bind(after) + ` AS BIGINT) + sum(n) OVER (ORDER BY uid) - n + 1
		FROM (SELECT u.uid, (SELECT count(*) FROM ` + s.sp.Versions + ` h WHERE h.uid = u.uid) AS n
		FROM (SELECT DISTINCT v.uid FROM ` + s.sp.Versions + ` v WHERE v.revision <= ` + bind(g.Revision) +
		` AND v.cluster = ` + bind(g.Cluster)
	notLive, err := s.d.NotLive(ctx, tx, g.Live, bind)
	if err != nil {
		return after, err
	}
	query += ` AND ` + notLive + ` AND NOT EXISTS (SELECT 1 FROM ` + s.sp.Deletions + ` d WHERE d.uid = v.uid)) u) unseen
		WHERE true ON CONFLICT (uid) DO NOTHING`
	if err := tx.Exec(ctx, query, args...); err != nil {
		return after, err
	}
	var last int64
	if err := tx.QueryRow(ctx, s.sql.lastDeletion, after).Scan(&last); err != nil {
		return after, err
	}
	return max(after, last), nil
}

func (s *Store) Progress(ctx context.Context, source string) (int64, bool, error) {
	if err := s.readable(ctx); err != nil {
		return 0, false, err
	}
	var rev int64
	err := s.d.Read().QueryRow(ctx, s.sql.readProgress, source).Scan(&rev)
	if errors.Is(err, s.sp.NoRows) {
		return 0, false, nil
	}
	return rev, err == nil, err
}

func (s *Store) List(ctx context.Context, q history.Query) ([]history.Record, error) {
	// Where the list's keys are read apart from its rows (Spelling.RowID),
	// its statement counts the selection as it reads it; else List counts
	// it first.
	countedInList := q.MaxRows > 0 && s.sp.RowID != ""
	if q.MaxRows > 0 && !countedInList {
		if err := s.readable(ctx); err != nil {
			return nil, err
		}
		query, args, err := s.countQuery(q)
		if err != nil {
			return nil, err
		}
		var n int
		if err := s.d.Read().QueryRow(ctx, query, args...).Scan(&n); err != nil {
			return nil, err
		}
		if n > q.MaxRows {
			return nil, tooManyRows(q)
		}
	}
	var selected int
	records, err := read(ctx, s, func() (string, []any, error) { return s.listQuery(q) }, func(rows Rows) (history.Record, error) {
		if countedInList {
			return scanRecord(rows, &selected)
		}
		return scanRecord(rows)
	})
	if err == nil && countedInList && selected > q.MaxRows {
		return nil, tooManyRows(q)
	}
	return records, err
}

// tooManyRows is List's answer to a query selecting more than MaxRows.
func tooManyRows(q history.Query) error {
	return fmt.Errorf("%w: more than %d", history.ErrTooManyRows, q.MaxRows)
}

// read runs the statement build makes on the read pool, scanning each row.
func read[T any](ctx context.Context, s *Store, build func() (string, []any, error), scan func(Rows) (T, error)) ([]T, error) {
	if err := s.readable(ctx); err != nil {
		return nil, err
	}
	query, args, err := build()
	if err != nil {
		return nil, err
	}
	rows, err := s.d.Read().Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		r, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// listQuery is List's statement. Where the dialect reads a list's keys
// apart from its rows (Spelling.RowID) and q has MaxRows, each row ends with
// the count of the versions selected, at most MaxRows+1.
func (s *Store) listQuery(q history.Query) (string, []any, error) {
	var args []any
	bind := s.sp.bind(&args)
	w, err := where(q, s.sp, bind)
	if err != nil {
		return "", nil, err
	}
	if s.sp.RowID != "" {
		return s.keysFirst(q, w, bind), args, nil
	}
	filter := w + ` ORDER BY v.last_seen DESC, v.revision DESC`
	if q.Limit > 0 {
		filter += ` LIMIT ` + bind(q.Limit)
	}
	if s.sp.PageEnds == nil {
		return s.selectRecord(q.Through) + filter, args, nil
	}
	return s.pageStatement(q.Through, filter, ` ORDER BY p.last_seen DESC, p.revision DESC`), args, nil
}

// keysFirst is listQuery's statement where a version's row is found by its
// RowID: the page's keys first, its rows after. A selection the sort finds
// unordered (a text search's matches, an OR of two indexes) was sorted as
// whole records, each read with its end and its end's position counted,
// for every version selected rather than every one listed: a search for a
// rare word at 10^7 versions selects three times its page, and took 45 ms
// against 25 ms so (BenchmarkSearchRareWordWeek). With MaxRows, the
// selection is cut at MaxRows+1 and counted in the same pass (selected),
// where a count of its own read every selected row once more. CROSS JOIN
// keeps SQLite from reading v before the page.
func (s *Store) keysFirst(q history.Query, where string, bind func(any) string) string {
	keys := `SELECT v.` + s.sp.RowID + ` AS page_row, v.last_seen AS page_seen, v.revision AS page_revision FROM ` + s.sp.Versions + ` v` + where
	selected := ""
	if q.MaxRows > 0 {
		keys = `SELECT page_row, page_seen, page_revision, count(*) OVER () AS selected FROM (` + keys + ` LIMIT ` + bind(q.MaxRows+1) + `) AS cut`
		selected = `, p.selected`
	}
	keys += ` ORDER BY page_seen DESC, page_revision DESC`
	if q.Limit > 0 {
		keys += ` LIMIT ` + bind(q.Limit)
	}
	return `SELECT ` + s.sql.recordColumns + selected + ` FROM (` + keys + `) p CROSS JOIN ` + s.sp.Versions + ` v ON v.` + s.sp.RowID + ` = p.page_row LEFT JOIN ` +
		s.sp.Deletions + ` d ON d.uid = v.uid` + asOf(q.Through) + ` ORDER BY p.page_seen DESC, p.page_revision DESC`
}

// countQuery counts the versions q selects from its position on (After),
// at most MaxRows+1: Query.MaxRows's check.
func (s *Store) countQuery(q history.Query) (string, []any, error) {
	var args []any
	bind := s.sp.bind(&args)
	w, err := where(q, s.sp, bind)
	if err != nil {
		return "", nil, err
	}
	return `SELECT count(*) FROM (SELECT 1 FROM ` + s.sp.Versions + ` v` + w + ` LIMIT ` + bind(q.MaxRows+1) + `) AS selected`, args, nil
}

func (s *Store) Get(ctx context.Context, namespace, name string, revision int64) (history.Record, error) {
	if err := s.readable(ctx); err != nil {
		return history.Record{}, err
	}
	var args []any
	bind := s.sp.bind(&args)
	query := s.selectRecord(0) + ` WHERE v.namespace = ` + bind(namespace) + ` AND v.name = ` + bind(name) + ` AND v.revision = ` + bind(revision)
	r, err := scanRecord(s.d.Read().QueryRow(ctx, query, args...))
	if errors.Is(err, s.sp.NoRows) {
		return r, history.ErrNotFound
	}
	return r, err
}

// scanRecord reads recordColumns, then extra.
func scanRecord(row Row, extra ...any) (history.Record, error) {
	var r history.Record
	var lastSeen, observed, seq int64
	var delRev, delAt, delSeq sql.NullInt64
	v := &r.Version
	dest := make([]any, 0, len(history.Columns)+9+len(extra))
	dest = append(dest, &v.UID, &v.Revision)
	for i := range history.Columns {
		dest = append(dest, history.Columns[i].Value(v))
	}
	dest = append(dest, &lastSeen, &observed, &v.Object, &seq, &delRev, &delAt, &delSeq)
	if err := row.Scan(append(dest, extra...)...); err != nil {
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
	if err := s.readable(ctx); err != nil {
		return history.FeedState{}, err
	}
	var f history.FeedState
	err := s.d.Read().QueryRow(ctx, s.sql.feed).Scan(&f.Position, &f.Floor)
	return f, err
}

// Changes reads new versions and Events' ends, each leg by its position
// index, and merges them. A version's end shows on it only when the end
// came first (it is then delivered once, as part of the version); a later
// end is a change on each version stored before it, at that version's
// endPosition, in the order of the positions (the ends' by seq, then each
// end's versions by revision), so that a page may stop inside an end's
// block and the next resume after the last version delivered.
func (s *Store) Changes(ctx context.Context, q history.ChangeQuery) ([]history.Change, error) {
	return read(ctx, s, func() (string, []any, error) { return s.changesQuery(q) }, func(rows Rows) (history.Change, error) {
		var c history.Change
		var position, ended int64
		var err error
		c.Record, err = scanRecord(rows, &position, &ended)
		c.Position, c.Ended = position, ended == 1
		return c, err
	})
}

// Retain is the dialect's, refused with the writes.
func (s *Store) Retain(ctx context.Context, cutoff time.Time, maxBytes int64, batchSize int) (int64, error) {
	if err := s.writable(ctx); err != nil {
		return 0, err
	}
	return s.d.Retain(ctx, cutoff, maxBytes, batchSize)
}

func (s *Store) Stats(ctx context.Context) (history.Stats, error) {
	if err := s.readable(ctx); err != nil {
		return history.Stats{}, err
	}
	return s.d.Stats(ctx)
}

// RaiseFloor is the statement that raises the feed's floor to the largest
// position newest selects (a subquery of one column), in retention's
// transaction or before it: a reader behind the floor would miss a change.
func RaiseFloor(sp Spelling, newest string) string {
	return `UPDATE ` + sp.Feed + ` SET floor = ` + sp.Greatest + `(floor, coalesce((` + newest + `), 0)) WHERE id = 1`
}
