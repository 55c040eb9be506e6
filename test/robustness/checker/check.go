package checker

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"
)

// Property is a guarantee a history must keep.
type Property string

const (
	// AckedWriteInEtcd: a write answered 2xx is in etcd, at the
	// resourceVersion the answer gave, as the kind of change it was.
	AckedWriteInEtcd Property = "acknowledged-write-in-etcd"
	// AckedWriteSeen: every watcher whose scope matches an acknowledged
	// write receives it (unless it relisted over it after a 410).
	AckedWriteSeen Property = "acknowledged-write-seen-by-every-matching-watcher"
	// WatchOrdered: a session's resourceVersions only go up.
	WatchOrdered Property = "watch-ordered"
	// WatchUnique: no revision is received twice by a watcher.
	WatchUnique Property = "watch-unique"
	// WatchNoGap: a session receives every matching revision after its
	// start, none skipped.
	WatchNoGap Property = "watch-no-gap"
	// WatchMatchesEtcd: every event received is a revision etcd made, of
	// that key, of that kind, in the watcher's scope.
	WatchMatchesEtcd Property = "watch-event-matches-etcd"
	// WatchResumable: each session resumes from the last resourceVersion
	// (event or bookmark) the watcher received, or from a relist after a
	// 410; what a session receives is checked from that point.
	WatchResumable Property = "watch-resumable"
	// BookmarkNotAhead: a bookmark's resourceVersion never passes a
	// matching revision not yet delivered.
	BookmarkNotAhead Property = "bookmark-not-ahead"
	// ConsistentListFresh: a consistent LIST is at least as new as every
	// write acknowledged before it started.
	ConsistentListFresh Property = "consistent-list-fresh"
	// ListSnapshot: a LIST (all pages) holds exactly etcd's state at its
	// resourceVersion, in its scope.
	ListSnapshot Property = "list-is-snapshot"
	// GoneOnlyWhenCompacted: 410 comes only for revisions etcd compacted.
	GoneOnlyWhenCompacted Property = "gone-only-when-compacted"
	// CleanRefusal: a refusal is a Status: 429 or 503 with Retry-After,
	// 410, 504 (404 and 409 are answers); never a 500, never a dropped
	// request while the replica lived (but at the request timeout, where
	// the generic server may abort the stream instead of writing its 504).
	CleanRefusal Property = "clean-refusal"
	// NoHang: no request takes longer than the request timeout (plus
	// HangSlack).
	NoHang Property = "no-hang"
	// HistoryExactlyOnce: Event history holds every version etcd held
	// (every PUT), once, and nothing else.
	HistoryExactlyOnce Property = "history-holds-every-version-exactly-once"
)

// HangSlack is what a request may take beyond the servers' request timeout:
// the timeout filter's own latency on a busy machine.
const HangSlack = 5 * time.Second

// maxPerProperty bounds the violations reported in full per property.
const maxPerProperty = 10

// Violation is one broken guarantee with the minimal history showing it.
type Violation struct {
	Property Property
	Summary  string
	History  []string
}

// Report is a checked history.
type Report struct {
	Seed        int64
	OpsByKind   map[string]int
	OpOutcomes  map[string]int // "create 201", "list 503"...
	Revisions   int
	WatchEvents int // events and bookmarks checked
	Bookmarks   int
	Sessions    int
	// Rewinds and Relists count the sessions that resumed from an earlier
	// resourceVersion, and those that followed a relist after a 410.
	Rewinds, Relists int
	// ExpiredDeletes counts the deletions no acknowledged delete made:
	// TTL expiries (and deletes whose answer was lost).
	ExpiredDeletes int
	// HistoryRecords counts the Event history records checked.
	HistoryRecords int
	FaultsByKind   map[string]int
	Violations     []Violation
	// Dropped counts violations beyond maxPerProperty, by property.
	Dropped map[Property]int
}

// OK is true when no property was broken.
func (r *Report) OK() bool { return len(r.Violations) == 0 }

// Broken lists the properties broken, sorted.
func (r *Report) Broken() []Property {
	set := map[Property]bool{}
	for _, v := range r.Violations {
		set[v.Property] = true
	}
	return slices.Sorted(maps.Keys(set))
}

