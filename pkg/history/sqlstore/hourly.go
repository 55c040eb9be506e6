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

// hourNanos is an hour in last_seen's unit.
const hourNanos = int64(time.Hour)

// Hourly is the SQL of the hourly counts in sp's database: a row per hour
// of LastSeen (last_seen / an hour, as Count's buckets floor) and values
// of HourlyColumns, with how many versions have them. Database triggers
// keep it, in the transaction that inserts or deletes a version: a version
// an INSERT leaves out (a replay: OR IGNORE, ON CONFLICT DO NOTHING) fires
// no trigger, so only rows really stored are counted, by every writer
// (capture, a fleet's members, an older server, an operator's DELETE) with
// no code of its own to keep in step. What a trigger costs a write is one
// upsert of a row that the head's lock already serializes (Store.Write).
type Hourly struct {
	// Table creates the table, keyed by hour first: a count reads a range
	// of hours.
	Table string
	// Backfill counts the versions stored before the table, in the
	// migration that makes it and its triggers (under the write lock).
	Backfill string
}

// HourlyCounted is the trigger statement that counts the version row (new, or
// NEW) in its hour.
func HourlyCounted(sp Spelling, row string) string {
	values := []string{row + ".last_seen / " + fmt.Sprint(hourNanos)}
	for _, c := range HourlyColumns {
		values = append(values, row+"."+string(c))
	}
	return `INSERT INTO ` + sp.Hourly + ` (` + strings.Join(hourlyKey(), ", ") + `, n) VALUES (` + strings.Join(values, ", ") +
		`, 1) ON CONFLICT (` + strings.Join(hourlyKey(), ", ") + `) DO UPDATE SET n = ` + sp.Hourly + `.n + 1;`
}

// HourlyUncounted are the trigger statements that take the version row (old, or
// OLD) from its hour, dropping an hour's row that counts none.
func HourlyUncounted(sp Spelling, row string) string {
	match := []string{"hour = " + row + ".last_seen / " + fmt.Sprint(hourNanos)}
	for _, c := range HourlyColumns {
		match = append(match, string(c)+" = "+row+"."+string(c))
	}
	key := strings.Join(match, " AND ")
	return `UPDATE ` + sp.Hourly + ` SET n = n - 1 WHERE ` + key + `;
	DELETE FROM ` + sp.Hourly + ` WHERE ` + key + ` AND n <= 0;`
}

func hourlyKey() []string {
	key := []string{"hour"}
	for _, c := range HourlyColumns {
		key = append(key, string(c))
	}
	return key
}

// NewHourly spells the hourly counts for sp; tail closes the table's
// definition (SQLite's WITHOUT ROWID: the key is the row).
func NewHourly(sp Spelling, tail string) Hourly {
	var b strings.Builder
	fmt.Fprintf(&b, "CREATE TABLE IF NOT EXISTS %s (\n\thour %s NOT NULL,\n", sp.Hourly, sp.Int)
	for _, c := range HourlyColumns {
		fmt.Fprintf(&b, "\t%s %s NOT NULL,\n", c, sp.Text)
	}
	fmt.Fprintf(&b, "\tn %s NOT NULL,\n\tPRIMARY KEY (%s)\n)%s;\n", sp.Int, strings.Join(hourlyKey(), ", "), tail)
	dims := make([]string, 0, len(HourlyColumns))
	for _, c := range HourlyColumns {
		dims = append(dims, string(c))
	}
	backfill := fmt.Sprintf("INSERT INTO %s (%s, n) SELECT last_seen / %d, %s, count(*) FROM %s GROUP BY %s;\n",
		sp.Hourly, strings.Join(hourlyKey(), ", "), hourNanos, strings.Join(dims, ", "), sp.Versions,
		strings.Join(positions(len(HourlyColumns)+1), ", "))
	return Hourly{Table: b.String(), Backfill: backfill}
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

// ceilHour and floorHour are the hours (since the epoch) a window's bounds
// round to, inward; last_seen is never negative.
func ceilHour(t time.Time) int64 { return (t.UnixNano() + hourNanos - 1) / hourNanos }

func floorHour(t time.Time) int64 { return t.UnixNano() / hourNanos }
