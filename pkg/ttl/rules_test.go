package ttl

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eventapiserver/event-apiserver/pkg/apis/core"
)

func TestParseRefuses(t *testing.T) {
	tooMany := make([]string, MaxRules+1)
	for i := range tooMany {
		tooMany[i] = "reason=R" + strings.Repeat("x", i) + ":1m"
	}
	tests := []struct {
		name  string
		specs []string
		want  string
	}{
		{"no duration", []string{"type=Warning"}, "want KEY=VALUE[,KEY=VALUE...]:DURATION"},
		{"bad duration", []string{"type=Warning:a day"}, `bad duration "a day"`},
		{"duration without unit", []string{"type=Warning:86400"}, `bad duration "86400"`},
		{"negative", []string{"type=Warning:-1h"}, "TTL -1h0m0s must be at least 1s"},
		{"zero", []string{"type=Warning:0s"}, "TTL 0s must be at least 1s"},
		{"under a second", []string{"type=Warning:500ms"}, "TTL 500ms must be at least 1s"},
		{"fraction of a second", []string{"type=Warning:1500ms"}, "TTL 1.5s must be whole seconds"},
		{"unknown key", []string{"kind=Pod:1h"}, `unknown key "kind", want type, reason or reportingController`},
		{"field selector spelling", []string{"reportingComponent=kubelet:1h"}, `unknown key "reportingComponent"`},
		{"lower-case type", []string{"type=warning:1h"}, `type must be Normal or Warning, not "warning"`},
		{"empty value", []string{"reason=:1h"}, "reason has an empty value"},
		{"no key", []string{":1h"}, `"" is not KEY=VALUE`},
		{"not a pair", []string{"Warning:1h"}, `"Warning" is not KEY=VALUE`},
		{"key twice", []string{"reason=A,reason=B:1h"}, "reason given twice"},
		{"shadowed", []string{"type=Warning:1h", "type=Warning:2h"}, `never applies, rule 1 ("type=Warning:1h") matches the same Events first`},
		{"too many", tooMany, "17 rules given, at most 16 are allowed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.specs, time.Hour)
			if err == nil {
				t.Fatalf("Parse(%q) accepted", tc.specs)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Parse(%q) = %q, want it to contain %q", tc.specs, err, tc.want)
			}
			if !strings.HasPrefix(err.Error(), "--event-ttl-rule") {
				t.Errorf("error %q does not name the flag", err)
			}
		})
	}
}

func TestRulesFor(t *testing.T) {
	rules, err := Parse([]string{
		"reason=BackOff,reportingController=kubelet:10m",
		"type=Warning:24h",
		"reportingController=default-scheduler:30m",
		"reason=Pulled:1m:1s", // the last colon separates: reason "Pulled:1m"
	}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		event core.Event
		want  time.Duration
	}{
		{"nothing matches: --event-ttl", core.Event{Type: "Normal", Reason: "Started"}, time.Hour},
		{"type", core.Event{Type: "Warning", Reason: "Failed"}, 24 * time.Hour},
		{"first match wins over a later one", core.Event{Type: "Warning", Reason: "BackOff", ReportingController: "kubelet"}, 10 * time.Minute},
		{"all keys must match", core.Event{Type: "Normal", Reason: "BackOff", ReportingController: "other"}, time.Hour},
		{"old recorder's source component", core.Event{Type: "Normal", Reason: "BackOff", Source: core.EventSource{Component: "kubelet"}}, 10 * time.Minute},
		{"reportingController before source", core.Event{Reason: "BackOff", ReportingController: "other", Source: core.EventSource{Component: "kubelet"}}, time.Hour},
		{"reporting controller only", core.Event{Type: "Normal", ReportingController: "default-scheduler"}, 30 * time.Minute},
		{"values are case-sensitive", core.Event{Type: "Normal", Reason: "backoff", ReportingController: "kubelet"}, time.Hour},
		{"colon in a value", core.Event{Reason: "Pulled:1m"}, time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := rules.For(&tc.event); got != tc.want {
				t.Errorf("For = %s, want %s", got, tc.want)
			}
			if got, _ := rules.TTLFunc(&tc.event, 0, true); got != uint64(tc.want.Seconds()) {
				t.Errorf("TTLFunc = %d, want %d", got, uint64(tc.want.Seconds()))
			}
		})
	}
}

func TestClasses(t *testing.T) {
	tests := []struct {
		name       string
		specs      []string
		defaultTTL time.Duration
		want       []uint64
	}{
		{"no rules", nil, time.Hour, []uint64{3600}},
		{"rules share a TTL with the default", []string{"type=Warning:1h", "reason=A:1m", "reason=B:1m"}, time.Hour, []uint64{60, 3600}},
		{"forever takes no lease", []string{"type=Warning:24h"}, 0, []uint64{86400}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rules, err := Parse(tc.specs, tc.defaultTTL)
			if err != nil {
				t.Fatal(err)
			}
			if got := rules.Classes(); !slices.Equal(got, tc.want) {
				t.Errorf("Classes = %v, want %v", got, tc.want)
			}
		})
	}
}