func (r *Report) add(p Property, summary string, history ...string) {
	n := 0
	for _, v := range r.Violations {
		if v.Property == p {
			n++
		}
	}
	if n >= maxPerProperty {
		r.Dropped[p]++
		return
	}
	r.Violations = append(r.Violations, Violation{Property: p, Summary: summary, History: history})
}

func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "robustness report, seed %d\n", r.Seed)
	fmt.Fprintf(&b, "  operations by kind: %s\n", counts(r.OpsByKind))
	fmt.Fprintf(&b, "  outcomes: %s\n", counts(r.OpOutcomes))
	fmt.Fprintf(&b, "  etcd revisions: %d (deletions by TTL expiry or unacknowledged: %d); watch sessions: %d (rewound %d, after a relist %d); watch events checked: %d (bookmarks %d)\n",
		r.Revisions, r.ExpiredDeletes, r.Sessions, r.Rewinds, r.Relists, r.WatchEvents, r.Bookmarks)
	fmt.Fprintf(&b, "  history records checked: %d\n", r.HistoryRecords)
	fmt.Fprintf(&b, "  faults injected by kind: %s\n", counts(r.FaultsByKind))
	dropped := 0
	for _, n := range r.Dropped {
		dropped += n
	}
	fmt.Fprintf(&b, "  violations: %d\n", len(r.Violations)+dropped)
	for _, v := range r.Violations {
		fmt.Fprintf(&b, "  VIOLATION %s (seed %d): %s\n", v.Property, r.Seed, v.Summary)
		for _, h := range v.History {
			fmt.Fprintf(&b, "      %s\n", h)
		}
	}
	for _, p := range slices.Sorted(maps.Keys(r.Dropped)) {
		fmt.Fprintf(&b, "  ... and %d more %s violations\n", r.Dropped[p], p)
	}
	return b.String()
}

func counts(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return strings.Join(parts, " ")
}

// checker is one Check's indexes.
type checker struct {
	h      *History
	r      *Report
	byRev  map[int64]*Revision
	byKey  map[string][]*Revision
	ackRev map[int]*Revision // acknowledged write op ID -> its revision
}

// Check holds h to every property. The Events prefix must have been empty
// at h.BaseRev.
func Check(h *History) *Report {
	c := &checker{
		h: h,
		r: &Report{Seed: h.Seed, OpsByKind: map[string]int{}, OpOutcomes: map[string]int{},
			FaultsByKind: map[string]int{}, Dropped: map[Property]int{}, Revisions: len(h.Revisions)},
		byRev:  map[int64]*Revision{},
		byKey:  map[string][]*Revision{},
		ackRev: map[int]*Revision{},
	}
	for i := range h.Revisions {
		rev := &h.Revisions[i]
		c.byRev[rev.Rev] = rev
		c.byKey[rev.Key] = append(c.byKey[rev.Key], rev)
	}
	for _, f := range h.Faults {
		c.r.FaultsByKind[f.Kind]++
	}
	for _, op := range h.Ops {
		c.r.OpsByKind[string(op.Kind)]++
		c.r.OpOutcomes[fmt.Sprintf("%s %d", op.Kind, op.Code)]++
		c.checkRefusal(op.String(), op.Replica, op.Code, op.Reason, op.RetryAfter, op.Start, op.End, op.RV)
		if d := op.End.Sub(op.Start); d > h.RequestTimeout+HangSlack {
			c.r.add(NoHang, fmt.Sprintf("%s took %v, request timeout %v", op.Kind, d.Round(time.Millisecond), h.RequestTimeout), op.String())
		}
	}
	c.checkAckedWrites()
	acked := map[*Revision]bool{}
	for _, rev := range c.ackRev {
		acked[rev] = true
	}
	for i := range h.Revisions {
		if rev := &h.Revisions[i]; rev.Type == Delete && !acked[rev] {
			c.r.ExpiredDeletes++
		}
	}
	c.checkLists()
	for i := range h.Watchers {
		c.checkWatcher(&h.Watchers[i])
	}
	for i := range h.Histories {
		c.checkHistory(&h.Histories[i])
	}
	return c.r
}

