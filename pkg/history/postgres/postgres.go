// Package postgres is the shared history store: several replicas write to
// and read from one PostgreSQL database (15 or newer), each capturing
// everything, rows deduplicated by (uid, revision).
//
// Versions live in a table partitioned by day of the Event's last
// occurrence. The day is a function of the version itself, so every replica
// puts a version in the same partition and the primary key (uid, revision,
// last_seen) stays a key of (uid, revision). Expiry drops whole partitions:
// no row-by-row DELETE, no bloat, no VACUUM debt. A day's partition is made
// when the first version of that day arrives.
//
// Past one machine: the table is plain declarative partitioning, so Citus
// (distribute by regarding_uid, which every "one object's history" query
// pins) or a managed distributed PostgreSQL takes it unchanged; reads scale
// with read replicas since history is append-mostly.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eventapiserver/event-apiserver/pkg/history"
	"github.com/eventapiserver/event-apiserver/pkg/history/sqlstore"
	"github.com/eventapiserver/event-apiserver/pkg/search"
)

const day = 24 * time.Hour

// Store is a history.Store in PostgreSQL.
type Store struct {
	*sqlstore.Store
	d *dialect
}

var _ history.Store = &Store{}

// dialect is PostgreSQL's part of the store.
type dialect struct {
	// pool writes (capture, retention, migrations); read answers the
	// queries. Apart, so that as many slow reads as the pool has
	// connections (four counts of a long window) cannot keep capture's
	// next batch waiting for one.
	pool, read *pgxpool.Pool

	mu sync.Mutex
	// days holds the partitions known to exist, so a batch does not ask
	// every time; bounded by clearing.
	days map[int64]bool
}

var spelling = sqlstore.Spelling{
	Versions: "event_versions", Deletions: "event_deletions", Progress: "capture_progress", Feed: "feed_head",
	Hourly:      "event_versions_hourly",
	HourlyAll:   "event_versions_hourly_all",
	Placeholder: func(n int) string { return fmt.Sprintf("$%d", n) },
	NoRows:      pgx.ErrNoRows,
	Greatest:    "GREATEST",
	EndsJoin:    "JOIN",
	LockHead:    " FOR UPDATE OF f",
	Bytewise:    ` COLLATE "C"`,
	Text:        "text", Int: "bigint", Bytes: "bytea", ID: "int",
	// The day is a function of the version itself, so every replica puts
	// a version in the same partition, and the key (uid, revision,
	// last_seen) stays a key of (uid, revision).
	VersionsKey: ",\n\tPRIMARY KEY (uid, revision, last_seen)\n) PARTITION BY RANGE (last_seen)",
	KeyIndex:    "name",
	Contains:    searchSQL,
	PageEnds:    func(subquery string) string { return "h.uid = ANY(ARRAY(" + subquery + "))" },
	// Databases of servers from before versions may lack the feed's columns.
	Upgrade: `ALTER TABLE event_versions ADD COLUMN IF NOT EXISTS seq bigint NOT NULL DEFAULT 0;
ALTER TABLE event_deletions ADD COLUMN IF NOT EXISTS seq bigint NOT NULL DEFAULT 0;
ALTER TABLE event_deletions ADD COLUMN IF NOT EXISTS first_seq bigint NOT NULL DEFAULT 0;
`,
}

// searchSQL is ILIKE on the note, which pg_trgm's GIN index answers: the
// index yields the rows holding every trigram of the term's words, which
// ILIKE then checks (lower case per the database's LC_CTYPE). The term's
// wildcards (% and _) and ILIKE's escape character are escaped. The
// versions stored before the note column (NULL) come from their partial
// index, in the same bitmap, for the reader to match on their Event.
func searchSQL(column history.Column, term string, bind func(any) string) string {
	c := "v." + string(column)
	return c + " ILIKE " + bind("%"+search.EscapeLike(term)+"%") + " OR " + c + " IS NULL"
}

