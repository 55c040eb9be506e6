package history

import (
	"fmt"
	"strings"
)

// columns is every Column; SQL stores name their columns so.
var columns = map[Column]bool{
	ColumnNamespace: true, ColumnName: true,
	ColumnRegardingUID: true, ColumnRegardingName: true,
	ColumnRegardingNamespace: true, ColumnRegardingKind: true,
	ColumnRelatedUID: true, ColumnRelatedName: true,
	ColumnReason: true, ColumnType: true, ColumnReportingController: true,
}

// Where renders the query's filter for a SQL store whose versions table is
// aliased v, with last_seen and revision columns. Column names come from
// the fixed set above; every value goes through param, which binds it and
// returns its placeholder (? or $n). It returns "" when nothing is filtered.
func (q Query) Where(param func(value any) string) (string, error) {
	var terms []string
	for _, c := range q.Conditions {
		var parts []string
		for _, col := range c.Columns {
			if !columns[col] {
				return "", fmt.Errorf("unknown history column %q", col)
			}
			op := " = "
			if c.Not {
				op = " != "
			}
			part := "v." + string(col) + op + param(c.Value)
			if !c.Not && c.Value != "" {
				// Implied, and written out for SQLite: its planner uses a
				// partial index (WHERE col != '') only when the query
				// states the index's condition.
				part = "(" + part + " AND v." + string(col) + " != '')"
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
	if q.After != nil {
		terms = append(terms, "(v.last_seen, v.revision) < ("+param(q.After.LastSeen.UnixNano())+", "+param(q.After.Revision)+")")
	}
	if len(terms) == 0 {
		return "", nil
	}
	return " WHERE " + strings.Join(terms, " AND "), nil
}
