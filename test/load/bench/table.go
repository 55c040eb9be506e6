package bench

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/eventapiserver/event-apiserver/test/load/workload"
)

// Row is one measurement across servers: the median over rounds.
type Row struct {
	Workload, Metric, Unit string
	Better                 workload.Better
	// Median, Min and Max by server (A, B, C, Ceiling) over rounds;
	// absent when not measured.
	Median, Min, Max map[string]float64
	// Errors and Count by server, summed over rounds.
	Errors map[string]int64
	Count  map[string]int64
}

// Key is the row's measurement key.
func (r Row) Key() string { return r.Workload + " " + r.Metric }

// ceilingKey is the ceiling's create throughput, what the servers' create
// throughput is a share of.
const ceilingKey = "etcd-ceiling core/v1 create"

// Rows gathers the results into rows, in the order measurements first
// appear.
func (r *Results) Rows() []Row {
	values := map[string]map[string][]float64{}
	rows := map[string]*Row{}
	var order []string
	for _, run := range r.Runs {
		if run.Round == 0 {
			continue // profiling round
		}
		for _, m := range run.Measurements {
			k := m.Key()
			row, ok := rows[k]
			if !ok {
				row = &Row{Workload: m.Workload, Metric: m.Metric, Unit: m.Unit, Better: m.Better,
					Median: map[string]float64{}, Min: map[string]float64{}, Max: map[string]float64{},
					Errors: map[string]int64{}, Count: map[string]int64{}}
				rows[k] = row
				values[k] = map[string][]float64{}
				order = append(order, k)
			}
			values[k][run.Server] = append(values[k][run.Server], m.Value)
			row.Errors[run.Server] += m.Errors
			row.Count[run.Server] += m.Count
		}
	}
	out := make([]Row, 0, len(order))
	for _, k := range order {
		row := rows[k]
		for s, vs := range values[k] {
			row.Median[s] = median(vs)
			row.Min[s], row.Max[s] = vs[0], vs[0]
			for _, v := range vs {
				row.Min[s], row.Max[s] = math.Min(row.Min[s], v), math.Max(row.Max[s], v)
			}
		}
		out = append(out, *row)
	}
	return out
}

