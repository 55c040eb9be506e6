package eventmetrics

import (
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/eventapiserver/event-apiserver/pkg/apis/core"
)

const (
	// SourceWritten is the source label of the Events this server's
	// Events API stored.
	SourceWritten = "written"
	// Other is the label value of whatever an allow-list or the series cap
	// folds. A namespace cannot start with "_", nor does a kind.
	Other = "_other"

	// DefaultMaxSeries is --event-metrics-max-series' default. A series
	// costs a few hundred bytes here and about as much in Prometheus; a
	// cluster's steady state is reasons (a few hundred) by the namespaces
	// and kinds each appears in, a few thousand in most.
	DefaultMaxSeries = 10000
	// foldReserve is the room the cap keeps for the fold series of one
	// source, one per type value.
	foldReserve = 3
	// MinMaxSeries is the smallest cap: the fold series and one more.
	MinMaxSeries = foldReserve + 1

	// maxValueLength cuts label values: reason is at most 128 bytes
	// through events.k8s.io/v1 and unbounded through core/v1.
	maxValueLength = 128
	// idle is how long a series must be unchanged before the cap may drop
	// it: an hour-long rate() or increase() over it is zero by then.
	idle = time.Hour
	// sweepEvery bounds how often a full Counter looks for idle series, a
	// pass over all of them.
	sweepEvery = time.Minute
)

// Config of a Counter.
type Config struct {
	// MaxSeries caps the series of event_apiserver_events_total; at least
	// MinMaxSeries.
	MaxSeries int
	// Reasons, Namespaces and Kinds are allow-lists: when one is set, the
	// values it does not list are counted as Other. Empty: every value.
	Reasons, Namespaces, Kinds []string
	// Now is the clock; time.Now by default.
	Now func() time.Time
}

// key is one series of event_apiserver_events_total.
type key struct {
	source, typ, reason, kind, namespace string
}

type value struct {
	count float64
	// changed is when count last rose, for the cap's sweep of idle series.
	changed time.Time
}

// Counter counts Event occurrences by source, type, reason, regarding kind
// and regarding namespace. A nil Counter counts nothing. Its methods may be
// called concurrently.
type Counter struct {
	maxSeries                  int
	reasons, namespaces, kinds sets.Set[string]
	now                        func() time.Time

	mu     sync.Mutex
	series map[key]*value
	// folded counts, by source, the occurrences the cap kept from a series
	// of their own.
	folded    map[string]float64
	lastSweep time.Time
	seen      seenCounts
}

// New makes a Counter and makes it the one /metrics shows (a server has
// one; the last made wins).
func New(cfg Config) *Counter {
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	c := &Counter{
		maxSeries:  max(cfg.MaxSeries, MinMaxSeries),
		reasons:    allowList(cfg.Reasons),
		namespaces: allowList(cfg.Namespaces),
		kinds:      allowList(cfg.Kinds),
		now:        now,
		series:     map[key]*value{},
		folded:     map[string]float64{},
		seen:       newSeenCounts(),
	}
	register(c)
	return c
}

func allowList(values []string) sets.Set[string] {
	if len(values) == 0 {
		return nil
	}
	return sets.New(values...)
}

// Written counts a write the Events API stored: stored is the Event as
// stored, old the one it replaced, nil for a create.
func (c *Counter) Written(old, stored *core.Event) {
	if c == nil || stored == nil {
		return
	}
	n := occurrences(stored.Count, internalSeriesCount(stored.Series))
	if old != nil {
		n -= occurrences(old.Count, internalSeriesCount(old.Series))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.addLocked(SourceWritten, stored.Type, stored.Reason, stored.InvolvedObject.Kind, stored.InvolvedObject.Namespace, n)
}

// Captured counts an Event history capture read from a watch of source:
// added says the watch reported it new (ADDED), else it changed
// (MODIFIED).
func (c *Counter) Captured(source string, added bool, e *corev1.Event) {
	if c == nil || e == nil {
		return
	}
	var series int32
	if e.Series != nil {
		series = e.Series.Count
	}
	n := occurrences(e.Count, series)
	c.mu.Lock()
	defer c.mu.Unlock()
	prev, known := c.seen.swap(string(e.UID), n)
	switch {
	case added:
	case known:
		n -= prev
	default:
		// Seen before this process, or forgotten: it happened at least
		// once more to be written again.
		n = 1
	}
	c.addLocked(source, e.Type, e.Reason, e.InvolvedObject.Kind, e.InvolvedObject.Namespace, n)
}

// occurrences is how many times an Event says it happened: its count, or
// its series' count, and at least once.
func occurrences(count, seriesCount int32) int32 {
	return max(count, seriesCount, 1)
}

func internalSeriesCount(s *core.EventSeries) int32 {
	if s == nil {
		return 0
	}
	return s.Count
}

// addLocked counts n occurrences, when there are any; c.mu is held.
func (c *Counter) addLocked(source, typ, reason, kind, namespace string, n int32) {
	if n <= 0 {
		return
	}
	now := c.now()
	k := key{
		source:    source,
		typ:       typeValue(typ),
		reason:    labelValue(reason, c.reasons),
		kind:      labelValue(kind, c.kinds),
		namespace: labelValue(namespace, c.namespaces),
	}
	v, ok := c.series[k]
	if !ok && !c.room(now, c.maxSeries-foldReserve) {
		c.folded[source] += float64(n)
		k = key{source: source, typ: k.typ, reason: Other, kind: Other, namespace: Other}
		if v, ok = c.series[k]; !ok && !c.room(now, c.maxSeries) {
			return
		}
	}
	if !ok {
		// Cut from the Event's strings, which the series must not keep.
		k.reason, k.kind, k.namespace = strings.Clone(k.reason), strings.Clone(k.kind), strings.Clone(k.namespace)
		v = &value{}
		c.series[k] = v
	}
	v.count += float64(n)
	v.changed = now
}

// room reports whether a series can be added below limit, dropping the
// series idle for an hour first when there is none and the last look for
// them is a minute old.
func (c *Counter) room(now time.Time, limit int) bool {
	if len(c.series) < limit {
		return true
	}
	if now.Sub(c.lastSweep) < sweepEvery {
		return false
	}
	c.lastSweep = now
	for k, v := range c.series {
		if now.Sub(v.changed) >= idle {
			delete(c.series, k)
		}
	}
	return len(c.series) < limit
}

func typeValue(t string) string {
	if t == corev1.EventTypeNormal || t == corev1.EventTypeWarning {
		return t
	}
	return Other
}

// labelValue is v as a label value: Other when an allow-list leaves it
// out (an empty value is always itself), cut to maxValueLength, valid UTF-8.
func labelValue(v string, allowed sets.Set[string]) string {
	if v != "" && allowed != nil && !allowed.Has(v) {
		return Other
	}
	if len(v) > maxValueLength {
		v = v[:maxValueLength]
	}
	if !utf8.ValidString(v) {
		v = strings.ToValidUTF8(v, "?")
	}
	return v
}