func (c *checker) checkHistory(store *HistoryStore) {
	held := map[HistoryRecord]int{}
	for _, rec := range store.Records {
		held[rec]++
	}
	c.r.HistoryRecords += len(store.Records)
	where := fmt.Sprintf("history of replica %d (%d records)", store.Replica, len(store.Records))
	for _, rec := range store.Records {
		if rec.RV <= c.h.BaseRev {
			continue
		}
		if n := held[rec]; n > 1 {
			c.r.add(HistoryExactlyOnce, fmt.Sprintf("%s at rv %d held %d times", rec.Key, rec.RV, n), where)
			held[rec] = 1
		}
		if rev := c.byRev[rec.RV]; rev == nil || rev.Key != rec.Key || rev.Type != Put {
			got := "no change under the Events prefix"
			if rev != nil {
				got = rev.String()
			}
			c.r.add(HistoryExactlyOnce, fmt.Sprintf("%s at rv %d is held, but etcd has %s there", rec.Key, rec.RV, got), where)
		}
	}
	if store.Relisted {
		return
	}
	for _, rev := range c.h.Revisions {
		if rev.Type == Put && held[HistoryRecord{rev.Key, rev.Rev}] == 0 {
			c.r.add(HistoryExactlyOnce, fmt.Sprintf("version %s at rv %d is missing", rev.Key, rev.Rev), where, rev.String())
		}
	}
}

func acked(op *Op) bool { return op.Code >= 200 && op.Code < 300 }

// checkRefusal judges one answer that was not a success. rv is the
// resourceVersion a 410 refers to.
func (c *checker) checkRefusal(what string, replica, code int, reason, retryAfter string, start, end time.Time, rv int64) {
	switch {
	case code >= 200 && code < 300, code == 404, code == 409, code == 504:
	case code == 410:
		c.checkGone(rv, end, what)
	case code == 429 || code == 503:
		if retryAfter == "" {
			c.r.add(CleanRefusal, fmt.Sprintf("%d without Retry-After", code), what)
		}
	case code == 0:
		if c.replicaKilled(replica, start, end) {
			return
		}
		if end.Sub(start) >= c.h.RequestTimeout-time.Second {
			return
		}
		c.r.add(CleanRefusal, fmt.Sprintf("request failed without a Status after %v while replica %d was up", end.Sub(start).Round(time.Millisecond), replica), what)
	default:
		c.r.add(CleanRefusal, fmt.Sprintf("answer %d %s", code, reason), what)
	}
}

func (c *checker) replicaKilled(replica int, start, end time.Time) bool {
	for _, f := range c.h.Faults {
		if f.Kind == ReplicaKill && f.Replica == replica && !f.Start.After(end) && !f.End.Before(start) {
			return true
		}
	}
	return false
}

// checkGone: a 410 for resourceVersion rv at time at needs a compaction
// past rv asked for before at.
func (c *checker) checkGone(rv int64, at time.Time, what string) {
	for _, comp := range c.h.Compactions {
		if comp.Rev > rv && !comp.At.After(at) {
			return
		}
	}
	var history []string
	for _, comp := range c.h.Compactions {
		history = append(history, fmt.Sprintf("compaction to rev %d at %s", comp.Rev, comp.At.Format("15:04:05.000")))
	}
	c.r.add(GoneOnlyWhenCompacted, fmt.Sprintf("410 for rv %d, which etcd had not compacted", rv), append([]string{what}, history...)...)
}

