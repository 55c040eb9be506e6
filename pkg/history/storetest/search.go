package storetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eventapiserver/event-apiserver/pkg/history"
	"github.com/eventapiserver/event-apiserver/pkg/search"
)

// searchWords are what random notes are made of: kubelet's, the
// scheduler's and controllers' words, in several cases, and LIKE's and
// FTS5's special characters, so that a term holding one must match it
// literally.
var searchWords = []string{
	"Back-off", "restarting", "failed", "container", "x509:", "certificate", "signed", "by", "unknown", "authority",
	"OOMKilled", "oomkilled", "Pulling", "image", "nginx:1.25", "0/3", "nodes", "are", "available:", "Insufficient", "cpu.",
	"100%", "1000", "key_val", "keyxval", `C:\temp`, `"quoted"`, "don't", "ÄÖÜ",
}

// testSearch: a text search (Condition.Contains) finds exactly the versions
// whose note holds the term, ignoring case, as strings.Contains over the
// lower-cased notes does, alone and beside every other kind of condition
// and the window, in List and in Changes; a term the index cannot look up
// is refused.
func testSearch(t *testing.T, s history.Store) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(45, 1))
	var versions []history.Version
	for i := range 400 {
		v := Version(fmt.Sprint("u", i), int64(i+1), fmt.Sprint("p", rng.IntN(20)), rng.IntN(600))
		v.Namespace = fmt.Sprint("ns", rng.IntN(3))
		v.Reason = []string{"BackOff", "Failed", "Pulling", "Started"}[rng.IntN(4)]
		v.Type = []string{"Normal", "Warning"}[rng.IntN(2)]
		var words []string
		for range rng.IntN(8) {
			words = append(words, searchWords[rng.IntN(len(searchWords))])
		}
		v.Note = strings.Join(words, " ")
		versions = append(versions, v)
	}
	if err := s.Write(ctx, history.Batch{Versions: versions}); err != nil {
		t.Fatal(err)
	}
	note := []history.Column{history.ColumnNote}
	terms := []string{"x509", "X509: CERT", "oomkilled", "100%", "y_val", `c:\temp`, `"quoted"`, "don't", "ÄÖÜ", "ed con", "nothing-like-this"}
	for range 40 {
		// A piece of a stored note, in another case: it matches at least
		// the note it came from.
		n := versions[rng.IntN(len(versions))].Note
		if len(n) < 6 {
			continue
		}
		from := rng.IntN(len(n) - 5)
		term := strings.ToUpper(n[from : from+3+rng.IntN(min(10, len(n)-from-3))])
		if search.Check(term) == nil {
			terms = append(terms, term)
		}
	}
	others := []func() []history.Condition{
		func() []history.Condition { return nil },
		func() []history.Condition {
			return []history.Condition{{Columns: []history.Column{history.ColumnReason}, Value: "BackOff"}}
		},
		func() []history.Condition {
			return []history.Condition{{Columns: []history.Column{history.ColumnNamespace}, Value: "ns1", Not: true}}
		},
		func() []history.Condition {
			return []history.Condition{{Columns: []history.Column{history.ColumnRegardingUID, history.ColumnRelatedUID}, Value: "p1", Values: []string{"p1", "p2", "p3"}}}
		},
		func() []history.Condition {
			return []history.Condition{{Columns: []history.Column{history.ColumnType}, Value: "Warning"},
				{Columns: note, Value: "failed", Contains: true}}
		},
	}
	for i, term := range terms {
		q := history.Query{Conditions: append(others[i%len(others)](), history.Condition{Columns: note, Value: term, Contains: true})}
		if i%3 == 1 {
			q.Since, q.Until = Base.Add(100*time.Minute), Base.Add(400*time.Minute)
		}
		want := bruteForce(versions, q)
		got, err := s.List(ctx, q)
		if err != nil {
			t.Fatalf("search %q: %v", term, err)
		}
		if fmt.Sprint(Revisions(got)) != fmt.Sprint(want) {
			t.Errorf("search %q with %+v: revisions %v, want %v", term, q, Revisions(got), want)
		}
		changes, err := s.Changes(ctx, history.ChangeQuery{Through: 1 << 40, Conditions: q.Conditions, Since: q.Since, Until: q.Until})
		if err != nil || len(changes) != len(want) {
			t.Errorf("search %q in the feed: %d changes (%v), want %d", term, len(changes), err, len(want))
		}
	}
	// MaxRows: a query may select as many versions as it allows, not one
	// more, whatever its page's limit.
	q := history.Query{Conditions: []history.Condition{{Columns: note, Value: "failed", Contains: true}}, Since: Base.Add(100 * time.Minute)}
	want := bruteForce(versions, q)
	n := len(want)
	for _, tc := range []struct {
		max  int
		fail bool
	}{{n, false}, {n + 1, false}, {n - 1, true}} {
		for _, limit := range []int{0, 1} {
			q.MaxRows, q.Limit = tc.max, limit
			got, err := s.List(ctx, q)
			wantListed := want
			if limit > 0 {
				wantListed = want[:limit]
			}
			if tc.fail != errors.Is(err, history.ErrTooManyRows) || !tc.fail && fmt.Sprint(Revisions(got)) != fmt.Sprint(wantListed) {
				t.Errorf("MaxRows %d over %d versions, limit %d: revisions %v (%v), want %v", tc.max, n, limit, Revisions(got), err, wantListed)
			}
		}
	}
	for name, c := range map[string]history.Condition{
		"too short":      {Columns: note, Value: "ab", Contains: true},
		"no run":         {Columns: note, Value: "a-b-c", Contains: true},
		"negated":        {Columns: note, Value: "failed", Contains: true, Not: true},
		"not searchable": {Columns: []history.Column{history.ColumnReason}, Value: "BackOff", Contains: true},
	} {
		if _, err := s.List(ctx, history.Query{Conditions: []history.Condition{c}}); err == nil {
			t.Errorf("%s: a search the index cannot answer was accepted", name)
		}
	}
}

// bruteForce is q's answer read from versions one by one, newest first.
func bruteForce(versions []history.Version, q history.Query) []int64 {
	var match []history.Version
	for _, v := range versions {
		if (!q.Since.IsZero() && v.LastSeen.Before(q.Since)) || (!q.Until.IsZero() && !v.LastSeen.Before(q.Until)) {
			continue
		}
		ok := true
		for _, c := range q.Conditions {
			ok = ok && holds(c, &v)
		}
		if ok {
			match = append(match, v)
		}
	}
	slices.SortFunc(match, func(a, b history.Version) int {
		if c := b.LastSeen.Compare(a.LastSeen); c != 0 {
			return c
		}
		return int(b.Revision - a.Revision)
	})
	var out []int64
	for _, v := range match {
		out = append(out, v.Revision)
	}
	return out
}

// holds is c on one version's columns.
func holds(c history.Condition, v *history.Version) bool {
	values := c.Values
	if len(values) == 0 {
		values = []string{c.Value}
	}
	for _, name := range c.Columns {
		def, _ := history.LookupColumn(name)
		got := *def.Value(v)
		if c.Contains && strings.Contains(strings.ToLower(got), strings.ToLower(c.Value)) || !c.Contains && slices.Contains(values, got) {
			return !c.Not
		}
	}
	return c.Not
}
