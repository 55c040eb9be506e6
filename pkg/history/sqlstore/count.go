package sqlstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/eventapiserver/event-apiserver/pkg/history"
)

var _ history.Counter = &Store{}

// OnePassCells bounds the (bucket, group) counts Count reads in its one
// pass: a week of hours by a few dozen reasons is some thousands; grouping
// by regarding name can be a row per version, and then the top groups are
// found first (twoPass). A variable only so that storetest can take
// both paths on its small histories.
var OnePassCells = 20000

// Count reads the window once, counting versions per bucket and group,
// and picks the Top groups from those counts, when there are at most
// OnePassCells of them; otherwise it counts in two passes (twoPass). Both
// read from the counts' covering index where the condition's columns are
// in it (the migrations "the counts' covering index"), never the rows
// with their objects, and are bounded by one feed position, so capture
// writing meanwhile changes neither pass. A bucket is last_seen (Unix
// nanoseconds, never negative) divided by the bucket's length: integer
// division floors in both databases, so no dialect needs a time function.
// Groups tied on their total are ordered by their values' bytes, as Go
// compares strings (Spelling.Bytewise in SQL), so both databases keep the
// same ones.
func (s *Store) Count(ctx context.Context, q history.CountQuery) (history.Counts, error) {
	if len(q.GroupBy) == 0 || q.Bucket <= 0 || q.Top <= 0 {
		return history.Counts{}, fmt.Errorf("a count needs a column to group by, a bucket and a number of groups")
	}
	for _, col := range q.GroupBy {
		def, ok := history.LookupColumn(col)
		if !ok {
			return history.Counts{}, unknownColumn(col)
		}
		if def.NullBefore() {
			return history.Counts{}, fmt.Errorf("cannot group by %s: versions stored before it was added have no value there", col)
		}
	}
	feed, err := s.Feed(ctx)
	if err != nil {
		return history.Counts{}, err
	}
	q.Through = feed.Position
	q.After = nil
	var groups []string
	for _, col := range q.GroupBy {
		groups = append(groups, "v."+string(col))
	}

	cells, err := s.countCells(ctx, q, groups, "", OnePassCells+1)
	if err != nil || len(cells) > OnePassCells {
		if err == nil {
			return s.twoPass(ctx, q, groups)
		}
		return history.Counts{}, err
	}
	var out history.Counts
	byValues := map[string]*history.GroupCount{}
	for _, c := range cells {
		key := strings.Join(c.values, "\x00")
		g := byValues[key]
		if g == nil {
			g = &history.GroupCount{Values: c.values, Buckets: map[time.Time]int64{}}
			byValues[key] = g
		}
		g.Total += c.n
		g.Buckets[c.start] += c.n
		out.Total += c.n
	}
	for _, g := range byValues {
		out.Groups = append(out.Groups, *g)
	}
	slices.SortFunc(out.Groups, func(a, b history.GroupCount) int {
		return cmp.Or(cmp.Compare(b.Total, a.Total), slices.Compare(a.Values, b.Values))
	})
	out.Groups = out.Groups[:min(q.Top, len(out.Groups))]
	return out, nil
}

// cell is the count of one group in one bucket.
type cell struct {
	start  time.Time
	values []string
	n      int64
}

// countCells counts q's versions per bucket and group, at most limit
// cells (0: all), the groups restricted by and, a condition bound through bind
// (which countCells' own binding continues).
func (s *Store) countCells(ctx context.Context, q history.CountQuery, groups []string, and string, limit int, andArgs ...any) ([]cell, error) {
	// Placeholders are bound in the order they appear: SQLite's ? are.
	var args []any
	bind := s.sp.bind(&args)
	bucket := bind(q.Bucket.Nanoseconds())
	w, err := where(q.Query, s.sp, bind)
	if err != nil {
		return nil, err
	}
	if and != "" {
		if w == "" {
			w = " WHERE true"
		}
		w += " AND (" + s.renumber(and, len(args)) + ")"
		args = append(args, andArgs...)
	}
	query := `SELECT v.last_seen / ` + bucket + `, ` + strings.Join(groups, ", ") + `, count(*)
		FROM ` + s.sp.Versions + ` v` + w + ` GROUP BY ` + strings.Join(positions(len(groups)+1), ", ")
	if limit > 0 {
		query += ` LIMIT ` + bind(limit)
	}
	return read(ctx, s, func() (string, []any, error) { return query, args, nil }, func(rows Rows) (cell, error) {
		var c cell
		var b int64
		c.values = make([]string, len(groups))
		dest := []any{&b}
		for i := range c.values {
			dest = append(dest, &c.values[i])
		}
		err := rows.Scan(append(dest, &c.n)...)
		c.start = time.Unix(0, b*q.Bucket.Nanoseconds()).UTC()
		return c, err
	})
}

// renumber spells a condition written with ? for the dialect, its
// parameters following n already bound.
func (s *Store) renumber(condition string, n int) string {
	var b strings.Builder
	for i, part := range strings.Split(condition, "?") {
		if i > 0 {
			b.WriteString(s.sp.Placeholder(n + i))
		}
		b.WriteString(part)
	}
	return b.String()
}

// twoPass counts in two statements: the groups' totals with the whole
// count beside them (a window function, which runs after GROUP BY and
// before LIMIT), the Top largest kept, then those groups' versions per
// bucket.
func (s *Store) twoPass(ctx context.Context, q history.CountQuery, groups []string) (history.Counts, error) {
	var out history.Counts
	var ordered []string
	for _, g := range groups {
		ordered = append(ordered, g+s.sp.Bytewise)
	}
	var args []any
	bind := s.sp.bind(&args)
	w, err := where(q.Query, s.sp, bind)
	if err != nil {
		return out, err
	}
	totals := `SELECT ` + strings.Join(groups, ", ") + `, count(*) AS n, CAST(sum(count(*)) OVER () AS BIGINT)
		FROM ` + s.sp.Versions + ` v` + w + ` GROUP BY ` + strings.Join(groups, ", ") +
		` ORDER BY n DESC, ` + strings.Join(ordered, ", ") + ` LIMIT ` + bind(q.Top)
	out.Groups, err = read(ctx, s, func() (string, []any, error) { return totals, args, nil }, func(rows Rows) (history.GroupCount, error) {
		g := history.GroupCount{Values: make([]string, len(groups)), Buckets: map[time.Time]int64{}}
		dest := make([]any, 0, len(groups)+2)
		for i := range g.Values {
			dest = append(dest, &g.Values[i])
		}
		return g, rows.Scan(append(dest, &g.Total, &out.Total)...)
	})
	if err != nil || len(out.Groups) == 0 {
		return out, err
	}
	index := make(map[string]int, len(out.Groups))
	var chosen []string
	var chosenArgs []any
	for i, g := range out.Groups {
		index[strings.Join(g.Values, "\x00")] = i
		var parts []string
		for j, col := range groups {
			parts = append(parts, col+" = ?")
			chosenArgs = append(chosenArgs, g.Values[j])
		}
		chosen = append(chosen, "("+strings.Join(parts, " AND ")+")")
	}
	// Top groups by the window's buckets: the caller bounds both
	// (registry/history's maxTop and maxBuckets).
	cells, err := s.countCells(ctx, q, groups, strings.Join(chosen, " OR "), 0, chosenArgs...)
	if err != nil {
		return out, err
	}
	for _, c := range cells {
		i, ok := index[strings.Join(c.values, "\x00")]
		if !ok {
			return out, fmt.Errorf("count returned a group it was not asked for: %q", c.values)
		}
		out.Groups[i].Buckets[c.start] += c.n
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