func median(vs []float64) float64 {
	s := append([]float64(nil), vs...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// Markdown is the table of medians: per server, the ratio of
// event-apiserver to each kube-apiserver configuration, and for create
// throughput the share of the etcd ceiling.
func (r *Results) Markdown() string {
	rows := r.Rows()
	ceiling, haveCeiling := 0.0, false
	for _, row := range rows {
		if row.Key() == ceilingKey {
			ceiling, haveCeiling = row.Median[Ceiling], true
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Medians over %d round(s), with the range (min–max) of the rounds for A, B and C. "+
		"↑: higher is better, ↓: lower is better.\n\n", r.Options.Rounds)
	for _, s := range []string{KubeDefault, KubeCached, EventServer} {
		fmt.Fprintf(&b, "- **%s**: %s\n", s, Titles[s])
	}
	fmt.Fprintf(&b, "- **etcd**: the etcd ceiling, the create workload written straight to a fresh etcd\n\n")
	b.WriteString("| workload | metric | unit | A | B | C | C/A | C/B | etcd ceiling | C/ceiling | errors A/B/C |\n")
	b.WriteString("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n")
	for _, row := range rows {
		unit := row.Unit
		switch row.Better {
		case workload.Higher:
			unit += " ↑"
		case workload.Lower:
			unit += " ↓"
		}
		cell := func(s string) string {
			v, ok := row.Median[s]
			if !ok {
				return ""
			}
			if row.Min[s] == row.Max[s] {
				return format(v)
			}
			return fmt.Sprintf("%s (%s–%s)", format(v), format(row.Min[s]), format(row.Max[s]))
		}
		ratio := func(s string) string {
			c, okC := row.Median[EventServer]
			v, ok := row.Median[s]
			if !okC || !ok || v == 0 || row.Better == workload.Info {
				return ""
			}
			return format(c/v) + "×"
		}
		ceilingCell, share := "", ""
		if row.Workload == "etcd-ceiling" {
			ceilingCell = cell(Ceiling)
		} else if row.Workload == "create" && row.Unit == "events/s" && haveCeiling {
			ceilingCell = format(ceiling)
			if c, ok := row.Median[EventServer]; ok && ceiling > 0 {
				share = fmt.Sprintf("%.0f%%", 100*c/ceiling)
			}
		}
		errs := []string{}
		for _, s := range []string{KubeDefault, KubeCached, EventServer} {
			if _, ok := row.Median[s]; ok {
				errs = append(errs, fmt.Sprint(row.Errors[s]))
			} else {
				errs = append(errs, "-")
			}
		}
		if row.Workload == "etcd-ceiling" {
			errs = []string{fmt.Sprint(row.Errors[Ceiling])}
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			row.Workload, row.Metric, unit, cell(KubeDefault), cell(KubeCached), cell(EventServer),
			ratio(KubeDefault), ratio(KubeCached), ceilingCell, share, strings.Join(errs, "/"))
	}
	b.WriteString(r.doorMarkdown(rows))
	// A server that ran out of memory or time (kube-apiserver with its cache
	// at the largest sizes) ends its run early; say so, since its later
	// rows are simply missing.
	sep := "\n"
	for _, run := range r.Runs {
		if run.Error != "" {
			fmt.Fprintf(&b, "%s- %s round %d stopped early: %s\n", sep, run.Server, run.Round, run.Error)
			sep = ""
		}
	}
	return b.String()
}

// format prints three significant digits, without exponent for the
// magnitudes benchmarks produce.
func format(v float64) string {
	a := math.Abs(v)
	switch {
	case a == 0:
		return "0"
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	case a >= 1:
		return fmt.Sprintf("%.2f", v)
	case a >= 0.01:
		return fmt.Sprintf("%.3f", v)
	default:
		return fmt.Sprintf("%.2g", v)
	}
}

// doorMarkdown is the table of the runs through the front door, when
// there are any: A (kube-apiserver straight), E (kube-apiserver behind the
// door) and D (event-apiserver behind the door). E/A is what the door
// costs; D/E is what routing Events to event-apiserver gains behind it.
func (r *Results) doorMarkdown(rows []Row) string {
	var b strings.Builder
	for _, row := range rows {
		_, d := row.Median[DoorEvents]
		_, e := row.Median[DoorKube]
		if !d && !e {
			continue
		}
		if b.Len() == 0 {
			b.WriteString("\nThrough the nginx front door (deploy/door; clients on its port with kube-apiserver's admin token), " +
				"medians with the range of the rounds:\n\n")
			for _, s := range []string{KubeDefault, DoorKube, DoorEvents} {
				fmt.Fprintf(&b, "- **%s**: %s\n", s, Titles[s])
			}
			b.WriteString("\n| workload | metric | unit | A | E | D | E/A (the door) | D/E | errors A/E/D |\n")
			b.WriteString("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | --- |\n")
		}
		cell := func(s string) string {
			v, ok := row.Median[s]
			if !ok {
				return ""
			}
			if row.Min[s] == row.Max[s] {
				return format(v)
			}
			return fmt.Sprintf("%s (%s–%s)", format(v), format(row.Min[s]), format(row.Max[s]))
		}
		ratio := func(num, den string) string {
			n, okN := row.Median[num]
			v, ok := row.Median[den]
			if !okN || !ok || v == 0 || row.Better == workload.Info {
				return ""
			}
			return format(n/v) + "×"
		}
		unit := row.Unit
		switch row.Better {
		case workload.Higher:
			unit += " ↑"
		case workload.Lower:
			unit += " ↓"
		}
		errs := []string{}
		for _, s := range []string{KubeDefault, DoorKube, DoorEvents} {
			if _, ok := row.Median[s]; ok {
				errs = append(errs, fmt.Sprint(row.Errors[s]))
			} else {
				errs = append(errs, "-")
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", row.Workload, row.Metric, unit,
			cell(KubeDefault), cell(DoorKube), cell(DoorEvents), ratio(DoorKube, KubeDefault), ratio(DoorEvents, DoorKube), strings.Join(errs, "/"))
	}
	return b.String()
}
