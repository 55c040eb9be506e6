package storetest

import (
	"context"
	"math"
	"os"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/eventapiserver/event-apiserver/pkg/history"
)

// ListSamplePages is HISTORY_BENCH_LIST_PAGES: how many pages of the
// window the workarounds (CountReasonsWeek's list-and-count,
// SearchRareWordWeek's list-window) list, 0 (the default) for all of it.
// Listing a 10^7 history's week (5 * 10^6 versions) takes many minutes a
// run; a sample of pages spread over the window (ListWindow), timed and
// scaled to the window's versions, estimates it (ReportLatencies).
func ListSamplePages(b *testing.B) int {
	v := os.Getenv("HISTORY_BENCH_LIST_PAGES")
	if v == "" {
		return 0
	}
	pages, err := strconv.Atoi(v)
	if err != nil || pages < 0 {
		b.Fatalf("HISTORY_BENCH_LIST_PAGES=%q: want a number of pages, 0 for all", v)
	}
	return pages
}

// ListWindow lists q (its Limit a page) newest first, each record to
// each, page after page as a client of the API would, and returns how many
// it listed. With pages > 0 it lists a sample instead: one page from each
// of pages cursors spread evenly from newest (the window's newest version)
// to q.Since, so that a page's cost where the listing is deep in the window
// (a cursor far from the first page) is in the sample as much as near its
// start.
func ListWindow(ctx context.Context, s history.Store, q history.Query, pages int, newest time.Time, each func(history.Record)) (int, error) {
	listed := 0
	for i := 0; pages == 0 || i < pages; i++ {
		if pages > 0 {
			at := newest.Add(-time.Duration(float64(newest.Sub(q.Since)) * float64(i) / float64(pages)))
			q.After = nil
			if i > 0 {
				q.After = &history.Cursor{LastSeen: at, Revision: math.MaxInt64}
			}
		}
		records, err := s.List(ctx, q)
		if err != nil {
			return listed, err
		}
		for _, r := range records {
			each(r)
		}
		listed += len(records)
		if pages == 0 {
			if len(records) < q.Limit {
				return listed, nil
			}
			last := records[len(records)-1]
			q.After = &history.Cursor{LastSeen: last.LastSeen, Revision: last.Revision}
		}
	}
	return listed, nil
}

// ReportLatencies reports the p50 and p99 of latencies (p99 is the slowest
// of fewer than 100). If *sampled is above 0, each run read only sampled of
// total versions (ListSamplePages): the latencies reported are scaled by
// total/sampled, an estimate of reading them all that assumes each page
// costs what the sample's did, and the sample's own p50 and the versions
// it read are reported beside them.
func ReportLatencies(b *testing.B, latencies []time.Duration, sampled *int64, total int64) {
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	p50, p99 := latencies[len(latencies)/2], latencies[len(latencies)*99/100]
	if sampled != nil && *sampled > 0 && *sampled < total {
		b.ReportMetric(float64(p50.Microseconds()), "sample-p50-µs")
		b.ReportMetric(float64(*sampled), "sampled-versions")
		scale := float64(total) / float64(*sampled)
		p50, p99 = time.Duration(float64(p50)*scale), time.Duration(float64(p99)*scale)
	}
	b.ReportMetric(float64(p50.Microseconds()), "p50-µs")
	b.ReportMetric(float64(p99.Microseconds()), "p99-µs")
}