// schema: the baseline is what servers before versions made, their ADD
// COLUMN IF NOT EXISTS steps its Upgrade, with history_schema.
var schema = sqlstore.Schema{
	Baseline: sqlstore.Migration{Version: 1, About: "the baseline, with its own version row", SQL: sqlstore.Baseline(spelling)},
	After: []sqlstore.Migration{
		{Version: 2, About: "the note column", SQL: `ALTER TABLE event_versions ADD COLUMN IF NOT EXISTS note text;`},
		// A constant default: PostgreSQL 11+ adds it without rewriting
		// the table. '' is the server's own cluster (history.ColumnCluster).
		{Version: 3, About: "the cluster column", SQL: `ALTER TABLE event_versions ADD COLUMN IF NOT EXISTS cluster text NOT NULL DEFAULT '';`},
		// sqlstore.Store.Count's covering index (an index-only scan once
		// autovacuum has marked the day's pages all-visible, which it does
		// for insert-only tables since PostgreSQL 13), on every partition.
		{Version: 4, About: "the counts' covering index", SQL: `CREATE INDEX IF NOT EXISTS event_versions_by_counted
			ON event_versions (last_seen, reason, type, regarding_kind, namespace, reporting_controller, regarding_name, cluster, seq);`},
		// The note's text search (searchSQL). pg_trgm ships in Debian's
		// postgresql package (contrib) and is a trusted extension since
		// PostgreSQL 13: the database's owner may create it, no superuser.
		// An index on the partitioned table is made on every partition,
		// and on every partition made later.
		{Version: 5, About: "the note's trigram index for text search", SQL: `
CREATE EXTENSION IF NOT EXISTS pg_trgm;
CREATE INDEX IF NOT EXISTS event_versions_by_note ON event_versions USING gin (note gin_trgm_ops);
CREATE INDEX IF NOT EXISTS event_versions_by_null_note ON event_versions (last_seen) WHERE note IS NULL;
`},
		{Version: 6, About: "the hourly counts", SQL: hourlySQL()},
		// sqlstore.AllNamespacesColumns' doc says why.
		{Version: 7, About: "the hourly counts of all namespaces", SQL: hourlyAllSQL()},
	},
}

// hourlySQL makes the hourly counts (sqlstore.Hourly), kept by a row
// trigger on the partitioned table, which PostgreSQL clones onto every
// partition, those made later too. It fires only for the rows an INSERT
// ... ON CONFLICT DO NOTHING really inserts and a DELETE removes;
// retention drops whole days instead (Retain), which fires nothing, and
// takes the day's hours from the counts itself. The versions stored so far
// are counted under the migration's locks (Migrate), which writes wait for.
func hourlySQL() string {
	return hourly.Table + hourlyTrigger(hourly) + `DROP TRIGGER IF EXISTS event_versions_hourly_counted ON event_versions;
CREATE TRIGGER event_versions_hourly_counted AFTER INSERT OR DELETE ON event_versions
	FOR EACH ROW EXECUTE FUNCTION event_versions_hourly_count();
` + hourly.Backfill
}

// hourly and hourlyAll are the hourly counts and those of all namespaces.
var (
	hourly    = sqlstore.NewHourly(spelling, "")
	hourlyAll = sqlstore.NewHourlyAll(spelling, "")
)

// hourlyTrigger is the hourly counts' trigger function, counting a version
// in each of tables.
func hourlyTrigger(tables ...sqlstore.Hourly) string {
	var counted, uncounted []string
	for _, t := range tables {
		counted = append(counted, t.Counted("NEW"))
		uncounted = append(uncounted, t.Uncounted("OLD"))
	}
	return `CREATE OR REPLACE FUNCTION event_versions_hourly_count() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF TG_OP = 'INSERT' THEN
		` + strings.Join(counted, "\n\t\t") + `
	ELSE
		` + strings.Join(uncounted, "\n\t\t") + `
	END IF;
	RETURN NULL;
END $$;
`
}

// hourlyAllSQL makes the hourly counts of all namespaces, kept by the
// hourly counts' trigger function, replaced by one that counts a version
// in both tables (the trigger stays), and counted from the hourly counts:
// a pass over those, not over the versions. Retain takes a dropped day's
// hours from both.
func hourlyAllSQL() string {
	return hourlyAll.Table + hourlyTrigger(hourly, hourlyAll) + hourlyAll.Backfill
}

