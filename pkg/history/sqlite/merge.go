package sqlite

import (
	"context"
	"database/sql"
	"sync/atomic"

	"k8s.io/klog/v2"
)

// FTS5 keeps the note's search index (versions_note_search) as segments
// in levels, and by default merges them inside the statement that adds
// one: an amount of work proportional to what it wrote (automerge), and,
// when a level holds crisismerge segments (16), that whole level at once,
// cascading into the next level if it fills in turn. Capture's writes
// added a segment for every multi-row INSERT (indexNotesAfter says why),
// so levels filled and the whole-level merges landed in capture's batches: at 10^7
// versions one of them rewrote 2.5 GB of index inside a batch, and under
// four clients counting, capture fell minutes behind (docs/benchmarks.md,
// "Capture under query load"). Migration 12 turns automerge off and
// raises crisismerge to searchCrisisSegments; the searchMerger below does
// the merging instead, in steps of bounded work and transactions of their
// own, between the writes.
const (
	// searchMergePages is one step's work: FTS5's 'merge' command writes
	// at most this many pages of merged segments (4 KiB each), reading and
	// deleting about as many of the segments it merges. A write interrupts
	// a step, which then starts over, so a step must fit the gaps between
	// capture's batches. Steps of 256 pages, which writes then waited for,
	// held capture up: under four clients counting at 10^7 versions (their
	// reads keep the index's pages out of the OS's cache) every goroutine
	// dump taken found capture's write waiting behind one.
	searchMergePages = 32
	// searchCrisisSegments is how many segments a level holds before FTS5
	// merges it inside a write after all: the merger merges a level once
	// it holds 4 (FTS5's usermerge), so this is reached only if the merges
	// fall that far behind. Each segment is a
	// lookup more for a search's every trigram, so it is not FTS5's
	// maximum (1999).
	searchCrisisSegments = 64
)

// searchMerger runs the search index's merges while no write waits: a
// write that comes during a step interrupts it (the step's transaction
// rolls back, its work lost), so capture waits for a merge only until the
// step notices, at its next page written; an idle store is merged until
// nothing is left to merge. Under writes that leave
// no gap long enough for a step, the merges wait, and level 0 grows until
// searchCrisisSegments, where FTS5 merges it inside a write: tens of
// capture's small segments, not a level of the whole index.
type searchMerger struct {
	db *sql.DB
	// writing counts the writes that hold or wait for db.
	writing atomic.Int32
	// interrupt cancels the step under way, if any.
	interrupt atomic.Pointer[context.CancelFunc]
	// kick wakes the merger: a write ended.
	kick chan struct{}
	stop context.CancelFunc
	done chan struct{}
}

func newSearchMerger(db *sql.DB) *searchMerger {
	return &searchMerger{db: db, kick: make(chan struct{}, 1)}
}

// start runs the merges until close, beginning with whatever the file
// holds unmerged (a file written before migration 12, or by a server
// stopped mid-merge).
func (m *searchMerger) start() {
	ctx, stop := context.WithCancel(context.Background())
	m.stop, m.done = stop, make(chan struct{})
	m.wake()
	go m.run(ctx)
}

// close stops the merges and waits for the step under way: it comes
// before the connection's Close.
func (m *searchMerger) close() {
	if m.stop != nil {
		m.stop()
		<-m.done
	}
}

// writeBegins and writeEnded bracket every write on db. A write counts
// itself before it looks for a step to interrupt, and the merger publishes
// a step's interrupt before it looks for writes: one of them sees the
// other, so no step starts unseen by a write that waits.
func (m *searchMerger) writeBegins() {
	m.writing.Add(1)
	if interrupt := m.interrupt.Load(); interrupt != nil {
		(*interrupt)()
	}
}

func (m *searchMerger) writeEnded() {
	m.writing.Add(-1)
	m.wake()
}

func (m *searchMerger) wake() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

func (m *searchMerger) run(ctx context.Context) {
	defer close(m.done)
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.kick:
		}
		for m.stepWhileNoWrite(ctx) {
		}
	}
}

// stepWhileNoWrite runs one step unless a write waits; it reports whether
// the step merged something and another may follow.
func (m *searchMerger) stepWhileNoWrite(ctx context.Context) bool {
	stepCtx, interrupt := context.WithCancel(ctx)
	defer interrupt()
	m.interrupt.Store(&interrupt)
	defer m.interrupt.Store(nil)
	if m.writing.Load() > 0 {
		return false
	}
	merged, err := m.step(stepCtx)
	if err != nil {
		// An interrupted step waits for the write's end (its kick).
		if stepCtx.Err() == nil {
			klog.ErrorS(err, "Merging the history's text search index; the next write retries")
		}
		return false
	}
	return merged
}

// step does one bounded merge; it reports whether there was anything to
// merge. FTS5's documentation: a 'merge' that did nothing changes fewer
// than two rows, as total_changes() on its connection counts them.
func (m *searchMerger) step(ctx context.Context) (bool, error) {
	conn, err := m.db.Conn(ctx)
	if err != nil {
		return false, err
	}
	defer conn.Close()
	var before, after int64
	if err := conn.QueryRowContext(ctx, `SELECT total_changes()`).Scan(&before); err != nil {
		return false, err
	}
	if _, err := conn.ExecContext(ctx, `INSERT INTO versions_note_search (versions_note_search, rank) VALUES ('merge', ?)`, searchMergePages); err != nil {
		return false, err
	}
	if err := conn.QueryRowContext(ctx, `SELECT total_changes()`).Scan(&after); err != nil {
		return false, err
	}
	return after-before >= 2, nil
}
