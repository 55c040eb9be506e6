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

// ReadHourly lets Count read the hourly counts (counted). A variable only
// so that the benchmarks can measure the same count without them.
var ReadHourly = true

// ReadHourlyAll lets Count read the hourly counts of all namespaces where
// they answer the query (counted). A variable only so that the benchmarks
// can measure the same count from the hourly counts by namespace.
var ReadHourlyAll = true

// Count reads the window once, counting versions per bucket and group,
// and picks the Top groups from those counts, when there are at most
// OnePassCells of them; otherwise it counts in two passes (twoPass). Both
// read the window's whole hours from the hourly counts where those answer
// the query (counted), and the rest from the counts' covering index where
// the condition's columns are in it (the migrations "the counts' covering
// index"), never the rows with their objects. The versions read are
// bounded by one feed position, so capture writing meanwhile changes
// neither pass's edges; the hourly counts are each statement's own
// snapshot, so under capture the two passes of a query may differ by the
// versions committed between them. A bucket is last_seen (Unix
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

	cells, err := s.countCells(ctx, q, nil, OnePassCells+1)
	if err != nil || len(cells) > OnePassCells {
		if err == nil {
			return s.twoPass(ctx, q)
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

// groupNames are the counted table's group columns, g0 and g1.
func groupNames(q history.CountQuery) []string {
	names := make([]string, len(q.GroupBy))
	for i := range names {
		names[i] = fmt.Sprint("g", i)
	}
	return names
}

// counted renders a table of q's counts, a row per bucket (b, the
// bucket's start divided by its length) and group (g0, g1) with its count
// (n), restricted by and (nil: not), a condition on the versions' columns
// through v. Where the hourly counts answer q (hourly), the hours the
// window covers whole are read from them (from those of all namespaces
// where neither q's groups nor its conditions name the namespace), and
// only its partial hours at either edge from the versions; the hourly
// counts are as of the statement, the versions' edges as of q.Through.
// Otherwise all of it is read from the versions.
func (s *Store) counted(q history.CountQuery, and func(bind func(any) string) string, bind func(any) string) (string, error) {
	// SQLite's ? are bound in the order they appear: each leg binds its
	// bucket's, then its conditions', then its extra terms' (after).
	leg := func(table, bucket, n string, sub history.Query, after func() []string) (string, error) {
		selected := []string{bucket + " AS b"}
		for i, col := range q.GroupBy {
			selected = append(selected, "v."+string(col)+" AS "+groupNames(q)[i])
		}
		w, err := where(sub, s.sp, bind)
		if err != nil {
			return "", err
		}
		var extra []string
		if after != nil {
			extra = after()
		}
		if and != nil {
			extra = append(extra, "("+and(bind)+")")
		}
		for _, term := range extra {
			if w == "" {
				w = " WHERE " + term
			} else {
				w += " AND " + term
			}
		}
		return `SELECT ` + strings.Join(selected, ", ") + `, ` + n + ` AS n FROM ` + table + ` v` + w +
			` GROUP BY ` + strings.Join(positions(len(q.GroupBy)+1), ", "), nil
	}
	// A text search keeps the versions stored before its column (NULL
	// there) for a list's reader to match on their Event; a count reads
	// none (history.CountQuery).
	var searched []string
	for _, c := range q.Conditions {
		if c.Contains {
			for _, col := range c.Columns {
				searched = append(searched, "v."+string(col)+" IS NOT NULL")
			}
		}
	}
	versions := func(sub history.Query) (string, error) {
		return leg(s.sp.Versions, "v.last_seen / "+bind(q.Bucket.Nanoseconds()), "count(*)", sub, func() []string { return searched })
	}
	var legs []string
	add := func(l string, err error) error {
		legs = append(legs, l)
		return err
	}
	var first, end *int64 // the whole hours [first, end) of the window
	if !q.Since.IsZero() {
		h := ceilHour(q.Since)
		first = &h
	}
	if !q.Until.IsZero() {
		h := floorHour(q.Until)
		end = &h
	}
	if !ReadHourly || !hourly(q) || first != nil && end != nil && *first >= *end {
		if err := add(versions(q.Query)); err != nil {
			return "", err
		}
	} else {
		if first != nil && q.Since.UnixNano() != *first*hourNanos {
			edge := q.Query
			edge.Until = time.Unix(0, *first*hourNanos)
			if err := add(versions(edge)); err != nil {
				return "", err
			}
		}
		hours := func() []string {
			var terms []string
			if first != nil {
				terms = append(terms, "v.hour >= "+bind(*first))
			}
			if end != nil {
				terms = append(terms, "v.hour < "+bind(*end))
			}
			return terms
		}
		bucket := "v.hour / " + bind(int64(q.Bucket/time.Hour))
		table := s.sp.Hourly
		if ReadHourlyAll && allNamespaces(q) {
			table = s.sp.HourlyAll
		}
		if err := add(leg(table, bucket, "CAST(sum(v.n) AS BIGINT)", history.Query{Conditions: q.Conditions}, hours)); err != nil {
			return "", err
		}
		if end != nil && q.Until.UnixNano() != *end*hourNanos {
			edge := q.Query
			edge.Since = time.Unix(0, *end*hourNanos)
			if err := add(versions(edge)); err != nil {
				return "", err
			}
		}
	}
	return "(" + strings.Join(legs, " UNION ALL ") + ") AS counted", nil
}

// countCells counts q's versions per bucket and group, at most limit
// cells (0: all), the groups restricted by and (counted).
func (s *Store) countCells(ctx context.Context, q history.CountQuery, and func(bind func(any) string) string, limit int) ([]cell, error) {
	return read(ctx, s, func() (string, []any, error) { return s.cellsQuery(q, and, limit) }, func(rows Rows) (cell, error) {
		var c cell
		var b int64
		c.values = make([]string, len(q.GroupBy))
		dest := []any{&b}
		for i := range c.values {
			dest = append(dest, &c.values[i])
		}
		err := rows.Scan(append(dest, &c.n)...)
		c.start = time.Unix(0, b*q.Bucket.Nanoseconds()).UTC()
		return c, err
	})
}

// cellsQuery is countCells' statement.
func (s *Store) cellsQuery(q history.CountQuery, and func(bind func(any) string) string, limit int) (string, []any, error) {
	var args []any
	bind := s.sp.bind(&args)
	from, err := s.counted(q, and, bind)
	if err != nil {
		return "", nil, err
	}
	keys := append([]string{"b"}, groupNames(q)...)
	query := `SELECT ` + strings.Join(keys, ", ") + `, CAST(sum(n) AS BIGINT) FROM ` + from + ` GROUP BY ` + strings.Join(keys, ", ")
	if limit > 0 {
		query += ` LIMIT ` + bind(limit)
	}
	return query, args, nil
}

// twoPass counts in two statements: the groups' totals with the whole
// count beside them (a window function, which runs after GROUP BY and
// before LIMIT), the Top largest kept, then those groups' versions per
// bucket.
func (s *Store) twoPass(ctx context.Context, q history.CountQuery) (history.Counts, error) {
	var out history.Counts
	groups := groupNames(q)
	var ordered []string
	for _, g := range groups {
		ordered = append(ordered, g+s.sp.Bytewise)
	}
	var args []any
	bind := s.sp.bind(&args)
	from, err := s.counted(q, nil, bind)
	if err != nil {
		return out, err
	}
	totals := `SELECT ` + strings.Join(groups, ", ") + `, CAST(sum(n) AS BIGINT) AS total, CAST(sum(sum(n)) OVER () AS BIGINT)
		FROM ` + from + ` GROUP BY ` + strings.Join(groups, ", ") +
		` ORDER BY total DESC, ` + strings.Join(ordered, ", ") + ` LIMIT ` + bind(q.Top)
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
	for i, g := range out.Groups {
		index[strings.Join(g.Values, "\x00")] = i
	}
	chosen := func(bind func(any) string) string {
		var alternatives []string
		for _, g := range out.Groups {
			var parts []string
			for j, col := range q.GroupBy {
				parts = append(parts, "v."+string(col)+" = "+bind(g.Values[j]))
			}
			alternatives = append(alternatives, "("+strings.Join(parts, " AND ")+")")
		}
		return strings.Join(alternatives, " OR ")
	}
	// Top groups by the window's buckets: the caller bounds both
	// (registry/history's maxTop and maxBuckets).
	cells, err := s.countCells(ctx, q, chosen, 0)
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