// Open prepares a pool for dsn (a PostgreSQL URL or key=value string); it
// does not wait for the database. Several replicas may share one database.
func Open(ctx context.Context, dsn string) (*Store, error) { return open(ctx, dsn, schema) }

// readCancelGrace is how long a query whose context ended waits for
// PostgreSQL to confirm its cancel before its connection is closed: a
// canceled statement ends at its next check for interrupts, within
// milliseconds.
const readCancelGrace = time.Second

func open(ctx context.Context, dsn string, schema sqlstore.Schema) (*Store, error) {
	config, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// pgx's message may quote the DSN, password included.
		return nil, errors.New("--history-dsn is not a valid PostgreSQL connection string")
	}
	// PostgreSQL compiles a statement whose estimated cost passes
	// jit_above_cost, and a text search's estimate does at 10^7 versions
	// (each deleted version's position counted in every day's partition):
	// compiling took 200 ms of a search that runs in about 65 ms without.
	// The store's statements are bounded reads and writes, not the long
	// analytical scans JIT pays off for. A DSN that sets jit keeps it.
	if _, set := config.ConnConfig.RuntimeParams["jit"]; !set {
		config.ConnConfig.RuntimeParams["jit"] = "off"
	}
	readConfig := config.Copy()
	// pgx's default on a query's context ending is to close the connection
	// under it: the client returns, but PostgreSQL notices a closed client
	// only when it next writes to it, so a count or search cut at
	// --history-query-timeout ran on to its end, holding a backend and CPU
	// that the query's retries and capture then waited for. A cancel
	// request ends the statement itself; the connection is closed only if
	// the server has not answered within readCancelGrace.
	readConfig.ConnConfig.BuildContextWatcherHandler = func(conn *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.CancelRequestContextWatcherHandler{Conn: conn, DeadlineDelay: readCancelGrace}
	}
	pool, err := pgxpool.NewWithConfig(ctx, config)
	if err != nil {
		return nil, fmt.Errorf("preparing the history database pool: %w", err)
	}
	read, err := pgxpool.NewWithConfig(ctx, readConfig)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("preparing the history database pool: %w", err)
	}
	d := &dialect{pool: pool, read: read, days: map[int64]bool{}}
	s := &Store{Store: sqlstore.New(d, schema), d: d}
	// A first, short try, so that a reachable database is ready at once;
	// until the schema is in place every call tries again.
	tryCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_ = s.Migrate(tryCtx)
	return s, nil
}

func (d *dialect) Spelling() sqlstore.Spelling { return spelling }

func (d *dialect) Close() error {
	d.read.Close()
	d.pool.Close()
	return nil
}

// reader runs queries on the read pool.
type reader struct{ pool *pgxpool.Pool }

func (r reader) Query(ctx context.Context, query string, args ...any) (sqlstore.Rows, error) {
	return r.pool.Query(ctx, query, args...)
}

func (r reader) QueryRow(ctx context.Context, query string, args ...any) sqlstore.Row {
	return r.pool.QueryRow(ctx, query, args...)
}

func (d *dialect) Read() sqlstore.Queryer { return reader{d.read} }

// tx queues the statements whose results nothing reads, and sends them in
// one round trip before the next query or the commit.
type tx struct {
	tx    pgx.Tx
	batch *pgx.Batch
}

func (t *tx) flush(ctx context.Context) error {
	b := t.batch
	t.batch = nil
	return sendBatch(ctx, t.tx, b)
}

func (t *tx) Query(ctx context.Context, query string, args ...any) (sqlstore.Rows, error) {
	if err := t.flush(ctx); err != nil {
		return nil, err
	}
	return t.tx.Query(ctx, query, args...)
}

func (t *tx) QueryRow(ctx context.Context, query string, args ...any) sqlstore.Row {
	if err := t.flush(ctx); err != nil {
		return failed{err}
	}
	return t.tx.QueryRow(ctx, query, args...)
}

