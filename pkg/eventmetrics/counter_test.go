package eventmetrics

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/testutil"

	"github.com/eventapiserver/event-apiserver/pkg/apis/core"
)

// event is a core/v1-style Event as the Events API stores it.
func event(typ, reason, kind, namespace string, count int32, seriesCount int32) *core.Event {
	e := &core.Event{
		Type: typ, Reason: reason, Count: count,
		InvolvedObject: core.ObjectReference{Kind: kind, Namespace: namespace, Name: "x"},
	}
	if seriesCount > 0 {
		e.Series = &core.EventSeries{Count: seriesCount}
	}
	return e
}

// scrape gathers c as /metrics shows it.
func scrape(t *testing.T, c *Counter) map[string]*dto.MetricFamily {
	t.Helper()
	reg := metrics.NewKubeRegistry()
	reg.CustomMustRegister(c.Collector())
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, f := range families {
		out[f.GetName()] = f
	}
	return out
}

// samples are event_apiserver_events_total's values by their labels, as
// "source/type/reason/kind/namespace".
func samples(t *testing.T, c *Counter) map[string]float64 {
	t.Helper()
	return samplesOf(scrape(t, c))
}

func samplesOf(families map[string]*dto.MetricFamily) map[string]float64 {
	out := map[string]float64{}
	f := families["event_apiserver_events_total"]
	if f == nil {
		return out
	}
	for _, m := range f.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		out[strings.Join([]string{labels["source"], labels["type"], labels["reason"], labels["regarding_kind"], labels["regarding_namespace"]}, "/")] = m.GetCounter().GetValue()
	}
	return out
}

func folded(t *testing.T, c *Counter, source string) float64 {
	t.Helper()
	return foldedOf(scrape(t, c), source)
}

