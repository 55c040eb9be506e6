package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/eventapiserver/event-apiserver/pkg/history"
)

// testEndPositions: a list's records are at the positions the feed gives
// their last changes (an ended version at its end's, endPosition), for a
// page of ended and live Events that holds some of an Event's versions and
// not others, an Event whose versions lie on three days (PostgreSQL's
// partitions) and last seen out of their revisions' order, an end of one
// version, a list as of a position before the ends, and after retention
// removed a later version of an ended Event, which moves the older one's
// end position up.
func testEndPositions(t *testing.T, s history.Store) {
	ctx := context.Background()
	// uid at rev, last seen and observed at minutes after noon of day d
	// (PostgreSQL retains by day of last occurrence, SQLite by observation
	// in the order stored).
	at := func(uid string, rev int64, d, minutes int) history.Version {
		v := Version(uid, rev, "p", d*24*60+minutes)
		v.ObservedAt = v.LastSeen
		return v
	}
	write := func(b history.Batch) int64 { return writeBatch(t, s, b) }
	// e's revision 20 is last seen first, on day 0, and stored first, so
	// that retention of day 0 removes it and no other version of e.
	write(history.Batch{Versions: []history.Version{at("e", 20, 0, 0)}})
	write(history.Batch{Versions: []history.Version{at("e", 10, 1, 0), at("l", 15, 1, 1), at("e", 30, 1, 2)}})
	beforeEnds := write(history.Batch{Versions: []history.Version{at("e", 40, 2, 0), at("s", 25, 2, 1), at("l", 45, 2, 2)}})
	write(history.Batch{Deletions: []history.Deletion{{UID: "e", Revision: 41, At: Base.Add(72 * time.Hour)},
		{UID: "s", Revision: 26, At: Base.Add(72 * time.Hour)}}})
	write(history.Batch{Versions: []history.Version{at("l", 50, 2, 3)}})

	// Each record listed (whole, in pages of 2 and 3, which cut e's
	// versions apart) and got is at its position in want, and none other.
	check := func(when string, want map[string]int64) {
		t.Helper()
		for _, limit := range []int{0, 2, 3} {
			listed := 0
			q := history.Query{Limit: limit}
			for {
				page, err := s.List(ctx, q)
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range page {
					key := fmt.Sprintf("%s@%d", r.UID, r.Revision)
					listed++
					if ended := r.DeletedAt != nil; ended != (r.UID != "l") {
						t.Errorf("%s, pages of %d: %s deleted at %v", when, limit, key, r.DeletedAt)
					}
					if position, ok := want[key]; !ok || r.Position != position {
						t.Errorf("%s, pages of %d: %s at position %d, want %d", when, limit, key, r.Position, position)
					}
					got, err := s.Get(ctx, r.Namespace, r.Name, r.Revision)
					if err != nil || got.Position != r.Position {
						t.Errorf("%s: get %s at position %d (%v), the list's %d", when, key, got.Position, err, r.Position)
					}
				}
				if limit == 0 || len(page) < limit {
					break
				}
				q.After = &history.Cursor{LastSeen: page[len(page)-1].LastSeen, Revision: page[len(page)-1].Revision}
			}
			if listed != len(want) {
				t.Errorf("%s, pages of %d: listed %d records, want %d", when, limit, listed, len(want))
			}
		}
	}
	// Positions from the origin: e@20 1; e@10 2, l@15 3, e@30 4; e@40 5,
	// s@25 6, l@45 7; e's end 8..11 (one per version, oldest revision
	// first), s's 12; l@50 13.
	o := int64(history.FeedOrigin)
	want := map[string]int64{"e@10": o + 8, "e@20": o + 9, "e@30": o + 10, "e@40": o + 11,
		"s@25": o + 12, "l@15": o + 3, "l@45": o + 7, "l@50": o + 13}
	check("all stored", want)
	// The feed delivered each at the same position: a list and a
	// watcher's store agree.
	changes, _ := readFeed(t, s, o, 100, history.ChangeQuery{})
	last := map[string]int64{}
	for _, c := range changes {
		last[fmt.Sprintf("%s@%d", c.UID, c.Revision)] = c.Position
	}
	if fmt.Sprint(last) != fmt.Sprint(want) {
		t.Errorf("the feed's last change of each: %v, want %v", last, want)
	}

	// As of a position before the ends, no record has one.
	asOf, err := s.List(ctx, history.Query{Through: beforeEnds, Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range asOf {
		if r.DeletedAt != nil || r.Position > beforeEnds {
			t.Errorf("list as of %d: %s@%d deleted %v at position %d", beforeEnds, r.UID, r.Revision, r.DeletedAt, r.Position)
		}
	}

	// Retention of day 0 removes e@20, above e@10: e@10's end moves to
	// the position e@20's had, the rest stay.
	cutoff := time.Unix(0, (Base.Add(24*time.Hour).UnixNano()/int64(24*time.Hour))*int64(24*time.Hour)).UTC()
	if n, err := s.Retain(ctx, cutoff, 0, 1); err != nil || n != 1 {
		t.Fatalf("retention removed %d versions (%v), want e@20", n, err)
	}
	check("after retention", map[string]int64{"e@10": o + 9, "e@30": o + 10, "e@40": o + 11,
		"s@25": o + 12, "l@15": o + 3, "l@45": o + 7, "l@50": o + 13})
}