// Exec queues a statement with arguments. One without runs at once, in the
// simple protocol, which takes several statements (a migration's).
func (t *tx) Exec(ctx context.Context, query string, args ...any) error {
	if len(args) == 0 {
		if err := t.flush(ctx); err != nil {
			return err
		}
		_, err := t.tx.Exec(ctx, query)
		return err
	}
	if t.batch == nil {
		t.batch = &pgx.Batch{}
	}
	t.batch.Queue(query, args...)
	return nil
}

// failed is a row whose query could not be sent.
type failed struct{ err error }

func (f failed) Scan(...any) error { return f.err }

// run runs fn in a transaction of the pool, after first, and sends what fn
// queued before the commit.
func (d *dialect) run(ctx context.Context, first []string, fn func(sqlstore.Tx) error) error {
	return pgx.BeginFunc(ctx, d.pool, func(ptx pgx.Tx) error {
		for _, statement := range first {
			if _, err := ptx.Exec(ctx, statement); err != nil {
				return err
			}
		}
		t := &tx{tx: ptx}
		if err := fn(t); err != nil {
			return err
		}
		return t.flush(ctx)
	})
}

func (d *dialect) Write(ctx context.Context, versions []history.Version, fn func(sqlstore.Tx) error) error {
	if err := d.ensureDays(ctx, versions); err != nil {
		return err
	}
	return d.run(ctx, nil, fn)
}

// Migrate takes an advisory lock, so one replica at a time migrates and the
// others then find it done, and the head's row lock, which every write
// takes first (Spelling.LockHead): writes in flight finish before, and
// writes after find the new version and refuse if they do not know it.
func (d *dialect) Migrate(ctx context.Context, fn func(sqlstore.Tx) error) error {
	return d.run(ctx, []string{
		`SELECT pg_advisory_xact_lock(7263541)`,
		`DO $$ BEGIN IF to_regclass('feed_head') IS NOT NULL THEN PERFORM 1 FROM feed_head WHERE id = 1 FOR UPDATE; END IF; END $$`,
	}, fn)
}

// Schema reads history_schema; a database without it is new, or from a
// server before versions, which the baseline completes.
func (d *dialect) Schema(ctx context.Context, t sqlstore.Tx) (int, int, error) {
	var exists bool
	if err := t.QueryRow(ctx, `SELECT to_regclass('history_schema') IS NOT NULL`).Scan(&exists); err != nil || !exists {
		return 0, 0, err
	}
	var version, readableFrom int
	err := t.QueryRow(ctx, `SELECT version, readable_from FROM history_schema WHERE id = 1`).Scan(&version, &readableFrom)
	return version, readableFrom, err
}

// Versioned: history_schema is where every versioned server looks.
func (d *dialect) Versioned(context.Context, sqlstore.Tx, int) error { return nil }

// InsertIgnore inserts the rows with one statement that takes each column
// as an array (unnest), queued to go with the write's next round trip. One
// INSERT a row, as before, cost PostgreSQL an executor start and a
// statement's bookkeeping per version, under the feed's lock every other
// writer waits for (BenchmarkWriteBatch). unnest yields the rows in the
// arrays' order, so of two rows with one key the first is stored, as with
// one INSERT each; the statement's text depends on the columns and their
// types alone, so pgx prepares it once.
func (d *dialect) InsertIgnore(ctx context.Context, t sqlstore.Tx, table string, columns []string, n int, row func(i int, args []any) []any) (int64, error) {
	if n == 0 {
		return 0, nil
	}
	arrays := make([]any, len(columns))
	types := make([]string, len(columns))
	args := make([]any, 0, len(columns))
	for i := 0; i < n; i++ {
		args = row(i, args[:0])
		if len(args) != len(columns) {
			return 0, fmt.Errorf("%s: a row of %d values for %d columns", table, len(args), len(columns))
		}
		for c, v := range args {
			var err error
			if arrays[c], types[c], err = appendColumn(arrays[c], v, n); err != nil {
				return 0, fmt.Errorf("%s.%s: %w", table, columns[c], err)
			}
		}
	}
	holders := make([]string, len(columns))
	for c := range columns {
		holders[c] = "CAST(" + spelling.Placeholder(c+1) + " AS " + types[c] + "[])"
	}
	statement := "INSERT INTO " + table + " (" + strings.Join(columns, ", ") + ") SELECT * FROM unnest(" +
		strings.Join(holders, ", ") + ") ON CONFLICT DO NOTHING"
	return -1, t.Exec(ctx, statement, arrays...)
}

