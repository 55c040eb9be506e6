package sqlstore

import (
	"context"
	"strings"

	"github.com/eventapiserver/event-apiserver/pkg/history"
)

// ListQuery and ChangesQuery are List's and Changes' statements.
func (s *Store) ListQuery(q history.Query) (string, []any, error) { return s.listQuery(q) }

// CellsQuery is Count's one-pass statement.
func (s *Store) CellsQuery(q history.CountQuery) (string, []any, error) {
	return s.cellsQuery(q, nil, 0)
}

func (s *Store) ChangesQuery(q history.ChangeQuery) (string, []any, error) { return s.changesQuery(q) }

// SQLitePlan is SQLite's plan for query, one step a line.
func (s *Store) SQLitePlan(ctx context.Context, query string, args []any) (string, error) {
	rows, err := s.d.Read().Query(ctx, "EXPLAIN QUERY PLAN "+query, args...)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			return "", err
		}
		plan = append(plan, detail)
	}
	return strings.Join(plan, "\n"), rows.Err()
}

// PostgresPlan is PostgreSQL's EXPLAIN ANALYZE of query, one node a line.
func (s *Store) PostgresPlan(ctx context.Context, query string, args []any) (string, error) {
	rows, err := s.d.Read().Query(ctx, "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) "+query, args...)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return "", err
		}
		plan = append(plan, line)
	}
	return strings.Join(plan, "\n"), rows.Err()
}
