package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/eventapiserver/event-apiserver/pkg/apis/core"
	"github.com/eventapiserver/event-apiserver/pkg/history"
	"github.com/eventapiserver/event-apiserver/pkg/history/storetest"
)

// fillWrite writes h into s the way capture does: through Write, every index
// in place, in batches of batchSize.
func fillWrite(ctx context.Context, s *Store, h storetest.BenchHistory, source string, batchSize int) error {
	if err := h.Generate(batchSize, func(b history.Batch) error { return s.Write(ctx, b) }); err != nil {
		return err
	}
	return s.Write(ctx, history.Batch{Source: source, Revision: int64(h.Rows)})
}

// fillBulk writes h into a new store at path as capture would have left it
// (through Write, so the same rows, row counter and deletions; the server's
// own schema and indexes), at a bulk load's speed: the secondary indexes
// but the uid's, which Write itself reads, and the triggers (the hourly
// counts) are dropped while the rows go in, in key order, in large batches
// with no journal and no fsync; then each index is built again with CREATE
// INDEX, which sorts it once instead of inserting 10^7 keys at random
// places of eight B-trees through the writer's page cache, the hourly
// counts by their migrations' own backfills, and the triggers made again.
// The text search is written by Write itself, a segment a batch, and
// merged until the store's merger would find nothing left to merge. The
// file is back in WAL mode when it returns; the progress row, written
// last, says it is complete. A fill that stops half way leaves a file with
// no journal to recover: it is refused, not reused.
func fillBulk(ctx context.Context, path string, h storetest.BenchHistory, source string, logf func(string, ...any)) error {
	s, err := Open(path)
	if err != nil {
		return err
	}
	defer s.Close()
	// The fill merges the text search once, at its end; the merger's steps
	// between its batches would also come between the pragmas that take
	// the file back to WAL mode, and leave it locked exclusively.
	s.merge.close()
	var rows int64
	if err := s.db.QueryRowContext(ctx, `SELECT value FROM counters WHERE name = 'versions'`).Scan(&rows); err != nil {
		return err
	}
	if rows != 0 {
		return fmt.Errorf("%s already holds %d versions, not from a complete fill: remove it", path, rows)
	}
	indexes, err := schemaObjects(ctx, s.db, "index")
	if err != nil {
		return err
	}
	// Write reads this one: each batch's deletions count their Event's
	// versions by uid (sqlstore's versionCounts), 1000 uids a statement.
	// Without it each such count scans the whole table, which made the
	// fill quadratic: 6 min 23 s of rows at 10^6, and days at 10^7.
	delete(indexes, "versions_by_uid")
	for name := range indexes {
		if _, err := s.db.ExecContext(ctx, `DROP INDEX `+name); err != nil {
			return err
		}
	}
	triggers, err := schemaObjects(ctx, s.db, "trigger")
	if err != nil {
		return err
	}
	for name := range triggers {
		if _, err := s.db.ExecContext(ctx, `DROP TRIGGER `+name); err != nil {
			return err
		}
	}
	// s.db is one connection (and s.read has none yet), so these hold for
	// every write below and the journal mode can change.
	if err := pragma(ctx, s.db, "journal_mode = OFF", "off"); err != nil {
		return err
	}
	// An exclusive lock keeps the page cache between transactions, which
	// SQLite otherwise drops (and frees page by page) when it unlocks.
	if err := pragma(ctx, s.db, "locking_mode = EXCLUSIVE", "exclusive"); err != nil {
		return err
	}
	for _, p := range []string{"synchronous = OFF", "cache_size = -1048576"} {
		if _, err := s.db.ExecContext(ctx, "PRAGMA "+p); err != nil {
			return err
		}
	}
	// FTS5 writes its pending trigrams out as a new segment whenever they
	// pass hashsize (1 MiB by default): a batch's notes go out as one
	// segment instead. The setting is stored in the text search's config
	// table, where capture's own store has none: removed again after the
	// fill, with FTS5's default in force.
	if _, err := s.db.ExecContext(ctx, `INSERT INTO versions_note_search (versions_note_search, rank) VALUES ('hashsize', 268435456)`); err != nil {
		return err
	}
	start := time.Now()
	written := 0
	err = h.Generate(50000, func(b history.Batch) error {
		if err := s.Write(ctx, b); err != nil {
			return err
		}
		written += len(b.Versions)
		if written%(h.Rows/10+1) < len(b.Versions) {
			logf("%d versions inserted in %v", written, time.Since(start).Round(time.Second))
		}
		return nil
	})
	if err != nil {
		return err
	}
	logf("%d versions inserted in %v; building %d indexes", h.Rows, time.Since(start).Round(time.Second), len(indexes))
	indexStart := time.Now()
	for _, create := range indexes {
		if _, err := s.db.ExecContext(ctx, create); err != nil {
			return err
		}
	}
	for {
		merged, err := s.merge.step(ctx)
		if err != nil {
			return err
		}
		if !merged {
			break
		}
	}
	for _, backfill := range []string{
		`INSERT INTO versions_note_search (versions_note_search, rank) VALUES ('hashsize', 1048576)`,
		`DELETE FROM versions_note_search_config WHERE k = 'hashsize'`,
		hourly.Backfill,
		hourlyAll.Backfill,
	} {
		if _, err := s.db.ExecContext(ctx, backfill); err != nil {
			return err
		}
	}
	for _, create := range triggers {
		if _, err := s.db.ExecContext(ctx, create); err != nil {
			return err
		}
	}
	logf("indexes, text search and hourly counts built in %v", time.Since(indexStart).Round(time.Second))
	if err := s.Write(ctx, history.Batch{Source: source, Revision: int64(h.Rows)}); err != nil {
		return err
	}
	if _, err := s.db.ExecContext(ctx, "PRAGMA synchronous = NORMAL"); err != nil {
		return err
	}
	if err := pragma(ctx, s.db, "journal_mode = WAL", "wal"); err != nil {
		return err
	}
	if err := pragma(ctx, s.db, "locking_mode = NORMAL", "normal"); err != nil {
		return err
	}
	logf("filled %s in %v", path, time.Since(start).Round(time.Second))
	return s.Close()
}