// appendColumn appends v to the column's array (nil at the first row, made
// for n), returning the array and its element's PostgreSQL type.
func appendColumn(array, v any, n int) (any, string, error) {
	switch v := v.(type) {
	case string:
		a, _ := array.([]string)
		if a == nil {
			a = make([]string, 0, n)
		}
		return append(a, v), "text", nil
	case int64:
		a, _ := array.([]int64)
		if a == nil {
			a = make([]int64, 0, n)
		}
		return append(a, v), "bigint", nil
	case []byte:
		a, _ := array.([][]byte)
		if a == nil {
			a = make([][]byte, 0, n)
		}
		return append(a, v), "bytea", nil
	}
	return nil, "", fmt.Errorf("a value of type %T", v)
}

// Counted: Stats reads the planner's estimate instead.
func (d *dialect) Counted(context.Context, sqlstore.Tx, int64) error { return nil }

// NotLive binds the uids as one array.
func (d *dialect) NotLive(_ context.Context, _ sqlstore.Tx, uids []string, bind func(any) string) (string, error) {
	if uids == nil {
		uids = []string{}
	}
	return "NOT (v.uid = ANY(CAST(" + bind(uids) + " AS text[])))", nil
}

func dayOf(t int64) int64 {
	d := int64(day)
	if t < 0 {
		return (t - d + 1) / d
	}
	return t / d
}

// dayStart is when day d starts, in Unix nanoseconds.
func dayStart(d int64) int64 { return d * int64(day) }

func partitionName(d int64) string {
	return "event_versions_" + time.Unix(0, dayStart(d)).UTC().Format("20060102")
}

// ensureDays makes the partitions of the days a batch touches.
func (d *dialect) ensureDays(ctx context.Context, versions []history.Version) error {
	// A day is marked known only once its partition exists: a concurrent
	// Write that saw it marked earlier would insert into no partition.
	var missing []int64
	pending := map[int64]bool{}
	d.mu.Lock()
	for _, v := range versions {
		day := dayOf(v.LastSeen.UnixNano())
		if !d.days[day] && !pending[day] {
			missing = append(missing, day)
			pending[day] = true
		}
	}
	if len(d.days) > 1000 {
		d.days = map[int64]bool{}
	}
	d.mu.Unlock()
	for _, day := range missing {
		err := pgx.BeginFunc(ctx, d.pool, func(tx pgx.Tx) error {
			// Replicas making the same partition at once would fail on
			// the catalog's unique index; the lock orders them.
			if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(7263542)`); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s PARTITION OF event_versions FOR VALUES FROM (%d) TO (%d)`,
				partitionName(day), dayStart(day), dayStart(day+1)))
			return err
		})
		if err != nil {
			return fmt.Errorf("creating history partition %s: %w", partitionName(day), err)
		}
		d.mu.Lock()
		d.days[day] = true
		d.mu.Unlock()
	}
	return nil
}

// sendBatch runs the queued statements in one round trip.
func sendBatch(ctx context.Context, tx pgx.Tx, b *pgx.Batch) error {
	if b == nil || b.Len() == 0 {
		return nil
	}
	results := tx.SendBatch(ctx, b)
	for i := 0; i < b.Len(); i++ {
		if _, err := results.Exec(); err != nil {
			results.Close()
			return err
		}
	}
	return results.Close()
}

// partition is one day's table.
type partition struct {
	name  string
	upper int64
	bytes int64
	rows  int64
}

