package storetest

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eventapiserver/event-apiserver/pkg/history"
	"github.com/eventapiserver/event-apiserver/pkg/history/sqlstore"
	"github.com/eventapiserver/event-apiserver/pkg/search"
)

// countable are the columns a count may group by: the read API offers
// these (registry/history's groupBy), and none is Added.
var countable = []history.Column{history.ColumnReason, history.ColumnType, history.ColumnRegardingKind,
	history.ColumnNamespace, history.ColumnReportingController, history.ColumnRegardingName}

// testCount: for random versions, conditions, windows (on the hour or
// not, open or not), groupings, buckets and tops, Count agrees with
// counting the same versions one by one, whether it reads the versions
// or the hourly counts (sqlstore.HourlyColumns, whole hours), and still
// after the versions were written again (a replay, stored once) and after
// retention removed some. The values mix cases and a non-ASCII letter, so
// that ties between groups are ordered by bytes in every database, as Go
// orders them.
func testCount(t *testing.T, s history.Store) {
	counter, ok := s.(history.Counter)
	if !ok {
		t.Fatalf("%T does not count", s)
	}
	ctx := context.Background()
	r := rand.New(rand.NewPCG(45, 1))
	pick := func(values ...string) string { return values[r.IntN(len(values))] }
	namespaces := []string{"default", "kube-system", "Web"}
	reasons := []string{"BackOff", "Started", "Pulled", "backoff", "Ünhealthy"}
	var versions []history.Version
	for i := 0; i < 600; i++ {
		v := Version(fmt.Sprint("u", i%150), int64(i+1), fmt.Sprint("p", r.IntN(6)), r.IntN(3*24*60))
		v.Namespace = pick(namespaces...)
		v.Name = "ev-" + v.UID
		v.Reason = pick(reasons...)
		v.Type = pick("Normal", "Warning")
		v.RegardingKind = pick("Pod", "Node")
		v.ReportingController = pick("kubelet", "default-scheduler", "")
		v.Cluster = pick("", "east")
		v.Note = pick("Back-off restarting failed container", "Successfully pulled image", "x509: certificate has expired", "")
		// Retention's cutoff below reads either time: SQLite's the
		// observation, PostgreSQL's days of last_seen.
		v.ObservedAt = v.LastSeen
		versions = append(versions, v)
	}
	if err := s.Write(ctx, history.Batch{Versions: versions}); err != nil {
		t.Fatal(err)
	}
	groupable := append(slices.Clone(countable), history.ColumnCluster)
	buckets := []time.Duration{time.Hour, 6 * time.Hour, 24 * time.Hour, 7 * time.Minute, 3 * time.Hour}
	var queries []history.CountQuery
	for i := 0; i < 80; i++ {
		q := history.CountQuery{Bucket: buckets[r.IntN(len(buckets))], Top: 1 + r.IntN(8)}
		for _, j := range r.Perm(len(groupable))[:1+r.IntN(2)] {
			q.GroupBy = append(q.GroupBy, groupable[j])
		}
		if r.IntN(2) == 0 {
			q.Conditions = append(q.Conditions, history.Condition{Columns: []history.Column{history.ColumnNamespace}, Value: pick(namespaces...)})
		}
		switch r.IntN(4) {
		case 0:
			q.Conditions = append(q.Conditions, history.Condition{Columns: []history.Column{history.ColumnReason}, Value: reasons[0], Values: reasons[:2+r.IntN(2)]})
		case 1:
			q.Conditions = append(q.Conditions, history.Condition{Columns: []history.Column{history.ColumnType}, Value: "Normal", Not: true})
		case 2:
			q.Conditions = append(q.Conditions, history.Condition{Columns: []history.Column{history.ColumnReason}, Value: reasons[1], Values: reasons[1:3], Not: true})
		}
		if r.IntN(4) == 0 {
			q.Conditions = append(q.Conditions, history.Condition{Columns: []history.Column{history.ColumnCluster}, Value: "east"})
		}
		if r.IntN(4) == 0 {
			q.Conditions = append(q.Conditions, history.Condition{Columns: []history.Column{history.ColumnRegardingUID, history.ColumnRelatedUID}, Value: pick("p1", "p2")})
		}
		// A text search: the versions read, never the hourly counts.
		if r.IntN(5) == 0 {
			q.Conditions = append(q.Conditions, history.Condition{Columns: []history.Column{history.ColumnNote}, Value: pick("PULLED", "x509", "restart"), Contains: true})
		}
		// On the hour half the time: the hourly counts alone answer it.
		if r.IntN(3) > 0 {
			q.Since = Base.Add(time.Duration(r.IntN(24*60)) * time.Minute)
			if r.IntN(2) == 0 {
				q.Since = q.Since.Truncate(time.Hour)
			}
		}
		if r.IntN(3) > 0 {
			q.Until = Base.Add(time.Duration(24*60+r.IntN(2*24*60)) * time.Minute)
			if r.IntN(2) == 0 {
				q.Until = q.Until.Truncate(time.Hour)
			}
		}
		queries = append(queries, q)
	}
	check := func(t *testing.T, stored []history.Version) {
		for i, q := range queries {
			t.Run(fmt.Sprint(i), func(t *testing.T) {
				want := describeCounts(bruteCount(stored, q))
				// The second time in two passes (sqlstore.Count).
				for _, cells := range []int{sqlstore.OnePassCells, 1} {
					defer func(restore int) { sqlstore.OnePassCells = restore }(sqlstore.OnePassCells)
					sqlstore.OnePassCells = cells
					got, err := counter.Count(ctx, q)
					if err != nil {
						t.Fatal(err)
					}
					if describeCounts(got) != want {
						t.Fatalf("%+v, one pass up to %d cells:\n got %s\nwant %s", q, cells, describeCounts(got), want)
					}
				}
			})
		}
	}
	t.Run("written", func(t *testing.T) { check(t, versions) })
	// A relist's replay: the store keeps each version once, and counts it once.
	if err := s.Write(ctx, history.Batch{Versions: versions[:300]}); err != nil {
		t.Fatal(err)
	}
	t.Run("replayed", func(t *testing.T) { check(t, versions) })
	if _, err := s.Retain(ctx, Base.Add(36*time.Hour), 0, 50); err != nil {
		t.Fatal(err)
	}
	records, err := s.List(ctx, history.Query{})
	if err != nil {
		t.Fatal(err)
	}
	if len(records) == len(versions) || len(records) == 0 {
		t.Fatalf("retention left %d of %d versions: the test wants some gone, some kept", len(records), len(versions))
	}
	left := make([]history.Version, 0, len(records))
	for _, rec := range records {
		left = append(left, rec.Version)
	}
	t.Run("retained", func(t *testing.T) { check(t, left) })
	if _, err := counter.Count(ctx, history.CountQuery{GroupBy: []history.Column{history.ColumnNote}, Bucket: time.Hour, Top: 1}); err == nil {
		t.Fatal("grouped by the note, an Added column")
	}
}

