package history

import (
	"fmt"
	"slices"
	"strings"
)

// Where renders the query's filter for a SQL store whose versions table is
// aliased v, with last_seen and revision columns. Column names come from
// Columns; every value goes through param, which binds it and
// returns its placeholder (? or $n). It returns "" when nothing is filtered.
func (q Query) Where(param func(value any) string) (string, error) {
	narrowed := false
	for _, c := range q.Conditions {
		all := len(c.Columns) > 0 && !c.Not && c.Value != ""
		for _, col := range c.Columns {
			def, ok := columnsByName[col]
			all = all && ok && def.Narrowing
		}
		narrowed = narrowed || all
	}
	var terms []string
	for _, c := range q.Conditions {
		var parts []string
		for _, col := range c.Columns {
			def, ok := columnsByName[col]
			if !ok {
				return "", fmt.Errorf("unknown history column %q", col)
			}
			op := " = "
			if c.Not {
				op = " != "
			}
			column := "v." + string(col)
			if col == ColumnNamespace && narrowed {
				// Without statistics SQLite reads the namespace's index
				// over the whole window rather than the uid indexes of an
				// OR beside it (280 ms against 10 ms at 10^7 versions,
				// TestHistoryQueryAtScale); the expression keeps it off.
				column = "(" + column + " || '')"
			}
			var part string
			if len(c.Values) == 0 {
				part = column + op + param(c.Value)
			} else {
				// One IN per column: both stores answer it from the
				// column's index, one lookup per value.
				in := " IN ("
				if c.Not {
					in = " NOT IN ("
				}
				holders := make([]string, 0, len(c.Values))
				for _, v := range c.Values {
					holders = append(holders, param(v))
				}
				part = column + in + strings.Join(holders, ", ") + ")"
			}
			if !c.Not && c.Value != "" && !slices.Contains(c.Values, "") {
				// Implied, and written out for SQLite: its planner uses a
				// partial index (WHERE col != '') only when the query
				// states the index's condition.
				part = "(" + part + " AND v." + string(col) + " != '')"
			}
			if def.Added {
				// Versions stored before the column was added hold NULL:
				// the reader matches them on their Event (Condition.Match).
				part = "(" + part + " OR v." + string(col) + " IS NULL)"
			}
			parts = append(parts, part)
		}
		if len(parts) == 0 {
			continue
		}
		joiner := " OR "
		if c.Not {
			joiner = " AND "
		}
		terms = append(terms, "("+strings.Join(parts, joiner)+")")
	}
	if !q.Since.IsZero() {
		terms = append(terms, "v.last_seen >= "+param(q.Since.UnixNano()))
	}
	if !q.Until.IsZero() {
		terms = append(terms, "v.last_seen < "+param(q.Until.UnixNano()))
	}
	if q.Through > 0 {
		terms = append(terms, "v.seq <= "+param(q.Through))
	}
	if q.After != nil {
		terms = append(terms, "(v.last_seen, v.revision) < ("+param(q.After.LastSeen.UnixNano())+", "+param(q.After.Revision)+")")
	}
	if len(terms) == 0 {
		return "", nil
	}
	return " WHERE " + strings.Join(terms, " AND "), nil
}

// Where renders the filter of a feed read for a SQL store, as Query.Where
// does, the feed positions bounded on position (v.seq or d.seq).
func (q ChangeQuery) Where(position string, param func(value any) string) (string, error) {
	where, err := Query{Conditions: q.Conditions, Since: q.Since, Until: q.Until}.Where(param)
	if err != nil {
		return "", err
	}
	bounds := position + " > " + param(q.After) + " AND " + position + " <= " + param(q.Through)
	if where == "" {
		return " WHERE " + bounds, nil
	}
	return where + " AND " + bounds, nil
}
