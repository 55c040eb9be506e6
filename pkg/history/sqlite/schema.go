package sqlite

import (
	"context"
	"fmt"

	"github.com/eventapiserver/event-apiserver/pkg/history/sqlstore"
)

// schema is the file's history. Versions 1 to 4 came before the versioned
// core and are recorded in PRAGMA user_version only (version 1 files set
// none); their steps bring such a file up to 4, and the baseline (5, which
// adds history_schema) completes it. A new file takes the baseline at once.
// user_version stays in step, so that servers from before 5, which compare
// it with their own, refuse a newer file rather than write to it.
var schema = sqlstore.Schema{
	Before: []sqlstore.Migration{
		{Version: 2, About: "the unique key index, built once", SQL: `
CREATE UNIQUE INDEX IF NOT EXISTS versions_by_key ON versions (namespace, name, revision);
DROP INDEX IF EXISTS versions_by_name;
DROP INDEX IF EXISTS versions_by_observed;
`},
		// Existing rows keep position 0: they are in lists and a watch's
		// initial state, never in a watch's changes.
		{Version: 3, About: "the feed's positions", SQL: `
ALTER TABLE versions ADD COLUMN seq INTEGER NOT NULL DEFAULT 0;
ALTER TABLE deletions ADD COLUMN seq INTEGER NOT NULL DEFAULT 0;
`},
		// first_seq is an end's first position, seq its last. Ends stored
		// before have 0, one position: their change stays the one on the
		// Event's latest version.
		{Version: 4, About: "an end's block of feed positions", SQL: `
ALTER TABLE deletions ADD COLUMN first_seq INTEGER NOT NULL DEFAULT 0;
`},
	},
	// A version 1 file keeps its primary key on (revision, uid) (SQLite
	// cannot drop one without copying the table): such a file pays for
	// that index on insert, and nothing else differs.
	Baseline: sqlstore.Migration{Version: 5, About: "the baseline, with its own version row", SQL: sqlstore.Baseline(spelling)},
	After: []sqlstore.Migration{
		{Version: 6, About: "the note column", SQL: `ALTER TABLE versions ADD COLUMN note TEXT;`},
		// '' is the server's own cluster (history.ColumnCluster), what
		// every version stored before a fleet was.
		{Version: 7, About: "the cluster column", SQL: `ALTER TABLE versions ADD COLUMN cluster TEXT NOT NULL DEFAULT '';`},
		// sqlstore.Store.Count's covering index: a count reads a week of
		// versions from it alone, not the rows with their objects
		// (docs/benchmarks.md, "Counts over time").
		{Version: 8, About: "the counts' covering index", SQL: `CREATE INDEX IF NOT EXISTS versions_by_counted
			ON versions (last_seen, reason, type, regarding_kind, namespace, reporting_controller, regarding_name, cluster, seq);`},
		// The note's text search (searchSQL's doc). The versions stored so
		// far are indexed here, one pass over the table under the write
		// lock: capture waits for it once, at the first start of a server
		// with this version.
		{Version: 9, About: "the note's trigram index for text search", SQL: `
CREATE VIRTUAL TABLE IF NOT EXISTS versions_note_search USING fts5(note, tokenize='trigram', content='', contentless_delete=1);
INSERT INTO versions_note_search (rowid, note) SELECT rowid, note FROM versions WHERE note != '';
CREATE TRIGGER IF NOT EXISTS versions_note_searched AFTER INSERT ON versions WHEN new.note != '' BEGIN
	INSERT INTO versions_note_search (rowid, note) VALUES (new.rowid, new.note);
END;
CREATE TRIGGER IF NOT EXISTS versions_note_unsearched AFTER DELETE ON versions WHEN old.note != '' BEGIN
	DELETE FROM versions_note_search WHERE rowid = old.rowid;
END;
CREATE INDEX IF NOT EXISTS versions_by_null_note ON versions (note) WHERE note IS NULL;
`},
		{Version: 10, About: "the hourly counts", SQL: hourlySQL()},
		// sqlstore.AllNamespacesColumns' doc says why.
		{Version: 11, About: "the hourly counts of all namespaces", SQL: hourlyAllSQL()},
		// merge.go says why. The settings are kept in the index's own
		// config table, so they hold for every connection from now on; the
		// trigger gives way to Write's one statement (indexNotesAfter).
		{Version: 12, About: "the text search index, written once a batch and merged apart from it", SQL: fmt.Sprintf(`
INSERT INTO versions_note_search (versions_note_search, rank) VALUES ('automerge', 0);
INSERT INTO versions_note_search (versions_note_search, rank) VALUES ('crisismerge', %d);
DROP TRIGGER IF EXISTS versions_note_searched;
`, searchCrisisSegments)},
	},
}

