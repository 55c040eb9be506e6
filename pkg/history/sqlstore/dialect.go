package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/eventapiserver/event-apiserver/pkg/history"
)

// Dialect is what one database does its own way: how it opens, locks,
// inserts many rows, counts and retains. Store does the rest with the
// statements in this package, spelled for the database by Spelling.
type Dialect interface {
	Spelling() Spelling
	// Read runs queries; in SQLite's WAL mode they never wait for a writer.
	Read() Queryer
	// Write runs fn in one transaction and commits it, first preparing
	// what versions need (PostgreSQL: their days' partitions). The feed's
	// lock is the database's: SQLite's one writer lock, held from BEGIN
	// IMMEDIATE; PostgreSQL's row lock on the head, taken by Store's first
	// statement (Spelling.LockHead).
	Write(ctx context.Context, versions []history.Version, fn func(Tx) error) error
	// Migrate runs fn in one transaction under a lock that keeps other
	// replicas (processes) from migrating at the same time; fn's first
	// statement waits for writes in flight and holds off new ones.
	Migrate(ctx context.Context, fn func(Tx) error) error
	// Schema reads the schema version the database holds (0: none
	// recorded, a new database or one of a server from before versions)
	// and the oldest version whose server still reads it correctly.
	Schema(ctx context.Context, tx Tx) (version, readableFrom int, err error)
	// Versioned records the version where the database's servers from
	// before history_schema look for it (SQLite's user_version).
	Versioned(ctx context.Context, tx Tx, version int) error
	// InsertIgnore inserts n rows of columns into table, leaving out any
	// whose key is stored already; row(i, args) appends row i's values.
	// It returns how many it inserted, or -1 where the database does not
	// say before the commit.
	InsertIgnore(ctx context.Context, tx Tx, table string, columns []string, n int, row func(i int, args []any) []any) (int64, error)
	// Counted learns that n versions were added (or removed, n < 0) in
	// tx, for databases that count them (SQLite: count(*) reads the whole
	// table).
	Counted(ctx context.Context, tx Tx, n int64) error
	// NotLive renders a condition that holds when v.uid is none of uids,
	// binding what it needs through bind.
	NotLive(ctx context.Context, tx Tx, uids []string, bind func(any) string) (string, error)
	// Retain and Stats are history.Store's.
	Retain(ctx context.Context, cutoff time.Time, maxBytes int64, batchSize int) (int64, error)
	Stats(ctx context.Context) (history.Stats, error)
	Close() error
}

// Queryer runs queries.
type Queryer interface {
	Query(ctx context.Context, query string, args ...any) (Rows, error)
	QueryRow(ctx context.Context, query string, args ...any) Row
}

// Tx is a transaction of Dialect.Write or Dialect.Migrate.
type Tx interface {
	Queryer
	// Exec runs a statement whose result nothing reads. The database may
	// send it with the next statement or the commit (PostgreSQL queues it
	// in one batch, one round trip), and report its error then.
	Exec(ctx context.Context, query string, args ...any) error
}

// Rows are a query's rows, as database/sql's and pgx's are.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close()
}

// Row is one row, as database/sql's and pgx's are.
type Row interface {
	Scan(dest ...any) error
}