func foldedOf(families map[string]*dto.MetricFamily, source string) float64 {
	f := families["event_apiserver_events_folded_total"]
	for _, m := range f.GetMetric() {
		if m.GetLabel()[0].GetValue() == source {
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

func TestWrittenCountsOccurrences(t *testing.T) {
	for _, tc := range []struct {
		name       string
		old, store *core.Event
		want       map[string]float64
	}{
		{"a new core/v1 Event", nil, event("Warning", "BackOff", "Pod", "a", 1, 0),
			map[string]float64{"written/Warning/BackOff/Pod/a": 1}},
		{"a new Event that says it happened 5 times", nil, event("Warning", "BackOff", "Pod", "a", 5, 0),
			map[string]float64{"written/Warning/BackOff/Pod/a": 5}},
		{"a new events.k8s.io/v1 Event: no count", nil, event("Normal", "Scheduled", "Pod", "a", 0, 0),
			map[string]float64{"written/Normal/Scheduled/Pod/a": 1}},
		{"a core/v1 recorder's repeat: count 2 to 3", event("Warning", "BackOff", "Pod", "a", 2, 0), event("Warning", "BackOff", "Pod", "a", 3, 0),
			map[string]float64{"written/Warning/BackOff/Pod/a": 1}},
		{"tools/events' second occurrence: a series of 2", event("Warning", "FailedScheduling", "Pod", "a", 0, 0), event("Warning", "FailedScheduling", "Pod", "a", 0, 2),
			map[string]float64{"written/Warning/FailedScheduling/Pod/a": 1}},
		{"tools/events' heartbeat: series 2 to 30", event("Warning", "FailedScheduling", "Pod", "a", 0, 2), event("Warning", "FailedScheduling", "Pod", "a", 0, 30),
			map[string]float64{"written/Warning/FailedScheduling/Pod/a": 28}},
		{"an update that raises no count", event("Warning", "BackOff", "Pod", "a", 4, 0), event("Warning", "BackOff", "Pod", "a", 4, 0),
			map[string]float64{}},
		{"a count written back down", event("Warning", "BackOff", "Pod", "a", 4, 0), event("Warning", "BackOff", "Pod", "a", 1, 0),
			map[string]float64{}},
		{"a core/v1 type that is neither Normal nor Warning", nil, event("Error", "Crashed", "Pod", "a", 1, 0),
			map[string]float64{"written/_other/Crashed/Pod/a": 1}},
		{"a cluster-scoped object", nil, event("Warning", "NodeNotReady", "Node", "", 1, 0),
			map[string]float64{"written/Warning/NodeNotReady/Node/": 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := New(Config{MaxSeries: DefaultMaxSeries})
			c.Written(tc.old, tc.store)
			if got := samples(t, c); fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("series = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestCapturedRemembersCounts(t *testing.T) {
	c := New(Config{MaxSeries: DefaultMaxSeries})
	captured := func(uid string, added bool, count, series int32) {
		e := &corev1.Event{Type: "Warning", Reason: "BackOff", Count: count,
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "a"}}
		e.UID = types.UID(uid)
		if series > 0 {
			e.Series = &corev1.EventSeries{Count: series}
		}
		c.Captured("kubernetes", added, e)
	}
	const s = "kubernetes/Warning/BackOff/Pod/a"
	for _, step := range []struct {
		what   string
		do     func()
		counts float64
	}{
		{"ADDED with count 3 counts 3", func() { captured("a", true, 3, 0) }, 3},
		{"MODIFIED to 5 counts the rise", func() { captured("a", false, 5, 0) }, 5},
		{"MODIFIED without a rise counts nothing", func() { captured("a", false, 5, 0) }, 5},
		{"MODIFIED series to 12 counts 7", func() { captured("a", false, 0, 12) }, 12},
		{"MODIFIED of an Event never seen counts one", func() { captured("b", false, 40, 0) }, 13},
		{"then its rise", func() { captured("b", false, 42, 0) }, 15},
	} {
		step.do()
		if got := samples(t, c)[s]; got != step.counts {
			t.Fatalf("%s: %s = %v, want %v", step.what, s, got, step.counts)
		}
	}
}

func TestAllowListsAndValues(t *testing.T) {
	c := New(Config{
		MaxSeries:  DefaultMaxSeries,
		Reasons:    []string{"BackOff", "FailedScheduling"},
		Namespaces: []string{"prod"},
		Kinds:      []string{"Pod", "Node"},
	})
	long := strings.Repeat("r", 300)
	for _, e := range []*core.Event{
		event("Warning", "BackOff", "Pod", "prod", 1, 0),
		event("Warning", "BackOff", "Pod", "dev", 1, 0),
		event("Warning", "Invented", "Deployment", "dev", 1, 0),
		event("Warning", "Invented2", "Deployment", "dev", 2, 0),
		event("Warning", "FailedScheduling", "Node", "", 1, 0),
		event("Warning", "", "", "prod", 1, 0),
	} {
		c.Written(nil, e)
	}
	want := map[string]float64{
		"written/Warning/BackOff/Pod/prod":       1,
		"written/Warning/BackOff/Pod/_other":     1,
		"written/Warning/_other/_other/_other":   3,
		"written/Warning/FailedScheduling/Node/": 1,
		"written/Warning///prod":                 1,
	}
	if got := samples(t, c); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("series = %v, want %v", got, want)
	}
	if got := folded(t, c, SourceWritten); got != 0 {
		t.Errorf("folded by the cap = %v, want 0: allow-lists are not the cap", got)
	}

	open := New(Config{MaxSeries: DefaultMaxSeries})
	open.Written(nil, event("Warning", long, "Pod", "a", 1, 0))
	open.Written(nil, event("Warning", "bad\xffutf8", "Pod", "a", 1, 0))
	want = map[string]float64{
		"written/Warning/" + long[:maxValueLength] + "/Pod/a": 1,
		"written/Warning/bad?utf8/Pod/a":                      1,
	}
	if got := samples(t, open); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("series = %v, want %v", got, want)
	}
}

// TestSeriesCapUnderStorm: a storm of 10,000 distinct reasons, on top of a
// cluster's usual series, leaves exactly the cap's number of series on
// /metrics, and the Warnings' total exact.
func TestSeriesCapUnderStorm(t *testing.T) {
	for _, maxSeries := range []int{DefaultMaxSeries, 1000} {
		t.Run(fmt.Sprint(maxSeries), func(t *testing.T) {
			c := New(Config{MaxSeries: maxSeries})
			var warnings float64
			for i := 0; i < 50; i++ {
				c.Written(nil, event("Normal", "Pulled", "Pod", fmt.Sprintf("ns-%d", i), 1, 0))
				c.Written(nil, event("Warning", "BackOff", "Pod", fmt.Sprintf("ns-%d", i), 1, 0))
				warnings++
			}
			const storm = 10000
			for i := 0; i < storm; i++ {
				c.Written(nil, event("Warning", fmt.Sprintf("Invented-%d", i), "Pod", "storm", 2, 0))
				warnings += 2
			}
			// Known series keep counting during and after the storm.
			c.Written(event("Warning", "BackOff", "Pod", "ns-0", 1, 0), event("Warning", "BackOff", "Pod", "ns-0", 2, 0))
			warnings++

			// The regular series fill the cap but for the room kept for
			// the fold series of the three types; the storm used one.
			families := scrape(t, c)
			got := samplesOf(families)
			if want := maxSeries - foldReserve + 1; len(got) != want {
				t.Errorf("%d series on /metrics, want %d (cap %d)", len(got), want, maxSeries)
			}
			if g := families["event_apiserver_events_series"].GetMetric()[0].GetGauge().GetValue(); g != float64(len(got)) {
				t.Errorf("event_apiserver_events_series = %v, want %d", g, len(got))
			}
			// Every type folding: Normal and _other too.
			c.Written(nil, event("Normal", "InventedNormal", "Pod", "storm", 1, 0))
			c.Written(nil, event("Invented", "InventedType", "Pod", "storm", 1, 0))
			families = scrape(t, c)
			if n := len(samplesOf(families)); n != maxSeries {
				t.Errorf("%d series with all three fold series, want the cap, %d", n, maxSeries)
			}
			var sum float64
			for k, v := range got {
				if strings.HasPrefix(k, "written/Warning/") {
					sum += v
				}
			}
			if sum != warnings {
				t.Errorf("Warnings counted %v, want all %v", sum, warnings)
			}
			// The storm's reasons that found no room, two occurrences each.
			kept := maxSeries - foldReserve - 100 // less the 100 usual ones
			wantFolded := float64(2 * (storm - kept))
			if f := foldedOf(families, SourceWritten); f != wantFolded+2 {
				t.Errorf("folded = %v, want %v", f, wantFolded)
			}
			if o := got["written/Warning/_other/_other/_other"]; o != wantFolded {
				t.Errorf("the Warning fold series = %v, want %v", o, wantFolded)
			}
			if b := got["written/Warning/BackOff/Pod/ns-0"]; b != 2 {
				t.Errorf("a known series after the storm = %v, want 2", b)
			}
		})
	}
}

// fakeClock is a settable clock.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeClock) step(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
}

// TestIdleSeriesGiveRoomBack: once full, a new series folds until the
// storm's series have been idle for an hour; then they are dropped and new
// ones get series of their own. A series that kept counting stays.
func TestIdleSeriesGiveRoomBack(t *testing.T) {
	clock := &fakeClock{now: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)}
	const maxSeries = 20
	c := New(Config{MaxSeries: maxSeries, Now: clock.Now})
	for i := 0; i < 100; i++ {
		c.Written(nil, event("Warning", fmt.Sprintf("Storm-%d", i), "Pod", "a", 1, 0))
	}
	if n := len(samples(t, c)); n != maxSeries-foldReserve+1 {
		t.Fatalf("%d series after the storm, want %d (the regular ones and one fold series)", n, maxSeries-foldReserve+1)
	}
	clock.step(30 * time.Minute)
	c.Written(event("Warning", "Storm-0", "Pod", "a", 1, 0), event("Warning", "Storm-0", "Pod", "a", 2, 0))
	c.Written(nil, event("Warning", "Fresh-1", "Pod", "a", 1, 0))
	if _, ok := samples(t, c)["written/Warning/Fresh-1/Pod/a"]; ok {
		t.Fatal("a new series got room while the storm's were idle for 30 minutes only")
	}
	clock.step(31 * time.Minute)
	c.Written(nil, event("Warning", "Fresh-2", "Pod", "a", 1, 0))
	got := samples(t, c)
	if got["written/Warning/Fresh-2/Pod/a"] != 1 {
		t.Errorf("no series of its own for a new reason after the storm's were idle for an hour: %v", got)
	}
	if got["written/Warning/Storm-0/Pod/a"] != 2 {
		t.Errorf("the series that kept counting was dropped: %v", got)
	}
	if _, ok := got["written/Warning/Storm-1/Pod/a"]; ok {
		t.Errorf("an idle series was kept: %v", got)
	}
	// The sweep looks at most once a minute: the next storm folds at once.
	for i := 0; i < 100; i++ {
		c.Written(nil, event("Warning", fmt.Sprintf("Again-%d", i), "Pod", "a", 1, 0))
	}
	if n := len(samples(t, c)); n > maxSeries {
		t.Errorf("%d series, over the cap of %d", n, maxSeries)
	}
}

func TestSeenCountsBounded(t *testing.T) {
	s := newSeenCounts()
	s.swap("hot", 1)
	for i := 0; i < 5*seenGeneration; i++ {
		s.swap(fmt.Sprint(i), 1)
		if i%1000 == 0 {
			s.swap("hot", int32(i))
		}
		if s.len() > 2*seenGeneration {
			t.Fatalf("%d remembered, over %d", s.len(), 2*seenGeneration)
		}
	}
	if _, ok := s.swap("hot", 0); !ok {
		t.Error("an Event that kept changing was forgotten")
	}
	if _, ok := s.swap("0", 0); ok {
		t.Error("an Event quiet for generations is still remembered")
	}
}

// TestConcurrentWritesAndScrapes runs under the race detector in the unit
// tier: writers, capture and scrapes at once.
func TestConcurrentWritesAndScrapes(t *testing.T) {
	c := New(Config{MaxSeries: 50})
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 500; i++ {
				c.Written(nil, event("Warning", fmt.Sprintf("R%d", i%80), "Pod", "a", 1, 0))
				c.Captured("kubernetes", i%2 == 0, &corev1.Event{Type: "Normal", Reason: "X", Count: int32(i)})
			}
		}()
	}
	for i := 0; i < 20; i++ {
		if n := len(samples(t, c)); n > 50 {
			t.Errorf("%d series, over the cap", n)
		}
	}
	wg.Wait()
	var total float64
	for k, v := range samples(t, c) {
		if strings.HasPrefix(k, "written/") {
			total += v
		}
	}
	if total != 4*500 {
		t.Errorf("counted %v written occurrences, want %d", total, 4*500)
	}
}

