package alerts

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/promslog"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/prometheus/prometheus/rules"
)

// phase is a stretch of a synthetic series: from when on (since the first
// sample) it rises by value each minute (a counter) or holds value (a
// gauge).
type phase struct {
	from  time.Duration
	value float64
}

// storm is when the synthetic cluster turns sick: a day and two hours in,
// so that a day of quiet lies behind it.
const storm = 26 * time.Hour

// end is the last evaluation.
const end = storm + 3*time.Hour + 30*time.Minute

// counter is a counter's values, one a minute from 0 to end: absent ("_")
// before the first phase, 0 at its start, then rising each minute by the
// value of the phase the minute began in.
func counter(phases ...phase) string {
	var out []string
	var v float64
	for at := time.Duration(0); at <= end; at += time.Minute {
		switch {
		case at < phases[0].from:
			out = append(out, "_")
			continue
		case at > phases[0].from:
			v += during(phases, at-time.Minute).value
		}
		out = append(out, fmt.Sprint(v))
	}
	return strings.Join(out, " ")
}

// gauge is a gauge's values, one a minute: absent before the first phase,
// then the value of the phase at the time.
func gauge(phases ...phase) string {
	var out []string
	for at := time.Duration(0); at <= end; at += time.Minute {
		if at < phases[0].from {
			out = append(out, "_")
			continue
		}
		out = append(out, fmt.Sprint(during(phases, at).value))
	}
	return strings.Join(out, " ")
}

// during is the phase at at: the last one begun.
func during(phases []phase, at time.Duration) phase {
	p := phases[0]
	for _, q := range phases {
		if q.from <= at {
			p = q
		}
	}
	return p
}

// target is what the ServiceMonitor's scrape adds to a pod's series.
func target(pod string) string {
	return fmt.Sprintf(`job="event-apiserver",namespace="event-apiserver",pod=%q`, pod)
}

func eventsTotal(source, typ, reason, kind, namespace, pod string) string {
	return fmt.Sprintf(`event_apiserver_events_total{%s,source=%q,type=%q,reason=%q,regarding_kind=%q,regarding_namespace=%q}`,
		target(pod), source, typ, reason, kind, namespace)
}

// firing is when an alert, by its labels but alertname and severity, was
// first seen firing.
type firing map[string]time.Duration

func alertKey(a *rules.Alert) string {
	return a.Labels.Get(labels.AlertName) + labels.NewBuilder(a.Labels).Del(labels.AlertName, "severity").Labels().String()
}

// evaluate runs the rule groups of f over series, one evaluation a minute
// from 0 to end in the file's group order, as Prometheus's own rule unit
// tests (promtool test rules) do, and returns when each alert first fired.
func evaluate(t *testing.T, f ruleFile, series map[string]string) firing {
	t.Helper()
	load := "load 1m\n"
	for name, vals := range series {
		load += "  " + name + " " + vals + "\n"
	}
	// Samples are added as time goes, as promtool does: the storage takes
	// the recorded series' samples only near the newest it holds.
	suite, err := promqltest.NewLazyLoader(load, promqltest.LazyLoaderOpts{EnableAtModifier: true, EnableNegativeOffset: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = suite.Close() })
	storage := suite.Storage()
	// The loader's own engine stops at 10,000 samples a query; a day of a
	// recorded series a minute is 1,441 samples a reason.
	engine := promqltest.NewTestEngine(t, false, 0, 1_000_000)
	ctx := suite.Context()
	manager := rules.NewManager(&rules.ManagerOptions{
		QueryFunc:    rules.EngineQueryFunc(engine, storage),
		AppendableV2: storage,
		Queryable:    storage,
		Context:      ctx,
		NotifyFunc:   func(context.Context, string, ...*rules.Alert) {},
		Logger:       promslog.NewNopLogger(),
		Parser:       promQL,
	})
	path := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(path, f.spec, 0o600); err != nil {
		t.Fatal(err)
	}
	loaded, errs := manager.LoadGroups(time.Minute, labels.EmptyLabels(), "", nil, false, path)
	if len(errs) > 0 {
		t.Fatalf("%s: %v", f.origin, errs)
	}
	var groups []*rules.Group
	for _, g := range parseRules(t, f).Groups {
		groups = append(groups, loaded[rules.GroupKey(path, g.Name)])
	}
	for _, g := range groups {
		for _, r := range g.Rules() {
			if a, ok := r.(*rules.AlertingRule); ok {
				// As promtool does: the for-state starts fresh.
				a.SetRestored(true)
			}
		}
	}
	fired := firing{}
	start := time.Unix(0, 0).UTC()
	for at := time.Duration(0); at <= end; at += time.Minute {
		suite.WithSamplesTill(start.Add(at), func(err error) {
			if err != nil {
				t.Fatal(err)
			}
		})
		for _, g := range groups {
			g.Eval(ctx, start.Add(at))
			for _, r := range g.Rules() {
				if err := r.LastError(); err != nil {
					t.Fatalf("%s at %v: %v", r.Name(), at, err)
				}
				a, ok := r.(*rules.AlertingRule)
				if !ok {
					continue
				}
				for _, alert := range a.ActiveAlerts() {
					if alert.State != rules.StateFiring {
						continue
					}
					alert.Annotations.Range(func(ann labels.Label) {
						if strings.Contains(ann.Value, "error expanding template") || strings.Contains(ann.Value, "<no value>") {
							t.Errorf("%s: annotation %s: %s", alertKey(alert), ann.Name, ann.Value)
						}
					})
					if _, seen := fired[alertKey(alert)]; !seen {
						fired[alertKey(alert)] = at
						t.Logf("%s: %s", alertKey(alert), alert.Annotations.Get("summary"))
					}
				}
			}
		}
	}
	return fired
}