// indexNotesAfter indexes the notes of the versions after a rowid, those a
// write stored. Once per write, not a trigger per row: FTS5 writes what it
// has gathered as a new segment of its index at every statement that
// changes it (its savepoint), and a trigger's statement was each
// multi-row INSERT, a segment per 8 versions (paramsPerInsert), which the
// index then had to merge (merge.go).
const indexNotesAfter = `INSERT INTO versions_note_search (rowid, note) SELECT rowid, note FROM versions WHERE note != '' AND rowid > ?`

// hourly and hourlyAll are the hourly counts and those of all namespaces.
var (
	hourly    = sqlstore.NewHourly(spelling, " WITHOUT ROWID")
	hourlyAll = sqlstore.NewHourlyAll(spelling, " WITHOUT ROWID")
)

// hourlySQL makes the hourly counts (sqlstore.Hourly), kept by triggers
// that fire only for the rows an INSERT OR IGNORE really inserts and a
// DELETE (retention's) really removes, and counts the versions stored so
// far: one pass over the table under the write lock, at the first start
// of a server with this version.
func hourlySQL() string {
	return hourly.Table + `CREATE TRIGGER IF NOT EXISTS versions_hourly_counted AFTER INSERT ON versions BEGIN
	` + hourly.Counted("new") + `
END;
CREATE TRIGGER IF NOT EXISTS versions_hourly_uncounted AFTER DELETE ON versions BEGIN
	` + hourly.Uncounted("old") + `
END;
` + hourly.Backfill
}

// hourlyAllSQL makes the hourly counts of all namespaces, kept by the
// hourly counts' triggers, made again to keep both tables (one trigger
// program a row, not two), and counted from the hourly counts: a pass over
// those, not over the versions.
func hourlyAllSQL() string {
	return hourlyAll.Table + `DROP TRIGGER IF EXISTS versions_hourly_counted;
CREATE TRIGGER versions_hourly_counted AFTER INSERT ON versions BEGIN
	` + hourly.Counted("new") + `
	` + hourlyAll.Counted("new") + `
END;
DROP TRIGGER IF EXISTS versions_hourly_uncounted;
CREATE TRIGGER versions_hourly_uncounted AFTER DELETE ON versions BEGIN
	` + hourly.Uncounted("old") + `
	` + hourlyAll.Uncounted("old") + `
END;
` + hourlyAll.Backfill
}

// Schema reads user_version, and where the file has it, history_schema.
func (d *dialect) Schema(ctx context.Context, tx sqlstore.Tx) (int, int, error) {
	var version int
	if err := tx.QueryRow(ctx, `PRAGMA user_version`).Scan(&version); err != nil {
		return 0, 0, err
	}
	if version == 0 {
		var tables int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'versions'`).Scan(&tables); err != nil {
			return 0, 0, err
		}
		// Version 1 wrote no user_version.
		return min(tables, 1), min(tables, 1), nil
	}
	if version < schema.Baseline.Version {
		return version, version, nil
	}
	var readableFrom int
	err := tx.QueryRow(ctx, `SELECT readable_from FROM history_schema WHERE id = 1`).Scan(&readableFrom)
	return version, readableFrom, err
}

func (d *dialect) Versioned(ctx context.Context, tx sqlstore.Tx, version int) error {
	// PRAGMA takes no parameter; the value is a number.
	return tx.Exec(ctx, fmt.Sprintf(`PRAGMA user_version = %d`, version))
}
