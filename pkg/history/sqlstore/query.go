package sqlstore

import (
	"fmt"
	"slices"
	"strings"

	"github.com/eventapiserver/event-apiserver/pkg/history"
	"github.com/eventapiserver/event-apiserver/pkg/search"
)

// where renders the query's filter on the versions table aliased v, with
// last_seen and revision columns. Column names come from history.Columns;
// every value goes through bind, which binds it and returns its
// placeholder; a text search is spelled by sp (Spelling.Contains). It
// returns "" when nothing is filtered.
func where(q history.Query, sp Spelling, bind func(value any) string) (string, error) {
	narrowed := false
	for _, c := range q.Conditions {
		all := len(c.Columns) > 0 && !c.Not && c.Value != ""
		for _, col := range c.Columns {
			def, ok := history.LookupColumn(col)
			all = all && ok && def.Narrowing
		}
		// A text search is narrowing too: its index yields the few
		// versions holding a rare word, where the namespace's index is
		// all of the namespace's window (TestSearchPlan).
		narrowed = narrowed || all || c.Contains
	}
	var terms []string
	for _, c := range q.Conditions {
		if c.Contains {
			term, err := contains(c, sp, bind)
			if err != nil {
				return "", err
			}
			terms = append(terms, term)
			continue
		}
		var parts []string
		for _, col := range c.Columns {
			def, ok := history.LookupColumn(col)
			if !ok {
				return "", unknownColumn(col)
			}
			op := " = "
			if c.Not {
				op = " != "
			}
			column := "v." + string(col)
			if col == history.ColumnNamespace && narrowed {
				// Without statistics SQLite reads the namespace's index
				// over the whole window rather than the uid indexes of an
				// OR beside it (280 ms against 10 ms at 10^7 versions,
				// TestHistoryQueryAtScale); the expression keeps it off.
				column = "(" + column + " || '')"
			}
			var part string
			if len(c.Values) == 0 {
				part = column + op + bind(c.Value)
			} else {
				// One IN per column: both stores answer it from the
				// column's index, one lookup per value.
				in := " IN ("
				if c.Not {
					in = " NOT IN ("
				}
				holders := make([]string, 0, len(c.Values))
				for _, v := range c.Values {
					holders = append(holders, bind(v))
				}
				part = column + in + strings.Join(holders, ", ") + ")"
			}
			if !c.Not && c.Value != "" && !slices.Contains(c.Values, "") {
				// Implied, and written out for SQLite: its planner uses a
				// partial index (WHERE col != '') only when the query
				// states the index's condition.
				part = "(" + part + " AND v." + string(col) + " != '')"
			}
			if def.NullBefore() {
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
		terms = append(terms, "v.last_seen >= "+bind(q.Since.UnixNano()))
	}
	if !q.Until.IsZero() {
		terms = append(terms, "v.last_seen < "+bind(q.Until.UnixNano()))
	}
	if q.Through > 0 {
		terms = append(terms, "v.seq <= "+bind(q.Through))
	}
	if q.After != nil {
		terms = append(terms, "(v.last_seen, v.revision) < ("+bind(q.After.LastSeen.UnixNano())+", "+bind(q.After.Revision)+")")
	}
	if len(terms) == 0 {
		return "", nil
	}
	return " WHERE " + strings.Join(terms, " AND "), nil
}

// contains renders a text search: the database's index lookup of the
// term, or the versions stored before the column was added (NULL there),
// which the reader matches on their Event (Condition.Match).
func contains(c history.Condition, sp Spelling, bind func(value any) string) (string, error) {
	if len(c.Columns) != 1 || c.Not || len(c.Values) > 0 {
		return "", fmt.Errorf("%w: one column, neither negated nor a set", ErrBadSearch)
	}
	def, ok := history.LookupColumn(c.Columns[0])
	if !ok {
		return "", unknownColumn(c.Columns[0])
	}
	if !def.Searchable {
		return "", fmt.Errorf("%w: column %q has no text index", ErrBadSearch, def.Name)
	}
	if err := search.Check(c.Value); err != nil {
		return "", fmt.Errorf("%w: %v", ErrBadSearch, err)
	}
	return "(" + sp.Contains(def.Name, c.Value, bind) + ")", nil
}

// changesWhere renders the filter of a feed read, as where does, the feed
// positions bounded on position (v.seq or d.seq).
func changesWhere(q history.ChangeQuery, position string, sp Spelling, bind func(value any) string) (string, error) {
	w, err := where(history.Query{Conditions: q.Conditions, Since: q.Since, Until: q.Until}, sp, bind)
	if err != nil {
		return "", err
	}
	bounds := position + " > " + bind(q.After) + " AND " + position + " <= " + bind(q.Through)
	if w == "" {
		return " WHERE " + bounds, nil
	}
	return w + " AND " + bounds, nil
}

// endPosition is the feed position of the end of version v's Event d on v
// (NULL without an end): an end takes one position per version stored
// before it, first_seq to seq in revision order, so the Event's latest
// version's is seq and each older one's is one lower per version above it.
// Retention removing a version above v moves v's up, never past seq nor
// below first_seq. An end stored before blocks (first_seq 0) has one
// position, seq, on its latest version.
//
// The feed's ends leg and Get count it per row, and so does List where the
// database reads a version's uid in one probe (Spelling.PageEnds unset);
// elsewhere List counts the same for its whole page at once
// (pageStatement). CASE first: a record without an end costs no count.
const endPosition = `CASE WHEN d.seq IS NULL THEN NULL ELSE {greatest}(CASE WHEN d.first_seq > 0 THEN d.first_seq ELSE d.seq END,
	d.seq - (SELECT count(*) FROM {versions} h WHERE h.uid = v.uid AND h.seq < d.seq AND h.revision > v.revision)) END`

// recordColumns are what scanRecord reads, from versions v and deletions d,
// the end's position on v as end.
func recordColumns(end string) string {
	return versionRecordColumns("v", true) + ", d.revision AS deleted_revision, d.deleted_at, " + end + " AS end_position"
}

// versionRecordColumns are a record's columns from the versions (table
// alias t) up to seq; with coalesce, a column a migration added is read as
// empty for the versions stored before it (else as it is).
func versionRecordColumns(t string, coalesce bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s.uid, %[1]s.revision", t)
	for _, c := range history.Columns {
		if c.Added && coalesce {
			fmt.Fprintf(&b, ", coalesce(%s.%s, '') AS %[2]s", t, c.Name)
		} else {
			fmt.Fprintf(&b, ", %s.%s", t, c.Name)
		}
	}
	fmt.Fprintf(&b, ", %s.last_seen, %[1]s.observed_at, %[1]s.object, %[1]s.seq", t)
	return b.String()
}

// pageColumns are what pageStatement's page reads: recordColumns without
// the end's position, and what it is counted from.
func pageColumns() string {
	return versionRecordColumns("v", true) + ", d.revision AS deleted_revision, d.deleted_at, d.seq AS end_seq, d.first_seq AS end_first"
}

// pageRecord is what scanRecord reads from pageStatement's page p and
// counts l: endPosition, its count l.n.
func pageRecord() string {
	return versionRecordColumns("p", false) + `, p.deleted_revision, p.deleted_at,
	CASE WHEN p.end_seq IS NULL THEN NULL ELSE {greatest}(CASE WHEN p.end_first > 0 THEN p.end_first ELSE p.end_seq END,
	p.end_seq - coalesce(l.n, 0)) END AS end_position`
}

// pageStatement reads the records of versions v, joined to their ends d
// (as of feed position through, 0: all), that filter (WHERE ..., ORDER BY
// ..., LIMIT ...) selects, in order: first the page, then the end
// positions of its ended versions, all in one step. endPosition's count
// per row probed every day partition's key on PostgreSQL, which has no
// index across partitions: a page of 500 ended versions made 7,300 probes,
// half of a text search at 10^7 versions. Here:
//   - an end whose block is one position (first_seq = seq, or 0: from
//     before blocks) is at seq whatever the count, and is not counted;
//   - an Event whose versions stored before its end are all in the page is
//     counted in the page: its end's block has one position per version
//     stored then (seq - first_seq + 1), and versions are only ever
//     removed from that set, so as many in the page are all there are.
//     Most of a page's Events are so: selectors on the regarding object,
//     the reason or the note hold for all of an Event's versions alike,
//     and a page or a window cuts only the Events at its edges;
//   - the other Events' versions are read by uid in one scan of each
//     partition's key (Spelling.PageEnds).
//
// The count and the formula are endPosition's, so a list and the feed
// agree (testEndPositions). Each step is MATERIALIZED, run once whatever
// the planner estimates: with the page's rows underestimated, PostgreSQL
// ran the scan by uid once per page row.
func (s *Store) pageStatement(through int64, filter, order string) string {
	return `WITH page AS MATERIALIZED (SELECT ` + s.sql.pageColumns + ` FROM ` + s.sp.Versions + ` v LEFT JOIN ` + s.sp.Deletions +
		` d ON d.uid = v.uid` + asOf(through) + filter + `),
	ended AS MATERIALIZED (SELECT DISTINCT uid, revision, end_seq FROM page WHERE end_first > 0 AND end_first < end_seq),
	whole AS MATERIALIZED (SELECT uid FROM page WHERE end_first > 0 AND seq < end_seq
		GROUP BY uid HAVING count(*) = max(end_seq - end_first + 1)),
	stored AS MATERIALIZED (SELECT uid, revision, seq FROM page WHERE uid IN (SELECT uid FROM whole)
		UNION ALL SELECT h.uid, h.revision, h.seq FROM ` + s.sp.Versions + ` h
		WHERE ` + s.sp.PageEnds(`SELECT uid FROM ended WHERE uid NOT IN (SELECT uid FROM whole)`) + `),
	later AS (SELECT e.uid, e.revision, count(*) AS n FROM ended e JOIN stored h
		ON h.uid = e.uid AND h.seq < e.end_seq AND h.revision > e.revision GROUP BY e.uid, e.revision)
	SELECT ` + s.sql.pageRecord + ` FROM page p LEFT JOIN later l ON l.uid = p.uid AND l.revision = p.revision` + order
}

// versionColumns are the columns of a version Write inserts, in the order
// versionRow appends their values.
func versionColumns() []string {
	columns := []string{"uid", "revision"}
	for _, c := range history.Columns {
		columns = append(columns, string(c.Name))
	}
	return append(columns, "last_seen", "observed_at", "object", "seq")
}

// versionRow appends v's values, at feed position seq.
func versionRow(args []any, v *history.Version, seq int64) []any {
	args = append(args, v.UID, v.Revision)
	for i := range history.Columns {
		args = append(args, *history.Columns[i].Value(v))
	}
	return append(args, v.LastSeen.UnixNano(), v.ObservedAt.UnixNano(), v.Object, seq)
}

// selectRecord reads versions with their Event's end, as of feed position
// through (0: all that is committed).
func (s *Store) selectRecord(through int64) string {
	return s.sql.selectRecord + asOf(through)
}

// asOf restricts the join of the versions' ends d to those stored by feed
// position through (0: all that is committed).
func asOf(through int64) string {
	if through > 0 {
		return fmt.Sprintf(" AND d.seq <= %d", through)
	}
	return ""
}

// changesQuery is Changes' statement: the new versions and the ends, each
// leg read by its position index, merged. A change's position is its own
// column, so the record's end position is not read (changeColumns): each
// endPosition is a subquery that SQLite parses and plans on every read,
// most of a feed read's CPU. The ends leg joins an end's
// versions with Spelling.EndsJoin; v.seq > 0 and d.seq > 0 state the
// position indexes' condition, without which SQLite does not use a partial
// index: the versions leg then walked the whole table on every read.
func (s *Store) changesQuery(q history.ChangeQuery) (string, []any, error) {
	var args []any
	bind := s.sp.bind(&args)
	limit := q.Limit
	if limit <= 0 {
		limit = 1000
	}
	versionsWhere, err := changesWhere(q, "v.seq", s.sp, bind)
	if err != nil {
		return "", nil, err
	}
	versions := `SELECT * FROM (SELECT ` + s.sql.changeColumns + `, v.seq AS position, 0 AS ended
		FROM ` + s.sp.Versions + ` v LEFT JOIN ` + s.sp.Deletions + ` d ON d.uid = v.uid AND d.seq < v.seq` + versionsWhere +
		` AND v.seq > 0 ORDER BY v.seq LIMIT ` + bind(limit) + `) AS versions_leg`
	endsWhere, err := changesWhere(q, "d.seq", s.sp, bind)
	if err != nil {
		return "", nil, err
	}
	// An end from before blocks is on its Event's latest version only.
	ends := `SELECT * FROM (SELECT ` + s.sql.changeColumns + `, ` + s.sql.endPosition + ` AS position, 1 AS ended
		FROM ` + s.sp.Deletions + ` d ` + s.sp.EndsJoin + ` ` + s.sp.Versions + ` v ON v.uid = d.uid AND v.seq < d.seq` + endsWhere +
		` AND d.seq > 0 AND ` + s.sql.endPosition + ` > ` + bind(q.After) + `
		AND (d.first_seq > 0 OR v.revision = (SELECT l.revision FROM ` + s.sp.Versions + ` l
			WHERE l.uid = d.uid AND l.seq < d.seq ORDER BY l.revision DESC LIMIT 1))
		ORDER BY d.seq, v.revision LIMIT ` + bind(limit) + `) AS ends_leg`
	return versions + ` UNION ALL ` + ends + ` ORDER BY position, revision LIMIT ` + bind(limit), args, nil
}
