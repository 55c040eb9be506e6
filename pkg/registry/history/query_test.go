package history

import (
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"

	store "github.com/eventapiserver/event-apiserver/pkg/history"
	"github.com/eventapiserver/event-apiserver/pkg/search"
)

func TestParseFieldSelector(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name         string
		selector     string
		conditions   []store.Condition
		since, until time.Time
		inMemory     string
		badRequest   bool
	}{
		{name: "empty"},
		{name: "indexed", selector: "involvedObject.uid=u",
			conditions: []store.Condition{{Columns: []store.Column{store.ColumnRegardingUID}, Value: "u"}}, inMemory: "involvedObject.uid=u"},
		{name: "or field", selector: "involvedObjectOrRelated.uid!=u",
			conditions: []store.Condition{{Columns: []store.Column{store.ColumnRegardingUID, store.ColumnRelatedUID}, Value: "u", Not: true}}, inMemory: "involvedObjectOrRelated.uid!=u"},
		{name: "not a column", selector: "action=Binding", inMemory: "action=Binding"},
		{name: "history's own column", selector: "note=Started container",
			conditions: []store.Condition{{Columns: []store.Column{store.ColumnNote}, Value: "Started container"}}},
		{name: "or field without columns", selector: "involvedObjectOrRelated.kind=Pod", inMemory: "involvedObjectOrRelated.kind=Pod"},
		{name: "duration", selector: "since=168h", since: now.Add(-168 * time.Hour)},
		{name: "rfc3339", selector: "since=2026-11-01T00:00:00Z,until=2026-11-02T00:00:00Z",
			since: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), until: time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC)},
		{name: "bad time", selector: "since=yesterday", badRequest: true},
		{name: "negative duration", selector: "until=-1h", badRequest: true},
		{name: "not equals on the window", selector: "since!=1h", badRequest: true},
		{name: "a set on the window", selector: "since:in=1h", badRequest: true},
		{name: "a set", selector: `reason:in=A\,B`,
			conditions: []store.Condition{{Columns: []store.Column{store.ColumnReason}, Value: "A"}}, inMemory: `reason:in=A\,B`},
		{name: "empty window", selector: "since=1h,until=2h", badRequest: true},
		{name: "text search", selector: "note.contains=x509,since=24h", since: now.Add(-24 * time.Hour),
			conditions: []store.Condition{{Columns: []store.Column{store.ColumnNote}, Value: "x509", Contains: true}}},
		{name: "text search with wildcards and an escaped comma", selector: `note.contains=100% of cpu\, 5_0,reason=FailedScheduling`,
			conditions: []store.Condition{{Columns: []store.Column{store.ColumnNote}, Value: "100% of cpu, 5_0", Contains: true},
				{Columns: []store.Column{store.ColumnReason}, Value: "FailedScheduling"}}, inMemory: "reason=FailedScheduling"},
		{name: "text search too short", selector: "note.contains=ab", badRequest: true},
		{name: "text search without a run of three", selector: "note.contains=a.b.c", badRequest: true},
		{name: "text search negated", selector: "note.contains!=x509", badRequest: true},
		{name: "text search as a set", selector: "note.contains:in=x509", badRequest: true},
		{name: "text search on a column without a text index", selector: "reason.contains=BackOff", inMemory: "reason.contains=BackOff"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			selector, err := fields.ParseSelector(tc.selector)
			if err != nil {
				t.Fatal(err)
			}
			p, err := parseFieldSelector(selector, now)
			if tc.badRequest {
				if !apierrors.IsBadRequest(err) {
					t.Fatalf("err = %v, want a BadRequest", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(p.query.Conditions) != len(tc.conditions) {
				t.Fatalf("conditions = %+v, want %+v", p.query.Conditions, tc.conditions)
			}
			for i, c := range tc.conditions {
				got := p.query.Conditions[i]
				if got.Value != c.Value || got.Not != c.Not || got.Contains != c.Contains || len(got.Columns) != len(c.Columns) || got.Columns[0] != c.Columns[0] {
					t.Errorf("condition %d = %+v, want %+v", i, got, c)
				}
			}
			if !p.query.Since.Equal(tc.since) || !p.query.Until.Equal(tc.until) {
				t.Errorf("window = [%v, %v), want [%v, %v)", p.query.Since, p.query.Until, tc.since, tc.until)
			}
			if p.field.String() != tc.inMemory {
				t.Errorf("in-memory selector = %q, want %q", p.field.String(), tc.inMemory)
			}
		})
	}
}

func TestContinueToken(t *testing.T) {
	cursor := store.Cursor{LastSeen: time.Unix(1700000000, 5).UTC(), Revision: 42}
	got, position, err := decodeContinue(encodeContinue(cursor, 7))
	if err != nil || got == nil || *got != cursor || position != 7 {
		t.Fatalf("round trip: %v at %d, %v", got, position, err)
	}
	// A token from before the feed reads the newest state.
	if _, position, err := decodeContinue("eyJ2IjoxLCJ0IjoxLCJyIjoxfQ"); err != nil || position != 0 {
		t.Fatalf("a token without a position: %d, %v", position, err)
	}
	for name, token := range map[string]string{
		"not base64":     "%%%",
		"not json":       "bm90IGpzb24",
		"wrong version":  "eyJ2IjoyLCJ0IjoxLCJyIjoxfQ",
		"no revision":    "eyJ2IjoxLCJ0IjoxfQ",
		"unknown fields": "eyJ2IjoxLCJ0IjoxLCJyIjoxLCJ4IjoxfQ",
	} {
		if _, _, err := decodeContinue(token); !apierrors.IsBadRequest(err) {
			t.Errorf("%s: err = %v, want a BadRequest", name, err)
		}
	}
}

// FuzzParseFieldSelector: whatever selector kube's grammar lets through, the
// parser answers a 400 or a query whose text searches the stores can look
// up (search.Check), and never panics.
func FuzzParseFieldSelector(f *testing.F) {
	for _, seed := range []string{"note.contains=x509", `note.contains=100%\,_x\\y`, "note.contains!=abc", "note.contains=ab",
		"note.contains=Back-off,since=1h,until=1m", "since=2026-11-01T00:00:00Z", "note.contains:in=abc", "note.contains=\"quoted\"",
		"reason=BackOff,note.contains=ÄÖÜ", "note.contains=\x00abc"} {
		f.Add(seed)
	}
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, raw string) {
		selector, err := fields.ParseSelector(raw)
		if err != nil {
			return
		}
		p, err := parseFieldSelector(selector, now)
		if err != nil {
			if !apierrors.IsBadRequest(err) {
				t.Fatalf("%q: %v, want a BadRequest", raw, err)
			}
			return
		}
		for _, c := range p.query.Conditions {
			if c.Contains && (search.Check(c.Value) != nil || c.Not || len(c.Columns) != 1 || !p.search) {
				t.Fatalf("%q: a search the stores cannot answer: %+v", raw, c)
			}
		}
		if err := (Limits{}).withDefaults().CheckWindow(p.query.Since, p.query.Until, now); err != nil && !apierrors.IsBadRequest(err) {
			t.Fatalf("%q: window: %v, want a BadRequest", raw, err)
		}
	})
}
