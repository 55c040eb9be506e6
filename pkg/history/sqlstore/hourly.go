package sqlstore

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/eventapiserver/event-apiserver/pkg/history"
)

// HourlyColumns are the dimensions of the hourly counts (Spelling.Hourly):
// the columns a count may group by but the regarding name, whose values
// are as many as the versions' (a count by it reads the versions), and the
// cluster. A count whose groups and conditions are on these alone reads
// the hours the window covers whole from the hourly counts.
var HourlyColumns = []history.Column{history.ColumnCluster, history.ColumnNamespace, history.ColumnReason,
	history.ColumnType, history.ColumnRegardingKind, history.ColumnReportingController}

// AllNamespacesColumns are the dimensions of the hourly counts of all
// namespaces (Spelling.HourlyAll): HourlyColumns but the namespace. A
// cluster's Events spread over many namespaces, so an hour holds a row of
// the hourly counts per namespace and reason (and type, ...), and a count
// across namespaces read and summed them all: at 10^6 versions of
// BenchHistory, in 1000 namespaces, some 1000 rows an hour for 3000
// versions, 165,000 a week, most of the count's time going to SQLite's
// sort of them by hour and reason (docs/benchmarks.md, "Counts over
// time"). Without the namespace the same week is 226 rows.
var AllNamespacesColumns = slices.DeleteFunc(slices.Clone(HourlyColumns), func(c history.Column) bool { return c == history.ColumnNamespace })

// hourNanos is an hour in last_seen's unit.
const hourNanos = int64(time.Hour)

// Hourly is the SQL of a table of hourly counts in sp's database: a row per
// hour of LastSeen (last_seen / an hour, as Count's buckets floor) and
// values of its columns (HourlyColumns, or AllNamespacesColumns), with how
// many versions have them. Database triggers keep it, in the transaction
// that inserts or deletes a version: a version an INSERT leaves out (a
// replay: OR IGNORE, ON CONFLICT DO NOTHING) fires no trigger, so only rows
// really stored are counted, by every writer (capture, a fleet's members,
// an older server, an operator's DELETE) with no code of its own to keep in
// step. What a trigger costs a write is one upsert per table of a row that
// the head's lock already serializes (Store.Write).
type Hourly struct {
	// Table creates the table, keyed by hour first: a count reads a range
	// of hours.
	Table string
	// Backfill counts the versions stored before the table, in the
	// migration that makes it and its triggers (under the write lock).
	Backfill string
	// Counted is the trigger statement that counts the version row (new,
	// or NEW) in its hour; Uncounted are those that take the version row
	// (old, or OLD) from its hour, dropping an hour's row that counts
	// none.
	Counted, Uncounted func(row string) string
}

// NewHourly spells the hourly counts (Spelling.Hourly, HourlyColumns) for
// sp; tail closes the table's definition (SQLite's WITHOUT ROWID: the key
// is the row). Its backfill counts the versions.
func NewHourly(sp Spelling, tail string) Hourly {
	h := newHourly(sp, sp.Hourly, HourlyColumns, tail)
	h.Backfill = fmt.Sprintf("INSERT INTO %s (%s, n) SELECT last_seen / %d, %s, count(*) FROM %s GROUP BY %s;\n",
		sp.Hourly, strings.Join(hourlyKey(HourlyColumns), ", "), hourNanos, strings.Join(columnNames(HourlyColumns), ", "), sp.Versions,
		strings.Join(positions(len(HourlyColumns)+1), ", "))
	return h
}

// NewHourlyAll spells the hourly counts of all namespaces
// (Spelling.HourlyAll, AllNamespacesColumns) for sp, as NewHourly. Its
// backfill sums the hourly counts (NewHourly's, made and counted first)
// over the namespaces: a pass over those rather than over the versions.
func NewHourlyAll(sp Spelling, tail string) Hourly {
	h := newHourly(sp, sp.HourlyAll, AllNamespacesColumns, tail)
	dims := strings.Join(columnNames(AllNamespacesColumns), ", ")
	h.Backfill = fmt.Sprintf("INSERT INTO %s (hour, %s, n) SELECT hour, %s, CAST(sum(n) AS %s) FROM %s GROUP BY %s;\n",
		sp.HourlyAll, dims, dims, sp.Int, sp.Hourly, strings.Join(positions(len(AllNamespacesColumns)+1), ", "))
	return h
}

func newHourly(sp Spelling, table string, columns []history.Column, tail string) Hourly {
	key := hourlyKey(columns)
	var b strings.Builder
	fmt.Fprintf(&b, "CREATE TABLE IF NOT EXISTS %s (\n\thour %s NOT NULL,\n", table, sp.Int)
	for _, c := range columns {
		fmt.Fprintf(&b, "\t%s %s NOT NULL,\n", c, sp.Text)
	}
	fmt.Fprintf(&b, "\tn %s NOT NULL,\n\tPRIMARY KEY (%s)\n)%s;\n", sp.Int, strings.Join(key, ", "), tail)
	return Hourly{
		Table: b.String(),
		Counted: func(row string) string {
			values := []string{row + ".last_seen / " + fmt.Sprint(hourNanos)}
			for _, c := range columns {
				values = append(values, row+"."+string(c))
			}
			return `INSERT INTO ` + table + ` (` + strings.Join(key, ", ") + `, n) VALUES (` + strings.Join(values, ", ") +
				`, 1) ON CONFLICT (` + strings.Join(key, ", ") + `) DO UPDATE SET n = ` + table + `.n + 1;`
		},
		Uncounted: func(row string) string {
			match := []string{"hour = " + row + ".last_seen / " + fmt.Sprint(hourNanos)}
			for _, c := range columns {
				match = append(match, string(c)+" = "+row+"."+string(c))
			}
			where := strings.Join(match, " AND ")
			return `UPDATE ` + table + ` SET n = n - 1 WHERE ` + where + `;
	DELETE FROM ` + table + ` WHERE ` + where + ` AND n <= 0;`
		},
	}
}

func hourlyKey(columns []history.Column) []string {
	return append([]string{"hour"}, columnNames(columns)...)
}

func columnNames(columns []history.Column) []string {
	n := make([]string, len(columns))
	for i, c := range columns {
		n[i] = string(c)
	}
	return n
}

// hourly reports whether the hourly counts answer q's full hours: its
// groups and conditions are on HourlyColumns alone, none a text search, and
// its buckets are whole hours.
func hourly(q history.CountQuery) bool {
	if q.Bucket%time.Hour != 0 {
		return false
	}
	for _, col := range q.GroupBy {
		if !slices.Contains(HourlyColumns, col) {
			return false
		}
	}
	for _, c := range q.Conditions {
		if c.Contains {
			return false
		}
		for _, col := range c.Columns {
			if !slices.Contains(HourlyColumns, col) {
				return false
			}
		}
	}
	return true
}

// allNamespaces reports whether the hourly counts of all namespaces answer
// q where the hourly counts do (hourly): neither its groups nor its
// conditions name the namespace.
func allNamespaces(q history.CountQuery) bool {
	if slices.Contains(q.GroupBy, history.ColumnNamespace) {
		return false
	}
	for _, c := range q.Conditions {
		if slices.Contains(c.Columns, history.ColumnNamespace) {
			return false
		}
	}
	return true
}

// ceilHour and floorHour are the hours (since the epoch) a window's bounds
// round to, inward; last_seen is never negative.
func ceilHour(t time.Time) int64 { return (t.UnixNano() + hourNanos - 1) / hourNanos }

func floorHour(t time.Time) int64 { return t.UnixNano() / hourNanos }