// TestEventAlerts evaluates the shipped rules over two days of a synthetic
// cluster: a quiet day, then a Warning storm in one namespace, a reason
// never seen before, the metrics' cap reached and a capture falling behind.
// Each alert fires for what it is meant for, when it should, and for
// nothing else: not for steady Warnings under the threshold, not for a
// steady reason however loud, not for a history-only pair of replicas that
// each count the same Events (a sum would double them past the threshold),
// not for a new reason below one a minute, not for Normal Events.
func TestEventAlerts(t *testing.T) {
	f := shippedRules(t)[0]
	h, m := time.Hour, time.Minute
	series := map[string]string{}
	for _, pod := range []string{"a", "b"} {
		// Each replica stores half of the Events written through the API.
		series[eventsTotal("written", "Warning", "BackOff", "Pod", "payments", pod)] = counter(phase{0, 0.5}, phase{storm, 8}, phase{storm + h, 0.5})
		series[eventsTotal("written", "Warning", "FailedMount", "Pod", "steady", pod)] = counter(phase{0, 3})
		series[eventsTotal("written", "Warning", "Unhealthy", "Pod", "busy", pod)] = counter(phase{0, 6})
		series[eventsTotal("written", "Normal", "Pulled", "Pod", "deploys", pod)] = counter(phase{0, 50})
	}
	for _, pod := range []string{"c", "d"} {
		// History-only replicas each capture all of kube-apiserver's.
		series[eventsTotal("kubernetes", "Warning", "FailedScheduling", "Pod", "shop", pod)] = counter(phase{0, 7})
	}
	// Cluster-scoped objects have no namespace: 12 a minute about nodes.
	series[eventsTotal("written", "Warning", "NodeNotReady", "Node", "", "b")] = counter(phase{0, 12})
	series[eventsTotal("written", "Warning", "OOMKilling", "Node", "", "a")] = counter(phase{storm, 3})
	series[eventsTotal("written", "Warning", "Rare", "Pod", "batch", "b")] = counter(phase{storm, 0.5})
	series[fmt.Sprintf(`event_apiserver_events_folded_total{%s,source="written"}`, target("a"))] = counter(phase{0, 0}, phase{storm + 2*h, 50}, phase{storm + 2*h + m, 0})
	series[fmt.Sprintf(`event_apiserver_events_folded_total{%s,source="written"}`, target("b"))] = counter(phase{0, 0})
	series[fmt.Sprintf(`event_apiserver_history_capture_lag_seconds{%s,source="kubernetes"}`, target("c"))] = gauge(phase{0, 0}, phase{storm + 3*h, 300}, phase{storm + 3*h + 20*m, 0})

	fired := evaluate(t, f, series)

	want := map[string][2]time.Duration{
		// 12 a minute from the start: 15 minutes pending once the
		// 5-minute rate has two samples.
		`EventAPIServerNamespaceWarnings{regarding_namespace="busy"}`: {15 * m, 25 * m},
		// An empty label is no label.
		`EventAPIServerNamespaceWarnings{}`: {15 * m, 25 * m},
		// 16 a minute from the storm on, summed over the two replicas.
		`EventAPIServerNamespaceWarnings{regarding_namespace="payments"}`: {storm + 15*m, storm + 25*m},
		// 16 a minute against a day's 1; then a reason never seen, 3 a minute.
		`EventAPIServerWarningReasonRising{reason="BackOff"}`:              {storm + 10*m, storm + 20*m},
		`EventAPIServerWarningReasonRising{reason="OOMKilling"}`:           {storm + 10*m, storm + 20*m},
		`EventAPIServerEventMetricsFolded{pod="a"}`:                        {storm + 2*h, storm + 2*h + 2*m},
		`EventAPIServerHistoryCaptureBehind{pod="c", source="kubernetes"}`: {storm + 3*h + 9*m, storm + 3*h + 12*m},
	}
	var keys []string
	for k := range fired {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		w, ok := want[k]
		switch {
		case !ok:
			t.Errorf("%s fired at %v on data it is not meant for", k, fired[k])
		case fired[k] < w[0] || fired[k] > w[1]:
			t.Errorf("%s first fired at %v, want between %v and %v", k, fired[k], w[0], w[1])
		default:
			t.Logf("%s fired at %v", k, fired[k])
		}
	}
	for k := range want {
		if _, ok := fired[k]; !ok {
			t.Errorf("%s never fired", k)
		}
	}
}