// TestMemoryPerSeries measures what a full Counter holds: 10,000 series
// with 128-byte reasons, the worst a storm can make of the default cap;
// and what capture's remembered counts hold when full.
func TestMemoryPerSeries(t *testing.T) {
	if testing.Short() {
		t.Skip("measures the heap; not under -short")
	}
	reason := strings.Repeat("x", maxValueLength-8)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	c := New(Config{MaxSeries: DefaultMaxSeries})
	for i := 0; i < DefaultMaxSeries; i++ {
		c.Written(nil, event("Warning", fmt.Sprintf("%s%08d", reason, i), "Deployment", "some-namespace", 1, 0))
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	perSeries := float64(after.HeapAlloc-before.HeapAlloc) / DefaultMaxSeries
	t.Logf("%.0f bytes a series, %.1f MiB for %d", perSeries, perSeries*DefaultMaxSeries/(1<<20), DefaultMaxSeries)
	if perSeries > 1024 {
		t.Errorf("%.0f bytes a series, more than the 1 KiB docs/operations.md allows for", perSeries)
	}
	runtime.KeepAlive(c)

	// What capture remembers: two full generations of counts.
	runtime.GC()
	runtime.ReadMemStats(&before)
	s := newSeenCounts()
	for i := 0; i < 2*seenGeneration; i++ {
		s.swap(fmt.Sprintf("uid-%d", i), 1)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	perEvent := float64(after.HeapAlloc-before.HeapAlloc) / float64(s.len())
	t.Logf("capture remembers %d Events' counts in %.0f bytes each, %.1f MiB", s.len(), perEvent, perEvent*float64(s.len())/(1<<20))
	if perEvent > 48 {
		t.Errorf("%.0f bytes an Event remembered, more than the 2.3 MiB for 65,536 docs/operations.md says", perEvent)
	}
	runtime.KeepAlive(s)
}

func TestNilCounterCountsNothing(t *testing.T) {
	var c *Counter
	c.Written(nil, event("Warning", "BackOff", "Pod", "a", 1, 0))
	c.Captured("kubernetes", true, &corev1.Event{})
	if err := testutil.CustomCollectAndCompare(c.Collector(), strings.NewReader("")); err != nil {
		t.Error(err)
	}
}