func (c *checker) checkAckedWrites() {
	// The newest acknowledged PUT of each key so far, to find the revision
	// of a delete (whose answer carries none).
	ops := make([]*Op, 0, len(c.h.Ops))
	for i := range c.h.Ops {
		if op := &c.h.Ops[i]; op.Kind.isWrite() && acked(op) {
			ops = append(ops, op)
		}
	}
	sort.SliceStable(ops, func(i, j int) bool { return ops[i].End.Before(ops[j].End) })
	for _, op := range ops {
		if op.Kind == Del {
			continue
		}
		rev := c.byRev[op.RV]
		want := "a PUT of " + op.Key
		if op.Kind == Create {
			want = "a PUT creating " + op.Key
		}
		if rev == nil || rev.Key != op.Key || rev.Type != Put || rev.Created != (op.Kind == Create) {
			got := "no change under the Events prefix"
			if rev != nil {
				got = rev.String()
			}
			c.r.add(AckedWriteInEtcd, fmt.Sprintf("%s acknowledged at rv %d; etcd has %s there, not %s", op.Kind, op.RV, got, want), op.String())
			continue
		}
		c.ackRev[op.ID] = rev
	}
	putsByKey := map[string][]*Op{}
	for _, op := range ops {
		if op.Kind != Del {
			putsByKey[op.Key] = append(putsByKey[op.Key], op)
		}
	}
	for _, op := range ops {
		if op.Kind != Del {
			continue
		}
		// The delete happened after every write of the key acknowledged
		// before it was sent.
		var after int64
		for _, w := range putsByKey[op.Key] {
			if w.End.Before(op.Start) && w.RV > after {
				after = w.RV
			}
		}
		var found *Revision
		for _, rev := range c.byKey[op.Key] {
			if rev.Type == Delete && rev.Rev > after {
				found = rev
				break
			}
		}
		if found == nil {
			c.r.add(AckedWriteInEtcd, fmt.Sprintf("delete of %s acknowledged; etcd has no delete of it after rv %d", op.Key, after), op.String())
			continue
		}
		c.ackRev[op.ID] = found
	}
}

func (c *checker) checkLists() {
	var lists []*Op
	for i := range c.h.Ops {
		if op := &c.h.Ops[i]; op.Kind == List && op.Code == 200 {
			lists = append(lists, op)
		}
	}
	// The newest acknowledged revision by end time, for freshness.
	type ackAt struct {
		end time.Time
		rev int64
		op  *Op
	}
	var acks []ackAt
	for i := range c.h.Ops {
		op := &c.h.Ops[i]
		if rev := c.ackRev[op.ID]; rev != nil {
			acks = append(acks, ackAt{op.End, rev.Rev, op})
		}
	}
	sort.Slice(acks, func(i, j int) bool { return acks[i].end.Before(acks[j].end) })
	// newestBy[i] is the newest of acks[:i+1].
	newestBy := make([]*ackAt, len(acks))
	for i := range acks {
		newestBy[i] = &acks[i]
		if i > 0 && newestBy[i-1].rev > acks[i].rev {
			newestBy[i] = newestBy[i-1]
		}
	}
	for _, op := range lists {
		if !op.Consistent {
			continue
		}
		var newest *ackAt
		if n := sort.Search(len(acks), func(i int) bool { return !acks[i].end.Before(op.Start) }); n > 0 {
			newest = newestBy[n-1]
		}
		if newest != nil && op.RV < newest.rev {
			c.r.add(ConsistentListFresh, fmt.Sprintf("consistent LIST at rv %d started after a write acknowledged at rv %d", op.RV, newest.rev),
				newest.op.String(), c.byRev[newest.rev].String(), op.String())
		}
	}

	// Replay etcd's history once, answering the LISTs in resourceVersion
	// order.
	sort.SliceStable(lists, func(i, j int) bool { return lists[i].RV < lists[j].RV })
	state := map[string]*Revision{}
	next := 0
	for _, op := range lists {
		for next < len(c.h.Revisions) && c.h.Revisions[next].Rev <= op.RV {
			rev := &c.h.Revisions[next]
			if rev.Type == Delete {
				delete(state, rev.Key)
			} else {
				state[rev.Key] = rev
			}
			next++
		}
		var diffs, history []string
		for key, rev := range state {
			if !matches(op.Namespace, op.Selector, rev.Fields) {
				continue
			}
			got, ok := op.Items[key]
			switch {
			case !ok:
				diffs = append(diffs, fmt.Sprintf("%s missing", key))
				history = append(history, rev.String())
			case got != rev.Rev:
				diffs = append(diffs, fmt.Sprintf("%s at rv %d, etcd had rv %d", key, got, rev.Rev))
				history = append(history, rev.String())
			}
		}
		for key, got := range op.Items {
			if rev := state[key]; rev == nil || !matches(op.Namespace, op.Selector, rev.Fields) {
				diffs = append(diffs, fmt.Sprintf("%s at rv %d is not in etcd's state", key, got))
				if r := c.byRev[got]; r != nil {
					history = append(history, r.String())
				}
				history = append(history, c.lastChangeBefore(key, op.RV)...)
			}
		}
		if len(diffs) > 0 {
			sort.Strings(diffs)
			sort.Strings(history)
			if len(diffs) > 5 {
				diffs = append(diffs[:5], fmt.Sprintf("and %d more", len(diffs)-5))
			}
			if len(history) > 10 {
				history = history[:10]
			}
			c.r.add(ListSnapshot, fmt.Sprintf("LIST at rv %d is not etcd's state there: %s", op.RV, strings.Join(diffs, "; ")),
				append([]string{op.String()}, history...)...)
		}
	}
}