// schemaObjects are the schema's objects of a type that a statement made
// (an index of a key has none), each by name with that statement.
func schemaObjects(ctx context.Context, db *sql.DB, kind string) (map[string]string, error) {
	rows, err := db.QueryContext(ctx, `SELECT name, sql FROM sqlite_master WHERE type = ? AND sql IS NOT NULL`, kind)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	indexes := map[string]string{}
	for rows.Next() {
		var name, create string
		if err := rows.Scan(&name, &create); err != nil {
			return nil, err
		}
		indexes[name] = create
	}
	return indexes, rows.Err()
}

// pragma sets a pragma that answers with its new value, and checks it.
func pragma(ctx context.Context, db *sql.DB, set, want string) error {
	var got string
	if err := db.QueryRowContext(ctx, "PRAGMA "+set).Scan(&got); err != nil {
		return err
	}
	if got != want {
		return fmt.Errorf("PRAGMA %s: still %q", set, got)
	}
	return nil
}

// verifyBenchDB checks a filled file as the server sees it: the row counter
// against count(*), the deletions, and for sample objects every selector of
// "one object's history" (through List, so through the indexes) against a
// scan of the whole table that reads no index, each scanned row's columns
// against its decoded Event.
func verifyBenchDB(ctx context.Context, s *Store, h storetest.BenchHistory, sample int, logf func(string, ...any)) error {
	start := time.Now()
	stats, err := s.Stats(ctx)
	if err != nil {
		return err
	}
	var count, deletions int64
	if err := s.read.QueryRowContext(ctx, `SELECT count(*) FROM versions`).Scan(&count); err != nil {
		return err
	}
	if err := s.read.QueryRowContext(ctx, `SELECT count(*) FROM deletions`).Scan(&deletions); err != nil {
		return err
	}
	var disagreeing int64
	for _, table := range []string{spelling.Hourly, spelling.HourlyAll} {
		var wrong int64
		if err := s.read.QueryRowContext(ctx, storetest.HourlyDisagreements(spelling.Versions, table)).Scan(&wrong); err != nil {
			return err
		}
		disagreeing += wrong
	}
	if stats.Rows != int64(h.Rows) || count != int64(h.Rows) || deletions != int64(h.Deletions()) || disagreeing != 0 {
		return fmt.Errorf("counter %d, count(*) %d, deletions %d, hours counted wrong %d: want %d versions and %d deletions, none wrong",
			stats.Rows, count, deletions, disagreeing, h.Rows, h.Deletions())
	}

	objects := make([]int, 0, sample)
	var names, uids []any
	for i := 0; i < sample; i++ {
		o := i * 7919 % h.Objects
		objects = append(objects, o)
		uids = append(uids, storetest.BenchObjectUID(o))
		names = append(names, fmt.Sprintf("pod-%d", o))
	}
	in := func(n int) string { return "(" + strings.TrimSuffix(strings.Repeat("?, ", n), ", ") + ")" }
	// The scan finds the Events; List reads their records by name, which
	// no selector below uses.
	scan := `SELECT DISTINCT name FROM versions NOT INDEXED WHERE regarding_uid IN ` + in(sample) +
		` OR related_uid IN ` + in(sample) + ` OR regarding_name IN ` + in(sample) + ` OR related_name IN ` + in(sample)
	rows, err := s.read.QueryContext(ctx, scan, append(append(append(append([]any{}, uids...), uids...), names...), names...)...)
	if err != nil {
		return err
	}
	var events []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			rows.Close()
			return err
		}
		events = append(events, name)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if len(events) == 0 {
		return fmt.Errorf("no Event of the %d sample objects", sample)
	}
	records, err := s.List(ctx, history.Query{Conditions: []history.Condition{{Columns: []history.Column{history.ColumnName}, Value: events[0], Values: events}}})
	if err != nil {
		return err
	}
	decoder := storetest.BenchDecoder()
	var scanned []history.Record
	for _, r := range records {
		obj, _, err := decoder.Decode(r.Object, nil, &core.Event{})
		if err != nil {
			return fmt.Errorf("version %d: %w", r.Revision, err)
		}
		want := history.NewVersion(obj.(*core.Event), r.Revision, r.Object, r.ObservedAt)
		want.LastSeen = want.LastSeen.UTC()
		if !reflect.DeepEqual(want, r.Version) {
			return fmt.Errorf("version %d: columns %+v disagree with its Event's %+v", r.Revision, r.Version, want)
		}
		scanned = append(scanned, r)
	}
	since := h.End.Add(-7 * 24 * time.Hour)
	queried := 0
	for _, o := range objects {
		uid, name := storetest.BenchObjectUID(o), fmt.Sprintf("pod-%d", o)
		for _, c := range []struct {
			selector   string
			conditions []history.Condition
		}{
			{"regarding.uid", []history.Condition{{Columns: []history.Column{history.ColumnRegardingUID}, Value: uid}}},
			{"related.uid", []history.Condition{{Columns: []history.Column{history.ColumnRelatedUID}, Value: uid}}},
			{"regardingOrRelated.uid", []history.Condition{{Columns: []history.Column{history.ColumnRegardingUID, history.ColumnRelatedUID}, Value: uid}}},
			{"regarding.name", []history.Condition{{Columns: []history.Column{history.ColumnRegardingName}, Value: name}}},
			{"regardingOrRelated.name", []history.Condition{{Columns: []history.Column{history.ColumnRegardingName, history.ColumnRelatedName}, Value: name}}},
			{"namespace and regarding.uid", []history.Condition{
				{Columns: []history.Column{history.ColumnNamespace}, Value: storetest.BenchNamespace(o)},
				{Columns: []history.Column{history.ColumnRegardingUID}, Value: uid}}},
		} {
			q := history.Query{Conditions: c.conditions, Since: since, Limit: 500}
			got, err := s.List(ctx, q)
			if err != nil {
				return err
			}
			var want []history.Record
			for _, r := range scanned {
				if matches(r.Version, c.conditions) && !r.LastSeen.Before(since) {
					want = append(want, r)
				}
			}
			sort.Slice(want, func(i, j int) bool {
				if !want[i].LastSeen.Equal(want[j].LastSeen) {
					return want[i].LastSeen.After(want[j].LastSeen)
				}
				return want[i].Revision > want[j].Revision
			})
			want = want[:min(len(want), q.Limit)]
			if !reflect.DeepEqual(got, want) {
				return fmt.Errorf("object %d, %s: List found %d versions, the scan %d (or they differ)", o, c.selector, len(got), len(want))
			}
			if c.selector == "regarding.uid" && len(got) == 0 {
				return fmt.Errorf("object %d has no version in the last week", o)
			}
			queried += len(got)
		}
	}
	logf("verified %s: %d versions counted, %d deletions, %d versions of %d objects scanned, %d found by 6 selectors agree, in %v",
		"the history", count, deletions, len(scanned), sample, queried, time.Since(start).Round(time.Second))
	return nil
}

// matches is Query.Where's condition, in Go.
func matches(v history.Version, conditions []history.Condition) bool {
	column := map[history.Column]string{
		history.ColumnNamespace: v.Namespace, history.ColumnRegardingUID: v.RegardingUID,
		history.ColumnRegardingName: v.RegardingName, history.ColumnRelatedUID: v.RelatedUID,
		history.ColumnRelatedName: v.RelatedName,
	}
	for _, c := range conditions {
		any := false
		for _, col := range c.Columns {
			value, ok := column[col]
			if !ok {
				panic("matches: no column " + col)
			}
			any = any || value == c.Value
		}
		if !any {
			return false
		}
	}
	return true
}