// Spelling is how one database spells what this package's statements vary
// in: table names, functions, placeholders, types, and the parts of the
// first versioned schema (Baseline) that differ.
type Spelling struct {
	// The tables of versions, of Events' ends, of capture's progress
	// per source and of the feed's head and floor.
	Versions, Deletions, Progress, Feed string
	// Hourly is the table of the hourly counts (NewHourly), HourlyAll
	// that of the hourly counts of all namespaces (NewHourlyAll).
	Hourly, HourlyAll string
	// Placeholder is the n-th (from 1) parameter's placeholder.
	Placeholder func(n int) string
	// NoRows is the error a Row's Scan returns for no row.
	NoRows error
	// Greatest is the function returning the largest of its arguments:
	// SQLite's max, PostgreSQL's GREATEST.
	Greatest string
	// EndsJoin joins an end's versions to it in Changes: SQLite reads a
	// CROSS JOIN in the order written, which is the plan wanted
	// (TestChangesPlan); PostgreSQL plans a plain JOIN well.
	EndsJoin string
	// LockHead ends the statement that reads the feed's head (table f)
	// with the schema's version (table s) in Write: PostgreSQL's FOR
	// UPDATE OF f, the head's row alone (a migration locks the head, then
	// updates the schema's row); empty where the transaction holds the
	// lock.
	LockHead string
	// Bytewise follows a text column to order it by its bytes, as Go
	// compares strings, whatever the database's collation: PostgreSQL's
	// COLLATE "C"; empty where text already orders so (SQLite's BINARY).
	Bytewise string
	// Text, Int and Bytes are the column types for strings, int64 and
	// byte slices; ID the type of a one-row table's key.
	Text, Int, Bytes, ID string

	// VersionsKey closes the versions table's definition: its key, and
	// PostgreSQL's partitioning.
	VersionsKey string
	// KeyIndex names the index on (namespace, name, revision) that Get
	// reads (after the versions table's name and "_by_"); KeyUnique where
	// that is the versions' key, which makes writes idempotent.
	KeyIndex  string
	KeyUnique bool
	// PartialSparse indexes only the non-empty values of Sparse columns.
	PartialSparse bool
	// Upgrade brings the tables of a server from before versions to the
	// baseline's columns, before the indexes on them are made.
	Upgrade string
	// Extra is the rest of the database's baseline.
	Extra string
	// Contains renders a condition on the versions v that holds when
	// column (a Searchable one) holds term ignoring case, looked up in the
	// column's trigram index, or is NULL (a version stored before the
	// column was added), binding what it needs through bind.
	Contains func(column history.Column, term string, bind func(any) string) string
	// PageEnds, where set, is how a list reads the end positions of its
	// page at once (pageStatement): the condition that h.uid is one of the
	// uids subquery selects, read in one scan of each partition's key.
	// PostgreSQL's = ANY(ARRAY(subquery)) gives each partition's index
	// scan the whole array at once, where an IN is planned as a join that
	// probes every partition once per uid, as endPosition's count per row
	// does. Unset (SQLite), a list counts each record's by itself: its one
	// index by uid answers each count in one probe, and parsing and
	// planning the page's longer statement costs it more (a list of an
	// empty store: 1.4 ms against 0.35 ms).
	PageEnds func(subquery string) string
	// RowID, where set, is the column that finds a version's row by
	// itself (SQLite's rowid). A list then sorts and cuts the selected
	// versions' keys first and reads only its page's rows and ends by it
	// (listQuery). Unset, a list sorts whole records.
	RowID string
}

// bind returns a function that appends a value to args and returns its
// placeholder.
func (sp Spelling) bind(args *[]any) func(any) string {
	return func(v any) string {
		*args = append(*args, v)
		return sp.Placeholder(len(*args))
	}
}

// SQL adapts database/sql's pool or transaction to Queryer and Tx.
type SQL struct {
	DB interface {
		QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
		QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
		ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	}
}

func (s SQL) Query(ctx context.Context, query string, args ...any) (Rows, error) {
	rows, err := s.DB.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return sqlRows{rows}, nil
}

func (s SQL) QueryRow(ctx context.Context, query string, args ...any) Row {
	return s.DB.QueryRowContext(ctx, query, args...)
}

func (s SQL) Exec(ctx context.Context, query string, args ...any) error {
	_, err := s.DB.ExecContext(ctx, query, args...)
	return err
}

type sqlRows struct{ *sql.Rows }

func (r sqlRows) Close() { r.Rows.Close() }

// ErrUnknownColumn is returned for a condition on a column not in
// history.Columns.
var ErrUnknownColumn = errors.New("unknown history column")

// ErrBadSearch is returned for a text search the stores cannot answer from
// their index (search.Check).
var ErrBadSearch = errors.New("invalid text search")

func unknownColumn(c history.Column) error { return fmt.Errorf("%w %q", ErrUnknownColumn, c) }