// bruteCount counts versions one by one as Count's doc says.
func bruteCount(versions []history.Version, q history.CountQuery) history.Counts {
	var out history.Counts
	byValues := map[string]*history.GroupCount{}
	for i := range versions {
		v := &versions[i]
		if !q.Since.IsZero() && v.LastSeen.Before(q.Since) || !q.Until.IsZero() && !v.LastSeen.Before(q.Until) {
			continue
		}
		if !slices.ContainsFunc(q.Conditions, func(c history.Condition) bool { return !matchVersion(c, v) }) {
			out.Total++
			var values []string
			for _, col := range q.GroupBy {
				def, _ := history.LookupColumn(col)
				values = append(values, *def.Value(v))
			}
			key := strings.Join(values, "\x00")
			g := byValues[key]
			if g == nil {
				g = &history.GroupCount{Values: values, Buckets: map[time.Time]int64{}}
				byValues[key] = g
			}
			g.Total++
			// Since the Unix epoch; time.Truncate counts from year 1.
			ns := v.LastSeen.UnixNano()
			g.Buckets[time.Unix(0, ns-ns%q.Bucket.Nanoseconds()).UTC()]++
		}
	}
	for _, g := range byValues {
		out.Groups = append(out.Groups, *g)
	}
	slices.SortFunc(out.Groups, func(a, b history.GroupCount) int {
		return cmp.Or(cmp.Compare(b.Total, a.Total), slices.Compare(a.Values, b.Values))
	})
	out.Groups = out.Groups[:min(q.Top, len(out.Groups))]
	return out
}

// matchVersion is Condition.Match on a Version's columns.
func matchVersion(c history.Condition, v *history.Version) bool {
	if c.Contains {
		def, _ := history.LookupColumn(c.Columns[0])
		return search.ContainsFold(*def.Value(v), c.Value)
	}
	values := c.Values
	if len(values) == 0 {
		values = []string{c.Value}
	}
	for _, name := range c.Columns {
		def, _ := history.LookupColumn(name)
		if slices.Contains(values, *def.Value(v)) {
			return !c.Not
		}
	}
	return c.Not
}

func describeCounts(c history.Counts) string {
	var b strings.Builder
	fmt.Fprintf(&b, "total %d", c.Total)
	for _, g := range c.Groups {
		fmt.Fprintf(&b, "; %q %d:", g.Values, g.Total)
		starts := make([]time.Time, 0, len(g.Buckets))
		for start := range g.Buckets {
			starts = append(starts, start)
		}
		slices.SortFunc(starts, time.Time.Compare)
		for _, start := range starts {
			fmt.Fprintf(&b, " %s=%d", start.Format(time.RFC3339), g.Buckets[start])
		}
	}
	return b.String()
}
