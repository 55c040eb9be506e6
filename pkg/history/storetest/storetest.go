// Package storetest is the suite every history.Store passes: idempotent
// writes, progress, the read order and filters of List (the note and
// cluster columns' too), and the feed: its
// order, ends, filters, floor, and no change committed behind a position a
// reader has read, under concurrent writers.
package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/eventapiserver/event-apiserver/pkg/history"
)

// Run runs the suite; open returns an empty store.
func Run(t *testing.T, open func(t *testing.T) history.Store) {
	t.Run("write is idempotent", func(t *testing.T) { testWriteIsIdempotent(t, open(t)) })
	t.Run("list", func(t *testing.T) { testList(t, open(t)) })
	t.Run("gone", func(t *testing.T) { testGone(t, open(t)) })
	t.Run("note", func(t *testing.T) { testNote(t, open(t)) })
	t.Run("search", func(t *testing.T) { testSearch(t, open(t)) })
	t.Run("cluster", func(t *testing.T) { testCluster(t, open(t)) })
	t.Run("count", func(t *testing.T) { testCount(t, open(t)) })
	runFeed(t, open)
}

// testGone: after a relist at revision 20 that found only b live, a (seen at
// 5) was deleted unseen; c (first seen at 30, after the relist) and d
// (already deleted) keep what they had.
func testGone(t *testing.T, s history.Store) {
	ctx := context.Background()
	deletedAt := Base.Add(time.Hour)
	err := s.Write(ctx, history.Batch{
		Versions:  []history.Version{Version("a", 5, "p", 1), Version("b", 6, "p", 2), Version("c", 30, "p", 3), Version("d", 7, "p", 4)},
		Deletions: []history.Deletion{{UID: "d", Revision: 8, At: Base}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Write(ctx, history.Batch{Gone: &history.Gone{Revision: 20, Live: []string{"b"}, At: deletedAt}}); err != nil {
		t.Fatal(err)
	}
	records, err := s.List(ctx, history.Query{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"a": "20@" + deletedAt.String(), "b": "live", "c": "live", "d": "8@" + Base.String()}
	for _, r := range records {
		got := "live"
		if r.DeletedAt != nil {
			got = fmt.Sprintf("%d@%s", r.DeletedRevision, r.DeletedAt.String())
		}
		if got != want[r.UID] {
			t.Errorf("%s: %s, want %s", r.UID, got, want[r.UID])
		}
	}
}

// Base is the time the versions of the suite are seen around.
var Base = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

// Version is one test version: uid at rev about regarding, last seen minutes after Base.
func Version(uid string, rev int64, regarding string, minutes int) history.Version {
	return history.Version{
		UID: uid, Revision: rev, Namespace: "ns", Name: "ev-" + uid,
		RegardingUID: regarding, RegardingName: "pod-" + regarding, RegardingKind: "Pod",
		Reason: "Started", Type: "Normal", ReportingController: "kubelet",
		LastSeen: Base.Add(time.Duration(minutes) * time.Minute), ObservedAt: Base.Add(time.Duration(rev) * time.Second),
		Object: []byte(fmt.Sprintf("object %s/%d", uid, rev)),
	}
}

// Revisions lists the records' revisions in order.
func Revisions(records []history.Record) []int64 {
	var out []int64
	for _, r := range records {
		out = append(out, r.Revision)
	}
	return out
}

func testWriteIsIdempotent(t *testing.T, s history.Store) {
	ctx := context.Background()
	batch := history.Batch{Source: "src", Revision: 10, Versions: []history.Version{Version("a", 5, "p1", 1), Version("a", 7, "p1", 2)}}
	for i := 0; i < 2; i++ {
		if err := s.Write(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Write(ctx, history.Batch{Source: "src", Revision: 8, Deletions: []history.Deletion{{UID: "a", Revision: 9, At: Base}}}); err != nil {
		t.Fatal(err)
	}
	rev, ok, err := s.Progress(ctx, "src")
	if err != nil || !ok || rev != 10 {
		t.Fatalf("progress = %d %v %v, want 10", rev, ok, err)
	}
	if _, ok, _ := s.Progress(ctx, "other"); ok {
		t.Fatal("progress for an unknown source")
	}
	// Only a rewind (kube-apiserver's etcd restored behind it) moves it back.
	if err := s.Write(ctx, history.Batch{Source: "src", Revision: 4, Rewind: true}); err != nil {
		t.Fatal(err)
	}
	if rev, _, err := s.Progress(ctx, "src"); err != nil || rev != 4 {
		t.Fatalf("progress after a rewind to 4 = %d %v", rev, err)
	}
	if err := s.Write(ctx, history.Batch{Source: "src", Revision: 10}); err != nil {
		t.Fatal(err)
	}
	got, err := s.List(ctx, history.Query{})
	if err != nil {
		t.Fatal(err)
	}
	if want := []int64{7, 5}; fmt.Sprint(Revisions(got)) != fmt.Sprint(want) {
		t.Fatalf("revisions = %v, want %v", Revisions(got), want)
	}
	for _, r := range got {
		if r.DeletedAt == nil || !r.DeletedAt.Equal(Base) || r.DeletedRevision != 9 {
			t.Errorf("revision %d: deleted %v at %d, want %v at 9", r.Revision, r.DeletedAt, r.DeletedRevision, Base)
		}
	}
	r, err := s.Get(ctx, "ns", "ev-a", 5)
	if err != nil || string(r.Object) != "object a/5" {
		t.Fatalf("Get = %q, %v", r.Object, err)
	}
	if _, err := s.Get(ctx, "ns", "ev-a", 6); err != history.ErrNotFound {
		t.Fatalf("Get of a missing version: %v, want ErrNotFound", err)
	}
}

func testList(t *testing.T, s history.Store) {
	ctx := context.Background()
	var versions []history.Version
	for i := int64(1); i <= 6; i++ {
		regarding := "p1"
		if i%2 == 0 {
			regarding = "p2"
		}
		versions = append(versions, Version(fmt.Sprint("u", i), i, regarding, int(i)))
	}
	versions[5].RelatedUID = "p1"
	if err := s.Write(ctx, history.Batch{Versions: versions}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		query history.Query
		want  []int64
	}{
		{"all newest first", history.Query{}, []int64{6, 5, 4, 3, 2, 1}},
		{"one object", history.Query{Conditions: []history.Condition{{Columns: []history.Column{history.ColumnRegardingUID}, Value: "p1"}}}, []int64{5, 3, 1}},
		{"regarding or related", history.Query{Conditions: []history.Condition{{Columns: []history.Column{history.ColumnRegardingUID, history.ColumnRelatedUID}, Value: "p1"}}}, []int64{6, 5, 3, 1}},
		{"not", history.Query{Conditions: []history.Condition{{Columns: []history.Column{history.ColumnRegardingUID}, Value: "p1", Not: true}}}, []int64{6, 4, 2}},
		{"in", history.Query{Conditions: []history.Condition{{Columns: []history.Column{history.ColumnRegardingUID, history.ColumnRelatedUID}, Value: "p1", Values: []string{"p1", "none"}}}}, []int64{6, 5, 3, 1}},
		{"notin", history.Query{Conditions: []history.Condition{{Columns: []history.Column{history.ColumnRegardingUID}, Value: "p1", Values: []string{"p1", "none"}, Not: true}}}, []int64{6, 4, 2}},
		{"window", history.Query{Since: Base.Add(2 * time.Minute), Until: Base.Add(5 * time.Minute)}, []int64{4, 3, 2}},
		{"limit", history.Query{Limit: 2}, []int64{6, 5}},
		{"after", history.Query{After: &history.Cursor{LastSeen: Base.Add(4 * time.Minute), Revision: 4}, Limit: 2}, []int64{3, 2}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.List(ctx, tc.query)
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(Revisions(got)) != fmt.Sprint(tc.want) {
				t.Fatalf("revisions = %v, want %v", Revisions(got), tc.want)
			}
		})
	}
	if _, err := s.List(ctx, history.Query{Conditions: []history.Condition{{Columns: []history.Column{"object; DROP TABLE versions"}, Value: "x"}}}); err == nil {
		t.Fatal("an unknown column was accepted")
	}
}
