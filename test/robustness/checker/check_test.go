package checker

import (
	"slices"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 28, 6, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func fields(ns, typ string) map[string]string {
	return map[string]string{"metadata.namespace": ns, "type": typ, "reason": "Test"}
}

// validHistory is a small run that keeps every property: three Events in
// two namespaces, two watchers (one resuming on another replica from a
// bookmark), two LISTs.
func validHistory() *History {
	return &History{
		Seed:           42,
		RequestTimeout: 10 * time.Second,
		BaseRev:        10,
		Revisions: []Revision{
			{Rev: 11, Key: "ns1/a", Type: Put, Created: true, Fields: fields("ns1", "Normal")},
			{Rev: 12, Key: "ns2/b", Type: Put, Created: true, Fields: fields("ns2", "Warning")},
			{Rev: 13, Key: "ns1/a", Type: Put, Fields: fields("ns1", "Normal")},
			{Rev: 14, Key: "ns2/b", Type: Delete, Fields: fields("ns2", "Warning")},
			{Rev: 15, Key: "ns1/c", Type: Put, Created: true, Fields: fields("ns1", "Warning")},
		},
		Ops: []Op{
			{ID: 1, Kind: Create, Key: "ns1/a", Start: at(0), End: at(50), Code: 201, RV: 11},
			{ID: 2, Kind: Create, Key: "ns2/b", Start: at(100), End: at(150), Code: 201, RV: 12},
			{ID: 3, Kind: Patch, Key: "ns1/a", Start: at(200), End: at(250), Code: 200, RV: 13},
			{ID: 4, Kind: Del, Key: "ns2/b", Start: at(300), End: at(350), Code: 200},
			{ID: 5, Kind: Create, Key: "ns1/c", Start: at(400), End: at(450), Code: 201, RV: 15},
			{ID: 6, Kind: Create, Key: "ns1/x", Start: at(460), End: at(470), Code: 429, RetryAfter: "1"},
			{ID: 7, Kind: List, Start: at(500), End: at(550), Code: 200, RV: 15, Consistent: true, Pages: 2,
				Items: map[string]int64{"ns1/a": 13, "ns1/c": 15}},
			{ID: 8, Kind: List, Start: at(560), End: at(570), Code: 200, RV: 12, Pages: 1,
				Items: map[string]int64{"ns1/a": 11, "ns2/b": 12}},
			{ID: 9, Kind: List, Namespace: "ns1", Selector: map[string]string{"type": "Warning"},
				Start: at(580), End: at(590), Code: 200, RV: 15, Consistent: true, Pages: 1,
				Items: map[string]int64{"ns1/c": 15}},
		},
		Histories: []HistoryStore{{Replica: 0, Records: []HistoryRecord{
			{"ns1/a", 11}, {"ns2/b", 12}, {"ns1/a", 13}, {"ns1/c", 15}}}},
		Watchers: []Watcher{
			{Name: "all", Sessions: []Session{
				{Replica: 0, StartRV: 10, Start: at(0), End: at(180), Code: 200, Events: []Event{
					{Type: Added, Key: "ns1/a", RV: 11}, {Type: Added, Key: "ns2/b", RV: 12}, {Type: Bookmark, RV: 12}}},
				{Replica: 1, StartRV: 12, Start: at(190), End: at(600), Code: 200, Events: []Event{
					{Type: Modified, Key: "ns1/a", RV: 13}, {Type: Deleted, Key: "ns2/b", RV: 14},
					{Type: Added, Key: "ns1/c", RV: 15}, {Type: Bookmark, RV: 15}}},
			}},
			{Name: "warnings", Selector: map[string]string{"type": "Warning"}, Sessions: []Session{
				{Replica: 1, StartRV: 10, Start: at(0), End: at(600), Code: 200, Events: []Event{
					{Type: Added, Key: "ns2/b", RV: 12}, {Type: Bookmark, RV: 13}, {Type: Deleted, Key: "ns2/b", RV: 14},
					{Type: Added, Key: "ns1/c", RV: 15}}},
			}},
		},
	}
}

func TestValidHistoryPasses(t *testing.T) {
	r := Check(validHistory())
	if !r.OK() {
		t.Fatalf("a valid history broke %v:\n%s", r.Broken(), r)
	}
	if r.WatchEvents != 11 || r.Bookmarks != 3 || r.Sessions != 3 || r.OpsByKind["list"] != 3 {
		t.Errorf("counted wrong:\n%s", r)
	}
}

// TestCheckerCatchesBrokenHistories feeds histories broken as a buggy
// server would break them and asserts each is caught with exactly the
// properties it broke.
func TestCheckerCatchesBrokenHistories(t *testing.T) {
	all := func(h *History) *Watcher { return &h.Watchers[0] }
	cases := []struct {
		name   string
		break_ func(h *History)
		want   []Property
	}{{
		name: "bookmark sent ahead of an event, and the resume from it",
		break_: func(h *History) {
			s := &all(h).Sessions[0]
			s.Events[2].RV = 13 // the bookmark passes rv 13 (ns1/a MODIFIED), not delivered
			s1 := &all(h).Sessions[1]
			s1.StartRV = 13
			s1.Events = s1.Events[1:]
		},
		want: []Property{AckedWriteSeen, BookmarkNotAhead},
	}, {
		name: "resumed watch skips one revision",
		break_: func(h *History) {
			s := &all(h).Sessions[1]
			s.Events = s.Events[1:] // rv 13 lost on the resume
		},
		want: []Property{AckedWriteSeen, WatchNoGap},
	}, {
		name: "an event delivered twice in one session",
		break_: func(h *History) {
			s := &all(h).Sessions[1]
			s.Events = slices.Insert(s.Events, 1, s.Events[0])
		},
		want: []Property{WatchUnique},
	}, {
		name: "a resume from an older resourceVersion than received redelivers",
		break_: func(h *History) {
			s := &all(h).Sessions[1]
			s.StartRV = 11
			s.Events = slices.Insert(s.Events, 0, Event{Type: Added, Key: "ns2/b", RV: 12})
		},
		want: []Property{WatchResumable, WatchUnique},
	}, {
		name: "events out of order",
		break_: func(h *History) {
			s := &all(h).Sessions[1]
			s.Events[1], s.Events[2] = s.Events[2], s.Events[1]
		},
		want: []Property{AckedWriteSeen, WatchNoGap, WatchOrdered},
	}, {
		name: "an event etcd never made",
		break_: func(h *History) {
			all(h).Sessions[1].Events[1] = Event{Type: Modified, Key: "ns1/a", RV: 14}
		},
		want: []Property{AckedWriteSeen, WatchMatchesEtcd},
	}, {
		name: "an event outside the watcher's selector",
		break_: func(h *History) {
			s := &h.Watchers[1].Sessions[0]
			s.Events = slices.Insert(s.Events, 0, Event{Type: Added, Key: "ns1/a", RV: 11})
		},
		want: []Property{WatchMatchesEtcd},
	}, {
		name: "a 500",
		break_: func(h *History) {
			h.Ops[5].Code, h.Ops[5].Reason = 500, "InternalError"
		},
		want: []Property{CleanRefusal},
	}, {
		name: "a 503 without Retry-After",
		break_: func(h *History) {
			h.Ops[5].Code, h.Ops[5].RetryAfter = 503, ""
		},
		want: []Property{CleanRefusal},
	}, {
		name: "a request dropped without a Status while its replica lived",
		break_: func(h *History) {
			h.Ops[5].Code, h.Ops[5].Message = 0, "connection reset by peer"
		},
		want: []Property{CleanRefusal},
	}, {
		name: "a request past the request timeout",
		break_: func(h *History) {
			h.Ops[5].End = h.Ops[5].Start.Add(h.RequestTimeout + HangSlack + time.Second)
			h.Ops[5].Code = 504
		},
		want: []Property{NoHang},
	}, {
		name: "410 with nothing compacted",
		break_: func(h *History) {
			w := all(h)
			w.Sessions[1] = Session{Replica: 1, StartRV: 12, Start: at(190), End: at(200), Code: 200,
				Events: []Event{{Type: Error, Code: 410, Reason: "Expired", At: at(200)}}}
			w.Sessions = append(w.Sessions, Session{Replica: 0, StartRV: 15, Relisted: true, Start: at(600), End: at(700), Code: 200})
		},
		want: []Property{GoneOnlyWhenCompacted},
	}, {
		name: "a relist without a 410",
		break_: func(h *History) {
			w := all(h)
			w.Sessions[1] = Session{Replica: 1, StartRV: 15, Relisted: true, Start: at(600), End: at(700), Code: 200}
		},
		want: []Property{AckedWriteSeen, WatchResumable},
	}, {
		name: "a consistent LIST older than an acknowledged write",
		break_: func(h *History) {
			h.Ops[6].RV, h.Ops[6].Items = 13, map[string]int64{"ns1/a": 13, "ns2/b": 12}
		},
		want: []Property{ConsistentListFresh},
	}, {
		name: "a LIST missing an item",
		break_: func(h *History) {
			delete(h.Ops[6].Items, "ns1/c")
		},
		want: []Property{ListSnapshot},
	}, {
		name: "a LIST holding a deleted item",
		break_: func(h *History) {
			h.Ops[6].Items["ns2/b"] = 12
		},
		want: []Property{ListSnapshot},
	}, {
		name: "an acknowledged create etcd does not hold",
		break_: func(h *History) {
			h.Ops = append(h.Ops, Op{ID: 20, Kind: Create, Key: "ns1/d", Start: at(600), End: at(650), Code: 201, RV: 16})
		},
		want: []Property{AckedWriteInEtcd},
	}, {
		name: "an acknowledged delete etcd does not hold",
		break_: func(h *History) {
			h.Ops = append(h.Ops, Op{ID: 20, Kind: Del, Key: "ns1/c", Start: at(600), End: at(650), Code: 200})
		},
		want: []Property{AckedWriteInEtcd},
	}, {
		name: "a rewind to a resourceVersion never received",
		break_: func(h *History) {
			w := all(h)
			w.Sessions = append(w.Sessions, Session{Replica: 0, StartRV: 9, Rewound: true, Start: at(600), End: at(700), Code: 200,
				Events: []Event{{Type: Added, Key: "ns1/a", RV: 11}, {Type: Added, Key: "ns2/b", RV: 12}}})
		},
		want: []Property{WatchResumable},
	}, {
		name: "a rewound watch that skips what followed",
		break_: func(h *History) {
			w := all(h)
			w.Sessions = append(w.Sessions, Session{Replica: 0, StartRV: 12, Rewound: true, Start: at(600), End: at(700), Code: 200,
				Events: []Event{{Type: Deleted, Key: "ns2/b", RV: 14}, {Type: Added, Key: "ns1/c", RV: 15}}})
		},
		want: []Property{WatchNoGap},
	}, {
		name: "history missing a version",
		break_: func(h *History) {
			h.Histories[0].Records = h.Histories[0].Records[1:]
		},
		want: []Property{HistoryExactlyOnce},
	}, {
		name: "history holding a version twice",
		break_: func(h *History) {
			h.Histories[0].Records = append(h.Histories[0].Records, HistoryRecord{"ns1/a", 13})
		},
		want: []Property{HistoryExactlyOnce},
	}, {
		name: "history holding a version etcd never held",
		break_: func(h *History) {
			h.Histories[0].Records = append(h.Histories[0].Records, HistoryRecord{"ns1/a", 14})
		},
		want: []Property{HistoryExactlyOnce},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := validHistory()
			tc.break_(h)
			r := Check(h)
			if got := r.Broken(); !slices.Equal(got, tc.want) {
				t.Errorf("broke %v, want %v:\n%s", got, tc.want, r)
			}
			for _, v := range r.Violations {
				if len(v.History) == 0 {
					t.Errorf("%s violation without the history that shows it", v.Property)
				}
			}
		})
	}
}

