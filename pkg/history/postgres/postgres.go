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
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eventapiserver/event-apiserver/pkg/history"
)

const schema = `
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

const day = 24 * time.Hour

// Store is a history.Store in PostgreSQL.
type Store struct {
	pool *pgxpool.Pool

	// schemaReady is set once the schema exists. Until then every call
	// tries to make it, so a database that is down when the server starts
	// delays history, never the server.
	schemaMu    sync.Mutex
	schemaReady bool

	mu sync.Mutex
	// days holds the partitions known to exist, so a batch does not ask
	// every time; bounded by clearing.
	days map[int64]bool
}

var _ history.Store = &Store{}

// Open prepares a pool for dsn (a PostgreSQL URL or key=value string); it
// does not wait for the database. Several replicas may share one database.
func Open(ctx context.Context, dsn string) (*Store, error) {
	config, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// pgx's message may quote the DSN, password included.
		return nil, errors.New("--history-dsn is not a valid PostgreSQL connection string")
	}
	pool, err := pgxpool.NewWithConfig(ctx, config)
	if err != nil {
		return nil, fmt.Errorf("preparing the history database pool: %w", err)
	}
	s := &Store{pool: pool, days: map[int64]bool{}}
	// A first, short try, so that a reachable database is ready at once.
	tryCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_ = s.ensureSchema(tryCtx)
	return s, nil
}

func (s *Store) ensureSchema(ctx context.Context) error {
	s.schemaMu.Lock()
	defer s.schemaMu.Unlock()
	if s.schemaReady {
		return nil
	}
	// One replica at a time creates the schema; the others wait, then see it.
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(7263541)`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, schema)
		return err
	})
	if err != nil {
		return fmt.Errorf("creating the history schema: %w", err)
	}
	s.schemaReady = true
	return nil
}

func (s *Store) Close() error {
	s.pool.Close()
	return nil
}

func dayOf(t int64) int64 {
	d := int64(day)
	if t < 0 {
		return (t - d + 1) / d
	}
	return t / d
}

func partitionName(d int64) string {
	return "event_versions_" + time.Unix(0, d*int64(day)).UTC().Format("20060102")
}

// ensureDays makes the partitions of the days a batch touches.
func (s *Store) ensureDays(ctx context.Context, versions []history.Version) error {
	// A day is marked known only once its partition exists: a concurrent
	// Write that saw it marked earlier would insert into no partition.
	var missing []int64
	pending := map[int64]bool{}
	s.mu.Lock()
	for _, v := range versions {
		d := dayOf(v.LastSeen.UnixNano())
		if !s.days[d] && !pending[d] {
			missing = append(missing, d)
			pending[d] = true
		}
	}
	if len(s.days) > 1000 {
		s.days = map[int64]bool{}
	}
	s.mu.Unlock()
	for _, d := range missing {
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			// Replicas making the same partition at once would fail on
			// the catalog's unique index; the lock orders them.
			if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(7263542)`); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s PARTITION OF event_versions FOR VALUES FROM (%d) TO (%d)`,
				partitionName(d), d*int64(day), (d+1)*int64(day)))
			return err
		})
		if err != nil {
			return fmt.Errorf("creating history partition %s: %w", partitionName(d), err)
		}
		s.mu.Lock()
		s.days[d] = true
		s.mu.Unlock()
	}
	return nil
}