// partitions lists the day partitions, oldest first.
func (d *dialect) partitions(ctx context.Context) ([]partition, error) {
	rows, err := d.pool.Query(ctx, `SELECT c.relname, pg_total_relation_size(c.oid), greatest(c.reltuples, 0)::bigint
		FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		WHERE i.inhparent = 'event_versions'::regclass ORDER BY c.relname`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []partition
	for rows.Next() {
		var p partition
		if err := rows.Scan(&p.name, &p.bytes, &p.rows); err != nil {
			return nil, err
		}
		t, err := time.Parse("20060102", strings.TrimPrefix(p.name, "event_versions_"))
		if err != nil {
			continue
		}
		p.upper = t.Add(day).UnixNano()
		out = append(out, p)
	}
	return out, rows.Err()
}

// Retain drops whole days: those that ended before cutoff (by the Events'
// last occurrence), then the oldest while the store is over maxBytes.
// batchSize is not needed: a DROP is one catalog change however many rows.
func (d *dialect) Retain(ctx context.Context, cutoff time.Time, maxBytes int64, _ int) (int64, error) {
	parts, err := d.partitions(ctx)
	if err != nil {
		return 0, err
	}
	var total int64
	for _, p := range parts {
		total += p.bytes
	}
	var deleted int64
	for i, p := range parts {
		old := !cutoff.IsZero() && p.upper <= cutoff.UnixNano()
		// The newest day is never dropped for size: it is being written.
		big := maxBytes > 0 && total > maxBytes && i < len(parts)-1
		if !old && !big {
			break
		}
		var rows, newest int64
		// A dropped version's end is a change too (at most its end's seq).
		if err := d.pool.QueryRow(ctx, fmt.Sprintf(`SELECT count(*), coalesce(max(GREATEST(v.seq, coalesce(d.seq, 0))), 0)
			FROM %s v LEFT JOIN event_deletions d ON d.uid = v.uid`, pgx.Identifier{p.name}.Sanitize())).Scan(&rows, &newest); err != nil {
			return deleted, err
		}
		// The floor first: a crash between the two leaves it too high,
		// which costs a reader a relist, never a missed change.
		if _, err := d.pool.Exec(ctx, sqlstore.RaiseFloor(spelling, `CAST($1 AS BIGINT)`), newest); err != nil {
			return deleted, err
		}
		// A day's versions are the hourly counts of its 24 hours (the
		// partitions' bounds are whole days of last_seen), which go with
		// them in one transaction: a DROP fires no trigger. Every hour
		// before the day's end goes, not only the day's: no older day is
		// left (they are dropped oldest first), and a replica of an older
		// version that dropped one before noticing the counts of all
		// namespaces left that day's hours there, counted still.
		err := pgx.BeginFunc(ctx, d.pool, func(tx pgx.Tx) error {
			for _, table := range []string{spelling.Hourly, spelling.HourlyAll} {
				if _, err := tx.Exec(ctx, `DELETE FROM `+table+` WHERE hour < $1`, p.upper/int64(time.Hour)); err != nil {
					return err
				}
			}
			_, err := tx.Exec(ctx, fmt.Sprintf(`DROP TABLE IF EXISTS %s`, pgx.Identifier{p.name}.Sanitize()))
			return err
		})
		if err != nil {
			return deleted, err
		}
		d.mu.Lock()
		d.days = map[int64]bool{}
		d.mu.Unlock()
		deleted += rows
		total -= p.bytes
	}
	if !cutoff.IsZero() {
		if _, err := d.pool.Exec(ctx, `WITH ended AS (DELETE FROM event_deletions WHERE deleted_at < $1 RETURNING seq) `+
			sqlstore.RaiseFloor(spelling, `SELECT max(seq) FROM ended`), cutoff.UnixNano()); err != nil {
			return deleted, err
		}
	}
	return deleted, nil
}

// Stats reports the partitions' size and the planner's row estimate, which
// costs nothing at any size (an exact count reads every row).
func (d *dialect) Stats(ctx context.Context) (history.Stats, error) {
	parts, err := d.partitions(ctx)
	if err != nil {
		return history.Stats{}, err
	}
	var st history.Stats
	for _, p := range parts {
		st.Bytes += p.bytes
		st.Rows += p.rows
	}
	return st, nil
}
