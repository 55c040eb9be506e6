package app

import (
	"bytes"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	historyv1alpha1 "github.com/eventapiserver/event-apiserver/pkg/apis/history/v1alpha1"
)

func TestBar(t *testing.T) {
	for _, tc := range []struct {
		n, largest int64
		width      int
		want       string
	}{
		{10, 10, 4, "████"},
		{5, 10, 4, "██"},
		{1, 16, 2, "▏"},
		{3, 16, 2, "▍"},
		{1, 1000, 4, "▏"}, // never drawn as nothing
		{0, 10, 4, ""},
	} {
		if got := bar(tc.n, tc.largest, tc.width); got != tc.want {
			t.Errorf("bar(%d, %d, %d) = %q, want %q", tc.n, tc.largest, tc.width, got, tc.want)
		}
	}
}

func TestSparkline(t *testing.T) {
	if got, want := sparkline([]int64{0, 1, 4, 8, 0}), " ▁▄█ "; got != want {
		t.Errorf("sparkline = %q, want %q", got, want)
	}
}

func TestPrintSummary(t *testing.T) {
	start := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	status := historyv1alpha1.EventRecordCountStatus{
		Since: metav1.NewTime(start), Until: metav1.NewTime(start.Add(2 * time.Hour)),
		Total: 13, Other: 1,
		Groups: []historyv1alpha1.EventRecordCountGroup{{Values: []string{"BackOff"}, Total: 8}, {Values: []string{""}, Total: 4}},
		Buckets: []historyv1alpha1.EventRecordCountBucket{
			{Start: metav1.NewTime(start), Counts: []int64{8, 0}},
			{Start: metav1.NewTime(start.Add(time.Hour)), Counts: []int64{0, 4}},
		},
	}
	var out bytes.Buffer
	if err := printSummary(&out, []string{"reason"}, status); err != nil {
		t.Fatal(err)
	}
	want := "REASON    COUNT                                              OVER TIME (2026-11-01T00:00Z to 2026-11-01T02:00Z)\n" +
		"BackOff   8       ████████████████████████████████████████   █ \n" +
		"<none>    4       ████████████████████                        █\n" +
		"(other)   1       █████                                      \n"
	if out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}
}

func TestSummaryFieldSelector(t *testing.T) {
	for _, tc := range []struct {
		name    string
		flags   SummaryFlags
		want    string
		wantErr string
	}{
		{"the window alone", SummaryFlags{Since: 24 * time.Hour}, "since=24h0m0s", ""},
		{"the user's selector first", SummaryFlags{Since: time.Hour, FieldSelector: "type=Warning"}, "type=Warning,since=1h0m0s", ""},
		{"the cluster after it", SummaryFlags{Since: time.Hour, FieldSelector: "type=Warning", Cluster: "eu-west-1"}, "type=Warning,cluster=eu-west-1,since=1h0m0s", ""},
		{"no cluster has such a name", SummaryFlags{Since: time.Hour, Cluster: "EU_west"}, "", `--cluster "EU_west": a lowercase RFC 1123 label`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.flags.fieldSelector()
			if tc.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
