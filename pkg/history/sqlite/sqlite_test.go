package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/eventapiserver/event-apiserver/pkg/history"
)

func openTest(t *testing.T) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "history", "history.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

var base = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

func version(uid string, rev int64, regarding string, minutes int) history.Version {
	return history.Version{
		UID: uid, Revision: rev, Namespace: "ns", Name: "ev-" + uid,
		RegardingUID: regarding, RegardingName: "pod-" + regarding, RegardingKind: "Pod",
		Reason: "Started", Type: "Normal", ReportingController: "kubelet",
		LastSeen: base.Add(time.Duration(minutes) * time.Minute), ObservedAt: base.Add(time.Duration(rev) * time.Second),
		Object: []byte(fmt.Sprintf("object %s/%d", uid, rev)),
	}
}

func revisions(records []history.Record) []int64 {
	var out []int64
	for _, r := range records {
		out = append(out, r.Revision)
	}
	return out
}

func TestWriteIsIdempotentAndProgressNeverMovesBack(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	batch := history.Batch{Source: "src", Revision: 10, Versions: []history.Version{version("a", 5, "p1", 1), version("a", 7, "p1", 2)}}
	for i := 0; i < 2; i++ {
		if err := s.Write(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Write(ctx, history.Batch{Source: "src", Revision: 8, Deletions: []history.Deletion{{UID: "a", Revision: 9, At: base}}}); err != nil {
		t.Fatal(err)
	}
	rev, ok, err := s.Progress(ctx, "src")
	if err != nil || !ok || rev != 10 {
		t.Fatalf("progress = %d %v %v, want 10", rev, ok, err)
	}
	if _, ok, _ := s.Progress(ctx, "other"); ok {
		t.Fatal("progress for an unknown source")
	}
	got, err := s.List(ctx, history.Query{})
	if err != nil {
		t.Fatal(err)
	}
	if want := []int64{7, 5}; fmt.Sprint(revisions(got)) != fmt.Sprint(want) {
		t.Fatalf("revisions = %v, want %v", revisions(got), want)
	}
	for _, r := range got {
		if r.DeletedAt == nil || !r.DeletedAt.Equal(base) || r.DeletedRevision != 9 {
			t.Errorf("revision %d: deleted %v at %d, want %v at 9", r.Revision, r.DeletedAt, r.DeletedRevision, base)
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

func TestList(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	var versions []history.Version
	for i := int64(1); i <= 6; i++ {
		regarding := "p1"
		if i%2 == 0 {
			regarding = "p2"
		}
		versions = append(versions, version(fmt.Sprint("u", i), i, regarding, int(i)))
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
		{"window", history.Query{Since: base.Add(2 * time.Minute), Until: base.Add(5 * time.Minute)}, []int64{4, 3, 2}},
		{"limit", history.Query{Limit: 2}, []int64{6, 5}},
		{"after", history.Query{After: &history.Cursor{LastSeen: base.Add(4 * time.Minute), Revision: 4}, Limit: 2}, []int64{3, 2}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.List(ctx, tc.query)
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(revisions(got)) != fmt.Sprint(tc.want) {
				t.Fatalf("revisions = %v, want %v", revisions(got), tc.want)
			}
		})
	}
	if _, err := s.List(ctx, history.Query{Conditions: []history.Condition{{Columns: []history.Column{"object; DROP TABLE versions"}, Value: "x"}}}); err == nil {
		t.Fatal("an unknown column was accepted")
	}
}

func TestRetain(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	var versions []history.Version
	for i := int64(1); i <= 50; i++ {
		v := version(fmt.Sprint("u", i), i, "p", int(i))
		v.Object = make([]byte, 4096)
		versions = append(versions, v)
	}
	if err := s.Write(ctx, history.Batch{Versions: versions, Deletions: []history.Deletion{{UID: "u1", Revision: 51, At: base.Add(time.Second)}}}); err != nil {
		t.Fatal(err)
	}
	// Observed at base+rev seconds: a cutoff at base+11s removes revisions 1-10.
	n, err := s.Retain(ctx, base.Add(11*time.Second), 0, 3)
	if err != nil || n != 10 {
		t.Fatalf("age retention deleted %d (%v), want 10", n, err)
	}
	before, _ := s.Stats(ctx)
	if before.Rows != 40 {
		t.Fatalf("rows = %d, want 40", before.Rows)
	}
	var deletions int
	if err := s.db.QueryRow(`SELECT count(*) FROM deletions`).Scan(&deletions); err != nil || deletions != 0 {
		t.Fatalf("deletions left = %d (%v): a deletion older than every version must go", deletions, err)
	}
	limit := before.Bytes / 2
	if _, err := s.Retain(ctx, time.Time{}, limit, 5); err != nil {
		t.Fatal(err)
	}
	after, _ := s.Stats(ctx)
	if after.Bytes > limit || after.Rows == 0 || after.Rows >= 40 {
		t.Fatalf("after size retention: %+v, limit %d", after, limit)
	}
	got, _ := s.List(ctx, history.Query{Limit: 1})
	if len(got) != 1 || got[0].Revision != 50 {
		t.Fatalf("size retention must drop the oldest first, newest left: %v", revisions(got))
	}
}
