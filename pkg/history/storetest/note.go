package storetest

import (
	"context"
	"fmt"
	"testing"

	"github.com/eventapiserver/event-apiserver/pkg/history"
)

// testNote: the note column is stored, read back and matched exactly, with
// = and !=, one value or a set; a part of a note matches nothing.
func testNote(t *testing.T, s history.Store) {
	ctx := context.Background()
	notes := []string{"Back-off restarting failed container web", "Started container web", ""}
	var versions []history.Version
	for i, note := range notes {
		v := Version(fmt.Sprint("u", i), int64(i+1), "p", i)
		v.Note = note
		versions = append(versions, v)
	}
	if err := s.Write(ctx, history.Batch{Versions: versions}); err != nil {
		t.Fatal(err)
	}
	note := []history.Column{history.ColumnNote}
	for _, tc := range []struct {
		name      string
		condition history.Condition
		want      []int64
	}{
		{"equal", history.Condition{Columns: note, Value: notes[0]}, []int64{1}},
		{"not equal", history.Condition{Columns: note, Value: notes[0], Not: true}, []int64{3, 2}},
		{"empty", history.Condition{Columns: note, Value: ""}, []int64{3}},
		{"in", history.Condition{Columns: note, Value: notes[0], Values: []string{notes[0], notes[1]}}, []int64{2, 1}},
		{"notin", history.Condition{Columns: note, Value: notes[0], Values: []string{notes[0], notes[1]}, Not: true}, []int64{3}},
		{"a part", history.Condition{Columns: note, Value: "Back-off"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.List(ctx, history.Query{Conditions: []history.Condition{tc.condition}})
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(Revisions(got)) != fmt.Sprint(tc.want) {
				t.Fatalf("revisions = %v, want %v", Revisions(got), tc.want)
			}
			changes, err := s.Changes(ctx, history.ChangeQuery{Through: 1 << 40, Conditions: []history.Condition{tc.condition}})
			if err != nil || len(changes) != len(tc.want) {
				t.Fatalf("%d changes (%v), want %d", len(changes), err, len(tc.want))
			}
		})
	}
	r, err := s.Get(ctx, "ns", "ev-u0", 1)
	if err != nil || r.Note != notes[0] {
		t.Fatalf("Get: note %q (%v), want %q", r.Note, err, notes[0])
	}
}
