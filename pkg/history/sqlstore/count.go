package sqlstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/eventapiserver/event-apiserver/pkg/history"
)

var _ history.Counter = &Store{}

// Count answers a CountQuery in two statements over the same rows (both
// bounded by one feed position, so capture writing between them changes
// neither): the groups' totals with the whole count beside them, the Top
// largest kept, then those groups' versions counted per bucket. A bucket
// is last_seen (Unix nanoseconds, never negative) divided by the bucket's
// length: integer division floors in both databases, so no dialect needs
// a time function. Groups tied on their total are ordered by their values'
// bytes in both databases (Spelling.Bytewise), so both keep the same ones.
func (s *Store) Count(ctx context.Context, q history.CountQuery) (history.Counts, error) {
	var out history.Counts
	if len(q.GroupBy) == 0 || q.Bucket <= 0 || q.Top <= 0 {
		return out, fmt.Errorf("a count needs a column to group by, a bucket and a number of groups")
	}
	for _, col := range q.GroupBy {
		def, ok := history.LookupColumn(col)
		if !ok {
			return out, unknownColumn(col)
		}
		if def.Added {
			return out, fmt.Errorf("cannot group by %s: versions stored before it was added have no value there", col)
		}
	}
	feed, err := s.Feed(ctx)
	if err != nil {
		return out, err
	}
	q.Through = feed.Position
	q.After = nil

	var groups, ordered []string
	for _, col := range q.GroupBy {
		groups = append(groups, "v."+string(col))
		ordered = append(ordered, "v."+string(col)+s.sp.Bytewise)
	}
	var args []any
	bind := s.sp.bind(&args)
	w, err := where(q.Query, bind)
	if err != nil {
		return out, err
	}
	// The window function runs after GROUP BY and before LIMIT: the sum of
	// every group's count, which is the whole count.
	totals := `SELECT ` + strings.Join(groups, ", ") + `, count(*) AS n, CAST(sum(count(*)) OVER () AS BIGINT)
		FROM ` + s.sp.Versions + ` v` + w + ` GROUP BY ` + strings.Join(groups, ", ") +
		` ORDER BY n DESC, ` + strings.Join(ordered, ", ") + ` LIMIT ` + bind(q.Top)
	out.Groups, err = read(ctx, s, func() (string, []any, error) { return totals, args, nil }, func(rows Rows) (history.GroupCount, error) {
		g := history.GroupCount{Values: make([]string, len(q.GroupBy)), Buckets: map[time.Time]int64{}}
		dest := make([]any, 0, len(q.GroupBy)+2)
		for i := range g.Values {
			dest = append(dest, &g.Values[i])
		}
		return g, rows.Scan(append(dest, &g.Total, &out.Total)...)
	})
	if err != nil || len(out.Groups) == 0 {
		return out, err
	}

	// Placeholders are bound in the order they appear: SQLite's ? are.
	args = nil
	bucket := bind(q.Bucket.Nanoseconds())
	w, err = where(q.Query, bind)
	if err != nil {
		return out, err
	}
	if w == "" {
		w = " WHERE true"
	}
	index := make(map[string]int, len(out.Groups))
	var chosen []string
	for i, g := range out.Groups {
		index[strings.Join(g.Values, "\x00")] = i
		var parts []string
		for j, col := range groups {
			parts = append(parts, col+" = "+bind(g.Values[j]))
		}
		chosen = append(chosen, "("+strings.Join(parts, " AND ")+")")
	}
	series := `SELECT v.last_seen / ` + bucket + `, ` + strings.Join(groups, ", ") + `, count(*)
		FROM ` + s.sp.Versions + ` v` + w + ` AND (` + strings.Join(chosen, " OR ") + `) GROUP BY ` +
		strings.Join(positions(len(groups)+1), ", ")
	type cell struct {
		bucket int64
		group  int
		n      int64
	}
	cells, err := read(ctx, s, func() (string, []any, error) { return series, args, nil }, func(rows Rows) (cell, error) {
		var c cell
		values := make([]string, len(groups))
		dest := []any{&c.bucket}
		for i := range values {
			dest = append(dest, &values[i])
		}
		if err := rows.Scan(append(dest, &c.n)...); err != nil {
			return c, err
		}
		var ok bool
		if c.group, ok = index[strings.Join(values, "\x00")]; !ok {
			return c, fmt.Errorf("count returned a group it was not asked for: %q", values)
		}
		return c, nil
	})
	if err != nil {
		return out, err
	}
	for _, c := range cells {
		start := time.Unix(0, c.bucket*q.Bucket.Nanoseconds()).UTC()
		out.Groups[c.group].Buckets[start] += c.n
	}
	return out, nil
}

// positions numbers the first n result columns, for GROUP BY: PostgreSQL
// does not match a GROUP BY expression with a parameter to the same
// expression in the select list, positions it does.
func positions(n int) []string {
	p := make([]string, n)
	for i := range p {
		p[i] = fmt.Sprint(i + 1)
	}
	return p
}
