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
	writeColumn(t, s, notes, func(v *history.Version, value string) { v.Note = value })
	note := []history.Column{history.ColumnNote}
	checkConditions(t, s, []columnCase{
		{"equal", history.Condition{Columns: note, Value: notes[0]}, []int64{1}},
		{"not equal", history.Condition{Columns: note, Value: notes[0], Not: true}, []int64{3, 2}},
		{"empty", history.Condition{Columns: note, Value: ""}, []int64{3}},
		{"in", history.Condition{Columns: note, Value: notes[0], Values: []string{notes[0], notes[1]}}, []int64{2, 1}},
		{"notin", history.Condition{Columns: note, Value: notes[0], Values: []string{notes[0], notes[1]}, Not: true}, []int64{3}},
		{"a part", history.Condition{Columns: note, Value: "Back-off"}, nil},
	})
	r, err := s.Get(ctx, "ns", "ev-u0", 1)
	if err != nil || r.Note != notes[0] {
		t.Fatalf("Get: note %q (%v), want %q", r.Note, err, notes[0])
	}
}

// columnCase is one condition on a column and the revisions a list
// returns for it, newest first.
type columnCase struct {
	name      string
	condition history.Condition
	want      []int64
}

// writeColumn writes one version per value (uid u<i>, revision i+1), the
// column set through set.
func writeColumn(t *testing.T, s history.Store, values []string, set func(*history.Version, string)) {
	t.Helper()
	var versions []history.Version
	for i, value := range values {
		v := Version(fmt.Sprint("u", i), int64(i+1), "p", i)
		set(&v, value)
		versions = append(versions, v)
	}
	if err := s.Write(context.Background(), history.Batch{Versions: versions}); err != nil {
		t.Fatal(err)
	}
}

// checkConditions lists each case's condition and reads the feed with it.
func checkConditions(t *testing.T, s history.Store, cases []columnCase) {
	ctx := context.Background()
	for _, tc := range cases {
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
}