func (c *checker) lastChangeBefore(key string, rv int64) []string {
	var last *Revision
	for _, rev := range c.byKey[key] {
		if rev.Rev <= rv {
			last = rev
		}
	}
	if last == nil {
		return nil
	}
	return []string{last.String()}
}

func eventTypeOf(rev *Revision) EventType {
	switch {
	case rev.Type == Delete:
		return Deleted
	case rev.Created:
		return Added
	}
	return Modified
}

func (c *checker) checkWatcher(w *Watcher) {
	var expected []*Revision
	for i := range c.h.Revisions {
		if rev := &c.h.Revisions[i]; matches(w.Namespace, w.Selector, rev.Fields) {
			expected = append(expected, rev)
		}
	}
	received := map[int64]int{} // rev -> session that received it
	type gap struct{ from, to int64 }
	var relistGaps []gap
	var pos int64
	// positions are the resourceVersions the watcher may resume from: its
	// starts and everything it received. highWater is the newest it
	// reached; revisions up to redeliverUpTo are delivered again after a
	// rewind.
	positions := map[int64]bool{}
	var highWater, redeliverUpTo int64
	for si := range w.Sessions {
		s := &w.Sessions[si]
		c.r.Sessions++
		if s.Rewound {
			c.r.Rewinds++
		}
		if s.Relisted {
			c.r.Relists++
		}
		c.r.OpOutcomes[fmt.Sprintf("watch %d", s.Code)]++
		header := w.sessionHeader(si)
		if si > 0 {
			prev := &w.Sessions[si-1]
			switch {
			case s.Relisted && !endedGone(prev):
				c.r.add(WatchResumable, "relisted although the previous session did not end with 410", w.sessionHeader(si-1), header)
			case s.Relisted:
				relistGaps = append(relistGaps, gap{pos, s.StartRV})
			case s.Rewound:
				if !positions[s.StartRV] {
					c.r.add(WatchResumable, fmt.Sprintf("rewound to rv %d, which the watcher never received", s.StartRV),
						w.sessionHeader(si-1), header)
				}
				redeliverUpTo = max(redeliverUpTo, highWater)
			case s.StartRV != pos:
				c.r.add(WatchResumable, fmt.Sprintf("resumed from rv %d, but the last resourceVersion received was %d", s.StartRV, pos),
					w.sessionHeader(si-1), header)
			}
		}
		pos = s.StartRV
		positions[pos] = true
		if s.Code != 200 {
			c.checkRefusal(header, s.Replica, s.Code, s.Reason, s.RetryAfter, s.Start, s.End, s.StartRV)
			continue
		}
		j := sort.Search(len(expected), func(i int) bool { return expected[i].Rev > pos })
		// recent holds the last few records of the session, for a
		// violation's history.
		recent := []string{header}
		note := func(s string) {
			recent = append(recent, s)
			if len(recent) > 5 {
				recent = append(recent[:1], recent[2:]...)
			}
		}
		for _, ev := range s.Events {
			c.r.WatchEvents++
			evs := "received " + ev.String()
			switch ev.Type {
			case Bookmark:
				c.r.Bookmarks++
				if ev.RV < pos {
					c.r.add(WatchOrdered, fmt.Sprintf("bookmark at rv %d after rv %d", ev.RV, pos), append(recent, evs)...)
					break
				}
				if j < len(expected) && expected[j].Rev <= ev.RV {
					c.r.add(BookmarkNotAhead, fmt.Sprintf("bookmark at rv %d before %s was delivered", ev.RV, expected[j]),
						append(append(recent, evs), "not yet delivered: "+expected[j].String())...)
					for j < len(expected) && expected[j].Rev <= ev.RV {
						j++
					}
				}
				pos = ev.RV
			case Error:
				c.r.OpOutcomes[fmt.Sprintf("watch-error %d", ev.Code)]++
				c.checkRefusal(header+" "+evs, s.Replica, ev.Code, ev.Reason, "-", s.Start, ev.At, pos)
			default:
				if ev.RV <= pos {
					if _, dup := received[ev.RV]; dup {
						c.r.add(WatchUnique, fmt.Sprintf("rv %d received again", ev.RV), append(recent, evs)...)
					} else {
						c.r.add(WatchOrdered, fmt.Sprintf("rv %d after rv %d", ev.RV, pos), append(recent, evs)...)
					}
					break
				}
				rev := c.byRev[ev.RV]
				if rev == nil || rev.Key != ev.Key || eventTypeOf(rev) != ev.Type || !matches(w.Namespace, w.Selector, rev.Fields) {
					etcd := "etcd made no change under the Events prefix at that revision"
					if rev != nil {
						etcd = rev.String()
					}
					c.r.add(WatchMatchesEtcd, fmt.Sprintf("%s is not what etcd did", ev), append(recent, evs, etcd)...)
				} else if j < len(expected) && expected[j].Rev < ev.RV {
					k := j
					var skipped []string
					for k < len(expected) && expected[k].Rev < ev.RV {
						skipped = append(skipped, "skipped: "+expected[k].String())
						k++
					}
					if len(skipped) > 5 {
						skipped = append(skipped[:5], fmt.Sprintf("skipped: and %d more", len(skipped)-5))
					}
					c.r.add(WatchNoGap, fmt.Sprintf("%s came before %d earlier matching revision(s), first %d", ev, k-j, expected[j].Rev),
						append(append(recent, evs), skipped...)...)
				}
				for j < len(expected) && expected[j].Rev <= ev.RV {
					j++
				}
				pos = ev.RV
				if rev == nil || rev.Key != ev.Key || eventTypeOf(rev) != ev.Type {
					// Not what etcd did: the revision was not received.
					break
				}
				if prevSession, dup := received[ev.RV]; dup && ev.RV > redeliverUpTo {
					c.r.add(WatchUnique, fmt.Sprintf("rv %d received again, first in session %d", ev.RV, prevSession), append(recent, evs)...)
				}
				received[ev.RV] = si
			}
			note(evs)
			if ev.Type != Error {
				positions[pos] = true
				highWater = max(highWater, pos)
			}
		}
	}
	if len(w.Sessions) == 0 {
		return
	}
	start := w.Sessions[0].StartRV
	for i := range c.h.Ops {
		op := &c.h.Ops[i]
		rev := c.ackRev[op.ID]
		if rev == nil || rev.Rev <= start || !matches(w.Namespace, w.Selector, rev.Fields) {
			continue
		}
		if _, ok := received[rev.Rev]; ok {
			continue
		}
		excused := false
		for _, g := range relistGaps {
			if rev.Rev > g.from && rev.Rev <= g.to {
				excused = true
			}
		}
		if !excused {
			c.r.add(AckedWriteSeen, fmt.Sprintf("watcher %s never received rv %d; its last resourceVersion was %d", w.Name, rev.Rev, pos),
				op.String(), rev.String(), w.sessionHeader(len(w.Sessions)-1))
		}
	}
}

func endedGone(s *Session) bool {
	if s.Code == 410 {
		return true
	}
	n := len(s.Events)
	return n > 0 && s.Events[n-1].Type == Error && s.Events[n-1].Code == 410
}