func (s *Store) Write(ctx context.Context, batch history.Batch) error {
	if err := s.ensureSchema(ctx); err != nil {
		return err
	}
	if err := s.ensureDays(ctx, batch.Versions); err != nil {
		return err
	}
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// The head's row lock, held to commit, makes every replica's
		// batches take positions one after the other, in commit order:
		// the feed's proof in package history's doc.
		var position int64
		if err := tx.QueryRow(ctx, `SELECT position FROM feed_head WHERE id = 1 FOR UPDATE`).Scan(&position); err != nil {
			return err
		}
		b := &pgx.Batch{}
		for i := range batch.Versions {
			v := &batch.Versions[i]
			position++
			b.Queue(`INSERT INTO event_versions (uid, revision, namespace, name,
				regarding_uid, regarding_name, regarding_namespace, regarding_kind, related_uid, related_name,
				reason, type, reporting_controller, last_seen, observed_at, object, seq)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)
				ON CONFLICT (uid, revision, last_seen) DO NOTHING`,
				v.UID, v.Revision, v.Namespace, v.Name, v.RegardingUID, v.RegardingName, v.RegardingNamespace,
				v.RegardingKind, v.RelatedUID, v.RelatedName, v.Reason, v.Type, v.ReportingController,
				v.LastSeen.UnixNano(), v.ObservedAt.UnixNano(), v.Object, position)
		}
		// The versions go first: an end's block has a position for each
		// version of its Event stored before it, these included.
		if err := sendBatch(ctx, tx, b); err != nil {
			return err
		}
		b = &pgx.Batch{}
		if len(batch.Deletions) > 0 {
			uids := make([]string, 0, len(batch.Deletions))
			for _, d := range batch.Deletions {
				uids = append(uids, d.UID)
			}
			counts := map[string]int64{}
			rows, err := tx.Query(ctx, `SELECT uid, count(*) FROM event_versions WHERE uid = ANY($1::text[]) GROUP BY uid`, uids)
			if err != nil {
				return err
			}
			for rows.Next() {
				var uid string
				var n int64
				if err := rows.Scan(&uid, &n); err != nil {
					rows.Close()
					return err
				}
				counts[uid] = n
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
			for _, d := range batch.Deletions {
				first := position + 1
				position += max(counts[d.UID], 1)
				b.Queue(`INSERT INTO event_deletions (uid, revision, deleted_at, seq, first_seq) VALUES ($1, $2, $3, $4, $5)
					ON CONFLICT (uid) DO NOTHING`, d.UID, d.Revision, d.At.UnixNano(), position, first)
			}
		}
		if g := batch.Gone; g != nil {
			if err := sendBatch(ctx, tx, b); err != nil {
				return err
			}
			b = &pgx.Batch{}
			if err := tx.QueryRow(ctx, `WITH ins AS (INSERT INTO event_deletions (uid, revision, deleted_at, seq, first_seq)
				SELECT uid, $1::bigint, $2::bigint, ($4::bigint + sum(n) OVER (ORDER BY uid))::bigint,
					($4::bigint + sum(n) OVER (ORDER BY uid) - n + 1)::bigint FROM
				(SELECT u.uid, (SELECT count(*) FROM event_versions h WHERE h.uid = u.uid) AS n FROM
				(SELECT DISTINCT v.uid FROM event_versions v
				WHERE v.revision <= $1 AND NOT (v.uid = ANY($3::text[]))
				AND NOT EXISTS (SELECT 1 FROM event_deletions d WHERE d.uid = v.uid)) u) unseen
				ON CONFLICT (uid) DO NOTHING RETURNING seq)
				SELECT GREATEST($4::bigint, coalesce(max(seq), 0)) FROM ins`, g.Revision, g.At.UnixNano(), g.Live, position).Scan(&position); err != nil {
				return err
			}
		}
		if batch.Source != "" {
			b.Queue(`INSERT INTO capture_progress (source, revision) VALUES ($1, $2)
				ON CONFLICT (source) DO UPDATE SET revision = CASE WHEN $3::boolean THEN excluded.revision
				ELSE GREATEST(capture_progress.revision, excluded.revision) END`,
				batch.Source, batch.Revision, batch.Rewind)
		}
		if err := sendBatch(ctx, tx, b); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE feed_head SET position = $1 WHERE id = 1`, position)
		return err
	})
}

// sendBatch runs the queued statements in one round trip.
func sendBatch(ctx context.Context, tx pgx.Tx, b *pgx.Batch) error {
	if b.Len() == 0 {
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

func (s *Store) Progress(ctx context.Context, source string) (int64, bool, error) {
	if err := s.ensureSchema(ctx); err != nil {
		return 0, false, err
	}
	var rev int64
	err := s.pool.QueryRow(ctx, `SELECT revision FROM capture_progress WHERE source = $1`, source).Scan(&rev)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	return rev, err == nil, err
}

// endPosition is the feed position of the end of version v's Event d on v,
// NULL without an end; see the SQLite store's.
const endPosition = `CASE WHEN d.seq IS NULL THEN NULL ELSE GREATEST(CASE WHEN d.first_seq > 0 THEN d.first_seq ELSE d.seq END,
	d.seq - (SELECT count(*) FROM event_versions h WHERE h.uid = v.uid AND h.seq < d.seq AND h.revision > v.revision)) END`

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
	return `SELECT ` + recordColumns + ` FROM event_versions v LEFT JOIN event_deletions d ON d.uid = v.uid` + join
}

func (s *Store) List(ctx context.Context, q history.Query) ([]history.Record, error) {
	if err := s.ensureSchema(ctx); err != nil {
		return nil, err
	}
	where, args, err := whereClause(q)
	if err != nil {
		return nil, err
	}
	query := selectRecord(q.Through) + where + ` ORDER BY v.last_seen DESC, v.revision DESC`
	if q.Limit > 0 {
		args = append(args, q.Limit)
		query += fmt.Sprintf(` LIMIT $%d`, len(args))
	}
	rows, err := s.pool.Query(ctx, query, args...)
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
	if err := s.ensureSchema(ctx); err != nil {
		return history.Record{}, err
	}
	row := s.pool.QueryRow(ctx, selectRecord(0)+` WHERE v.namespace = $1 AND v.name = $2 AND v.revision = $3`,
		namespace, name, revision)
	r, err := scanRecord(row)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, history.ErrNotFound
	}
	return r, err
}

// whereClause binds $n placeholders in order.
func whereClause(q history.Query) (string, []any, error) {
	var args []any
	where, err := q.Where(func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	})
	return where, args, err
}

func scanRecord(row pgx.Row, extra ...any) (history.Record, error) {
	var r history.Record
	var lastSeen, observed, seq int64
	var delRev, delAt, delSeq *int64
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
	if delAt != nil {
		at := time.Unix(0, *delAt).UTC()
		r.DeletedAt = &at
		r.DeletedRevision = *delRev
		r.Position = max(r.Position, *delSeq)
	}
	return r, nil
}

func (s *Store) Feed(ctx context.Context) (history.FeedState, error) {
	if err := s.ensureSchema(ctx); err != nil {
		return history.FeedState{}, err
	}
	var f history.FeedState
	err := s.pool.QueryRow(ctx, `SELECT position, floor FROM feed_head WHERE id = 1`).Scan(&f.Position, &f.Floor)
	return f, err
}

// Changes reads new versions and Events' ends, each leg by its position
// index, and merges them; see the SQLite store's Changes for the rules.
func (s *Store) Changes(ctx context.Context, q history.ChangeQuery) ([]history.Change, error) {
	if err := s.ensureSchema(ctx); err != nil {
		return nil, err
	}
	var args []any
	bind := func(v any) string { args = append(args, v); return fmt.Sprintf("$%d", len(args)) }
	limit := q.Limit
	if limit <= 0 {
		limit = 1000
	}
	versionsWhere, err := q.Where("v.seq", bind)
	if err != nil {
		return nil, err
	}
	versions := `(SELECT ` + recordColumns + `, v.seq AS position, false AS ended
		FROM event_versions v LEFT JOIN event_deletions d ON d.uid = v.uid AND d.seq < v.seq` + versionsWhere +
		` ORDER BY v.seq LIMIT ` + bind(limit) + `)`
	endsWhere, err := q.Where("d.seq", bind)
	if err != nil {
		return nil, err
	}
	// An end from before blocks is on its Event's latest version only.
	ends := `(SELECT ` + recordColumns + `, ` + endPosition + ` AS position, true AS ended
		FROM event_deletions d JOIN event_versions v ON v.uid = d.uid AND v.seq < d.seq` + endsWhere +
		` AND ` + endPosition + ` > ` + bind(q.After) + `
		AND (d.first_seq > 0 OR v.revision = (SELECT max(l.revision) FROM event_versions l WHERE l.uid = d.uid AND l.seq < d.seq))
		ORDER BY d.seq, v.revision LIMIT ` + bind(limit) + `)`
	query := versions + ` UNION ALL ` + ends + ` ORDER BY position, revision LIMIT ` + bind(limit)
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []history.Change
	for rows.Next() {
		var c history.Change
		var position int64
		if c.Record, err = scanRecord(rows, &position, &c.Ended); err != nil {
			return nil, err
		}
		c.Position = position
		out = append(out, c)
	}
	return out, rows.Err()
}

// partition is one day's table.
type partition struct {
	name  string
	upper int64
	bytes int64
	rows  int64
}

// partitions lists the day partitions, oldest first.
func (s *Store) partitions(ctx context.Context) ([]partition, error) {
	if err := s.ensureSchema(ctx); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT c.relname, pg_total_relation_size(c.oid), greatest(c.reltuples, 0)::bigint
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
func (s *Store) Retain(ctx context.Context, cutoff time.Time, maxBytes int64, _ int) (int64, error) {
	parts, err := s.partitions(ctx)
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
		if err := s.pool.QueryRow(ctx, fmt.Sprintf(`SELECT count(*), coalesce(max(GREATEST(v.seq, coalesce(d.seq, 0))), 0)
			FROM %s v LEFT JOIN event_deletions d ON d.uid = v.uid`, pgx.Identifier{p.name}.Sanitize())).Scan(&rows, &newest); err != nil {
			return deleted, err
		}
		// The floor first: a crash between the two leaves it too high,
		// which costs a reader a relist, never a missed change.
		if _, err := s.pool.Exec(ctx, `UPDATE feed_head SET floor = GREATEST(floor, $1) WHERE id = 1`, newest); err != nil {
			return deleted, err
		}
		if _, err := s.pool.Exec(ctx, fmt.Sprintf(`DROP TABLE IF EXISTS %s`, pgx.Identifier{p.name}.Sanitize())); err != nil {
			return deleted, err
		}
		s.mu.Lock()
		s.days = map[int64]bool{}
		s.mu.Unlock()
		deleted += rows
		total -= p.bytes
	}
	if !cutoff.IsZero() {
		if _, err := s.pool.Exec(ctx, `WITH ended AS (DELETE FROM event_deletions WHERE deleted_at < $1 RETURNING seq)
			UPDATE feed_head SET floor = GREATEST(floor, (SELECT coalesce(max(seq), 0) FROM ended)) WHERE id = 1`, cutoff.UnixNano()); err != nil {
			return deleted, err
		}
	}
	return deleted, nil
}

// Stats reports the partitions' size and the planner's row estimate, which
// costs nothing at any size (an exact count reads every row).
func (s *Store) Stats(ctx context.Context) (history.Stats, error) {
	parts, err := s.partitions(ctx)
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
