package storetest

import (
	"context"
	"fmt"
	"math/rand"
	"sync"
	"testing"
	"time"

	"github.com/eventapiserver/event-apiserver/pkg/history"
)

// runFeed is the feed's part of the suite.
func runFeed(t *testing.T, open func(t *testing.T) history.Store) {
	t.Run("feed order and ends", func(t *testing.T) { testFeed(t, open(t)) })
	t.Run("feed under concurrent writers", func(t *testing.T) { testFeedConcurrent(t, open(t)) })
	t.Run("feed of a batch repeating itself", func(t *testing.T) { testFeedRepeats(t, open(t)) })
	t.Run("feed floor after retention", func(t *testing.T) { testFeedRetention(t, open(t)) })
	t.Run("end positions in lists", func(t *testing.T) { testEndPositions(t, open(t)) })
}

// Change is how the suite writes a change: uid@revision, + for an end.
func changeKey(c history.Change) string {
	if c.Ended {
		return fmt.Sprintf("end %s@%d", c.UID, c.Revision)
	}
	return fmt.Sprintf("%s@%d", c.UID, c.Revision)
}

// readFeed reads every change after `after` through the feed's position,
// in pages of page, and returns them and the position read through.
func readFeed(t *testing.T, s history.Store, after int64, page int, q history.ChangeQuery) ([]history.Change, int64) {
	t.Helper()
	ctx := context.Background()
	state, err := s.Feed(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []history.Change
	q.After, q.Through, q.Limit = after, state.Position, page
	for {
		changes, err := s.Changes(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range changes {
			if c.Position <= q.After || c.Position > q.Through {
				t.Fatalf("change %s at %d outside (%d, %d]", changeKey(c), c.Position, q.After, q.Through)
			}
			q.After = c.Position
		}
		out = append(out, changes...)
		if len(changes) < page {
			return out, state.Position
		}
	}
}

func keys(changes []history.Change) []string {
	out := make([]string, 0, len(changes))
	for _, c := range changes {
		out = append(out, changeKey(c))
	}
	return out
}

// testFeed: the feed is in the order versions and ends were first stored,
// whatever their revisions; a version stored again is no change; an end is
// one change per version stored before it, each at its own position, oldest
// revision first, so resuming inside an end misses and repeats nothing; a
// version stored after its Event's end carries the end; lists read as of a
// position, each record at the position of its last change.
func testFeed(t *testing.T, s history.Store) {
	ctx := context.Background()
	start, err := s.Feed(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if start.Position != history.FeedOrigin || start.Floor != history.FeedOrigin {
		t.Fatalf("an empty store's feed is at %+v, want both at %d", start, history.FeedOrigin)
	}
	write := func(b history.Batch) int64 { return writeBatch(t, s, b) }
	// A slower writer stores revision 5 after another stored 10.
	first := write(history.Batch{Versions: []history.Version{Version("b", 10, "p1", 1), Version("a", 3, "p2", 1)}})
	write(history.Batch{Versions: []history.Version{Version("a", 5, "p2", 2), Version("b", 10, "p1", 1)}})
	write(history.Batch{Deletions: []history.Deletion{{UID: "a", Revision: 12, At: Base}}})
	// c's end is stored before its version: the version carries it.
	write(history.Batch{Deletions: []history.Deletion{{UID: "c", Revision: 9, At: Base}}})
	last := write(history.Batch{Versions: []history.Version{Version("c", 8, "p1", 3)}, Deletions: []history.Deletion{{UID: "a", Revision: 12, At: Base}}})

	got, through := readFeed(t, s, history.FeedOrigin, 2, history.ChangeQuery{})
	want := []string{"b@10", "a@3", "a@5", "end a@3", "end a@5", "c@8"}
	if fmt.Sprint(keys(got)) != fmt.Sprint(want) {
		t.Fatalf("feed = %v, want %v", keys(got), want)
	}
	if through != last {
		t.Fatalf("read through %d, the feed is at %d", through, last)
	}
	for _, c := range got {
		if ended := c.DeletedAt != nil; ended != (c.Ended || c.UID == "c") {
			t.Errorf("%s: deleted %v", changeKey(c), c.DeletedAt)
		}
	}
	// Resuming after any change gives exactly the rest.
	for i, c := range got {
		rest, _ := readFeed(t, s, c.Position, 100, history.ChangeQuery{})
		if fmt.Sprint(keys(rest)) != fmt.Sprint(want[i+1:]) {
			t.Errorf("after %s: %v, want %v", changeKey(c), keys(rest), want[i+1:])
		}
	}
	// Filters apply to the change's record.
	p1, _ := readFeed(t, s, history.FeedOrigin, 100, history.ChangeQuery{Conditions: []history.Condition{{Columns: []history.Column{history.ColumnRegardingUID}, Value: "p2"}}})
	if want := []string{"a@3", "a@5", "end a@3", "end a@5"}; fmt.Sprint(keys(p1)) != fmt.Sprint(want) {
		t.Errorf("regarding p2: %v, want %v", keys(p1), want)
	}
	window, _ := readFeed(t, s, history.FeedOrigin, 100, history.ChangeQuery{Since: Base.Add(2 * time.Minute)})
	if want := []string{"a@5", "end a@5", "c@8"}; fmt.Sprint(keys(window)) != fmt.Sprint(want) {
		t.Errorf("since +2m: %v, want %v", keys(window), want)
	}
	// A list as of the first batch sees its two versions, live.
	asOf, err := s.List(ctx, history.Query{Through: first})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(Revisions(asOf)) != "[10 3]" {
		t.Errorf("list as of %d: %v, want [10 3]", first, Revisions(asOf))
	}
	for _, r := range asOf {
		if r.DeletedAt != nil || r.Position > first {
			t.Errorf("list as of %d: %s@%d deleted %v at position %d", first, r.UID, r.Revision, r.DeletedAt, r.Position)
		}
	}
	all, err := s.List(ctx, history.Query{})
	if err != nil {
		t.Fatal(err)
	}
	// Each version's record is at its own end's position, as the feed
	// delivered it: a list and a watcher's store agree.
	endOf := map[int64]int64{}
	for _, c := range got {
		if c.Ended && c.UID == "a" {
			endOf[c.Revision] = c.Position
		}
	}
	if got[3].Position == got[4].Position {
		t.Errorf("a's two ends share position %d", got[3].Position)
	}
	for _, r := range all {
		if r.UID == "a" && (r.DeletedAt == nil || r.Position != endOf[r.Revision]) {
			t.Errorf("a@%d: deleted %v at position %d, want its end's %d", r.Revision, r.DeletedAt, r.Position, endOf[r.Revision])
		}
	}
}

// testFeedConcurrent: writers storing overlapping batches at once (as
// replicas do) while a reader follows the feed; the reader gets every
// version and end exactly once, and in the order a reader from the start
// finds once they are done: nothing is committed behind a position read.
func testFeedConcurrent(t *testing.T, s history.Store) {
	ctx := context.Background()
	const writers, perBatch = 4, 20
	batches := 30
	if testing.Short() {
		// The unit tier runs it under the race detector, where each of
		// the follower's reads of SQLite (its translated C instrumented)
		// cost about 50 ms of CPU: a third of the batches, as many writers
		// taking turns.
		batches = 10
	}
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(w)))
			for b := 0; b < batches; b++ {
				var batch history.Batch
				for i := 0; i < perBatch; i++ {
					// Every writer sees the same versions, at its own pace.
					n := rng.Intn(batches * perBatch)
					batch.Versions = append(batch.Versions, Version(fmt.Sprint("u", n/3), int64(n+1), "p", n%60))
					if n%3 == 2 {
						batch.Deletions = append(batch.Deletions, history.Deletion{UID: fmt.Sprint("u", n/3), Revision: int64(n + 2), At: Base})
					}
				}
				if err := s.Write(ctx, batch); err != nil {
					errs <- err
					return
				}
			}
		}(w)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	var followed []history.Change
	cursor := int64(history.FeedOrigin)
	for finished := false; !finished; {
		select {
		case <-done:
			finished = true
		default:
		}
		changes, through := readFeed(t, s, cursor, 7, history.ChangeQuery{})
		followed = append(followed, changes...)
		cursor = through
	}
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	whole, _ := readFeed(t, s, history.FeedOrigin, 1000, history.ChangeQuery{})
	if fmt.Sprint(keys(followed)) != fmt.Sprint(keys(whole)) {
		t.Fatalf("a follower read %d changes, a reader from the start %d: they differ", len(followed), len(whole))
	}
	seen := map[string]bool{}
	for _, k := range keys(whole) {
		if seen[k] {
			t.Errorf("%s twice in the feed", k)
		}
		seen[k] = true
	}
	all, err := s.List(ctx, history.Query{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range all {
		if !seen[fmt.Sprintf("%s@%d", r.UID, r.Revision)] {
			t.Errorf("%s@%d is stored but never was in the feed", r.UID, r.Revision)
		}
	}
	t.Logf("%d changes, %d versions stored", len(whole), len(all))
}

// testFeedRepeats: a batch holding a version twice (a capture's relist
// overlapping its watch) stores its first copy, at the first copy's
// position, and an end twice its first; the feed holds each once, the
// positions offered to the copies are gaps, and the next batch's changes
// come after them.
func testFeedRepeats(t *testing.T, s history.Store) {
	ctx := context.Background()
	again := Version("a", 3, "p1", 1)
	again.Object = []byte("a later copy")
	batch := history.Batch{
		Versions:  []history.Version{Version("a", 3, "p1", 1), Version("b", 4, "p1", 1), again, Version("a", 5, "p1", 2)},
		Deletions: []history.Deletion{{UID: "b", Revision: 6, At: Base}, {UID: "b", Revision: 7, At: Base.Add(time.Minute)}},
	}
	if err := s.Write(ctx, batch); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(ctx, history.Batch{Versions: []history.Version{Version("c", 8, "p1", 3)}}); err != nil {
		t.Fatal(err)
	}
	got, through := readFeed(t, s, history.FeedOrigin, 100, history.ChangeQuery{})
	want := []string{"a@3", "b@4", "a@5", "end b@4", "c@8"}
	if fmt.Sprint(keys(got)) != fmt.Sprint(want) {
		t.Fatalf("feed = %v, want %v", keys(got), want)
	}
	// Positions from the origin: a@3 1, b@4 2, the copy's 3 a gap, a@5 4;
	// b's ends a block of one each (one version of b), 5 kept, 6 a gap;
	// c@8 the next batch's first.
	positions := []int64{1, 2, 4, 5, 7}
	for i, c := range got {
		if c.Position != history.FeedOrigin+positions[i] {
			t.Errorf("%s at position %d, want %d", changeKey(c), c.Position, history.FeedOrigin+positions[i])
		}
	}
	if through != history.FeedOrigin+7 {
		t.Errorf("the feed's head is at %d, want %d", through, history.FeedOrigin+7)
	}
	r, err := s.Get(ctx, "ns", "ev-a", 3)
	if err != nil || string(r.Object) != "object a/3" {
		t.Errorf("a@3 holds %q (%v), want its first copy's object", r.Object, err)
	}
	b, err := s.Get(ctx, "ns", "ev-b", 4)
	if err != nil || b.DeletedRevision != 6 || b.DeletedAt == nil || !b.DeletedAt.Equal(Base) {
		t.Errorf("b@4 ended at %d %v (%v), want the first end's, 6 at %v", b.DeletedRevision, b.DeletedAt, err, Base)
	}
}

// testFeedRetention: retention raises the floor to the newest position it
// removed, and the feed after the floor is intact.
func testFeedRetention(t *testing.T, s history.Store) {
	ctx := context.Background()
	// Observed Base+rev seconds; last seen on days 0..3 (PostgreSQL
	// retains by day of last occurrence, SQLite by observation).
	var versions []history.Version
	for i := 0; i < 8; i++ {
		v := Version(fmt.Sprint("u", i), int64(i+1), "p", 0)
		v.LastSeen = Base.Add(time.Duration(i/2) * 24 * time.Hour)
		v.ObservedAt = Base.Add(time.Duration(i/2) * 24 * time.Hour)
		versions = append(versions, v)
		if err := s.Write(ctx, history.Batch{Versions: versions[i : i+1]}); err != nil {
			t.Fatal(err)
		}
	}
	before, _ := readFeed(t, s, history.FeedOrigin, 100, history.ChangeQuery{})
	if len(before) != 8 {
		t.Fatalf("%d changes, want 8", len(before))
	}
	// Removes days 0 and 1: u0..u3.
	cutoff := time.Unix(0, (Base.Add(48*time.Hour).UnixNano()/int64(24*time.Hour))*int64(24*time.Hour)).UTC()
	if _, err := s.Retain(ctx, cutoff, 0, 2); err != nil {
		t.Fatal(err)
	}
	state, err := s.Feed(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if state.Floor != before[3].Position {
		t.Fatalf("floor %d, want %d (the position of u3, the newest removed)", state.Floor, before[3].Position)
	}
	after, _ := readFeed(t, s, state.Floor, 100, history.ChangeQuery{})
	if want := keys(before[4:]); fmt.Sprint(keys(after)) != fmt.Sprint(want) {
		t.Fatalf("after the floor: %v, want %v", keys(after), want)
	}
}

// writeBatch writes b into s and returns the feed's head after it.
func writeBatch(t *testing.T, s history.Store, b history.Batch) int64 {
	t.Helper()
	ctx := context.Background()
	if err := s.Write(ctx, b); err != nil {
		t.Fatal(err)
	}
	f, err := s.Feed(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return f.Position
}
