package history

import (
	"context"
	"time"
)

// CountQuery counts the versions a Query's Conditions and window select,
// by group (the values of GroupBy's columns) and by time bucket (LastSeen
// floored to a multiple of Bucket since the Unix epoch, so that hourly
// buckets start on the hour and daily ones at midnight UTC, as Prometheus
// aligns a range query's steps). Only Conditions, Since, Until and Through
// of Query are read. A text search (Condition.Contains) counts the versions
// whose column holds the term: a version stored before the column was
// added (NULL there) is not counted, as a count reads no Event to match.
type CountQuery struct {
	Query
	// GroupBy names one or two columns; none may be NullBefore (a version stored
	// before an Added column has no value there to group by).
	GroupBy []Column
	Bucket  time.Duration
	// Top is how many groups, the largest first, get their buckets.
	Top int
}

// GroupCount is one group of a Count: its values, one per GroupBy column,
// how many versions it has, and how many in each bucket that has any,
// keyed by the bucket's start.
type GroupCount struct {
	Values  []string
	Total   int64
	Buckets map[time.Time]int64
}

// Counts is a Count's answer: Total versions matched, and the Top groups
// by their totals, descending (ties by values, ascending).
type Counts struct {
	Total  int64
	Groups []GroupCount
}

// Counter is a store that counts versions with the database's GROUP BY,
// without returning them.
type Counter interface {
	Count(ctx context.Context, query CountQuery) (Counts, error)
}