// TestExcusedFailures are failures the properties allow: a 410 after a
// compaction past the watcher's resourceVersion, a request cut by its
// replica's death.
func TestExcusedFailures(t *testing.T) {
	h := validHistory()
	w := &h.Watchers[0]
	w.Sessions[1] = Session{Replica: 1, StartRV: 12, Start: at(190), End: at(200), Code: 200,
		Events: []Event{{Type: Error, Code: 410, Reason: "Expired", At: at(200)}}}
	w.Sessions = append(w.Sessions, Session{Replica: 0, StartRV: 15, Relisted: true, Start: at(600), End: at(700), Code: 200})
	h.Compactions = []Compaction{{Rev: 14, At: at(180)}}
	h.Ops[5].Code, h.Ops[5].RetryAfter, h.Ops[5].Replica = 0, "", 1
	h.Faults = []Fault{{Kind: ReplicaKill, Replica: 1, Start: at(465), End: at(1000)}}
	// A rewind to a bookmark received earlier gets what followed again.
	h.Watchers[1].Sessions = append(h.Watchers[1].Sessions, Session{Replica: 0, StartRV: 13, Rewound: true, Start: at(600), End: at(700), Code: 200,
		Events: []Event{{Type: Deleted, Key: "ns2/b", RV: 14}, {Type: Added, Key: "ns1/c", RV: 15}}})
	if r := Check(h); !r.OK() {
		t.Fatalf("broke %v:\n%s", r.Broken(), r)
	}
}

func TestReportNamesSeedAndHistory(t *testing.T) {
	h := validHistory()
	h.Ops[5].Code = 500
	s := Check(h).String()
	for _, want := range []string{"seed 42", "VIOLATION clean-refusal (seed 42)", "op 6 create", "violations: 1", "faults injected by kind: none"} {
		if !strings.Contains(s, want) {
			t.Errorf("report lacks %q:\n%s", want, s)
		}
	}
}
