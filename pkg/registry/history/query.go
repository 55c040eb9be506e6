package history

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/eventapiserver/event-apiserver/pkg/apis/core"
	"github.com/eventapiserver/event-apiserver/pkg/fieldselectors"
	store "github.com/eventapiserver/event-apiserver/pkg/history"
	"github.com/eventapiserver/event-apiserver/pkg/search"
)

// selection is a parsed list request: the store query, and the field
// selector (window removed) every returned Event must also match.
type parsed struct {
	query store.Query
	field fields.Selector
	// search is set when the query holds a text search (Limits).
	search bool
}

// parseFieldSelector splits an internal-label field selector into store
// conditions, the time window (fieldselectors.Since and Until), and the
// selector matched in memory.
func parseFieldSelector(selector fields.Selector, now time.Time) (parsed, error) {
	p := parsed{field: fields.Everything()}
	var rest []fieldselectors.Requirement
	for _, req := range fieldselectors.Read(selector) {
		if req.Field == fieldselectors.Since || req.Field == fieldselectors.Until {
			if req.Not || req.Set {
				return p, apierrors.NewBadRequest(fmt.Sprintf("field selector %s supports only '=': %s", req.Field, selector.String()))
			}
			t, err := parseTime(req.Values[0], now)
			if err != nil {
				return p, apierrors.NewBadRequest(fmt.Sprintf("invalid field selector %s=%s: %v", req.Field, req.Values[0], err))
			}
			if req.Field == fieldselectors.Since {
				p.query.Since = t
			} else {
				p.query.Until = t
			}
			continue
		}
		if col, ok := searchColumn(req.Field); ok {
			if req.Not || req.Set {
				return p, apierrors.NewBadRequest(fmt.Sprintf("field selector %s supports only '=': %s", req.Field, selector.String()))
			}
			if err := search.Check(req.Values[0]); err != nil {
				return p, apierrors.NewBadRequest(fmt.Sprintf("invalid field selector %s: %v", req.Field, err))
			}
			p.query.Conditions = append(p.query.Conditions, store.Condition{Columns: []store.Column{col.Name}, Value: req.Values[0], Contains: true})
			p.search = true
			continue
		}
		// History's own columns are no field fieldselectors matches in
		// memory: the store answers them, and matchOwn.
		if col, ok := store.ColumnFor(req.Field); !ok || !col.Own {
			rest = append(rest, req)
		}
		var cols []store.Column
		for _, plain := range fieldselectors.PlainFields(req.Field) {
			col, ok := store.ColumnFor(plain)
			if !ok {
				cols = nil
				break
			}
			cols = append(cols, col.Name)
		}
		if len(cols) == 0 {
			continue
		}
		condition := store.Condition{Columns: cols, Value: req.Values[0], Not: req.Not}
		if req.Set {
			condition.Values = req.Values
		}
		p.query.Conditions = append(p.query.Conditions, condition)
	}
	if !p.query.Since.IsZero() && !p.query.Until.IsZero() && !p.query.Since.Before(p.query.Until) {
		return p, apierrors.NewBadRequest(fmt.Sprintf("field selector since (%s) must be before until (%s)",
			p.query.Since.Format(time.RFC3339), p.query.Until.Format(time.RFC3339)))
	}
	if len(rest) > 0 {
		p.field = fieldselectors.Selector(rest)
	}
	return p, nil
}

// searchColumn is the column a text search label (note.contains) searches.
func searchColumn(label string) (*store.ColumnDef, bool) {
	field, ok := strings.CutSuffix(label, fieldselectors.ContainsSuffix)
	if !ok {
		return nil, false
	}
	col, ok := store.ColumnFor(field)
	return col, ok && col.Searchable
}

// matchOwn holds when the Event passes the conditions on history's own
// columns, which the field selector matched in memory knows nothing of: the
// store answers them, but keeps the versions stored before such a column was
// added (store.ColumnDef.Added), and only their Event says whether they match.
func matchOwn(q store.Query, e *core.Event) bool {
	for _, c := range q.Conditions {
		for _, name := range c.Columns {
			if col, ok := store.LookupColumn(name); ok && col.Own && !c.Match(e) {
				return false
			}
		}
	}
	return true
}

// parseTime reads an RFC 3339 time or a duration before now ("168h", "30m").
func parseTime(value string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, value); err == nil {
		return t, nil
	}
	d, err := time.ParseDuration(value)
	if err != nil {
		return time.Time{}, fmt.Errorf("want an RFC 3339 time (2006-01-02T15:04:05Z) or a duration before now (168h)")
	}
	if d < 0 {
		return time.Time{}, fmt.Errorf("a duration before now must not be negative")
	}
	return now.Add(-d), nil
}

// continueToken is the opaque position after a page, and the feed position
// the list reads as of, so that every page shows the same moment.
type continueToken struct {
	Version  int   `json:"v"`
	LastSeen int64 `json:"t"`
	Revision int64 `json:"r"`
	// Position is absent from tokens of servers before the feed: their
	// pages read the newest state.
	Position int64 `json:"p,omitempty"`
}

func encodeContinue(c store.Cursor, position int64) string {
	b, _ := json.Marshal(continueToken{Version: 1, LastSeen: c.LastSeen.UnixNano(), Revision: c.Revision, Position: position})
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeContinue(token string) (*store.Cursor, int64, error) {
	if token == "" {
		return nil, 0, nil
	}
	bad := apierrors.NewBadRequest("invalid continue token: use the token of the previous page unchanged, or list again without it")
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimSpace(token))
	if err != nil {
		return nil, 0, bad
	}
	var c continueToken
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil || c.Version != 1 || c.Revision <= 0 || c.Position < 0 {
		return nil, 0, bad
	}
	return &store.Cursor{LastSeen: time.Unix(0, c.LastSeen).UTC(), Revision: c.Revision}, c.Position, nil
}
