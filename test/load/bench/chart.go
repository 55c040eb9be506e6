package bench

import (
	"fmt"
	"html"
	"math"
	"strings"
)

// chartQueries are the panels of the describe chart.
var chartQueries = []string{"describe pod", "events -A --for"}

var chartColors = map[string]string{KubeDefault: "#d62728", KubeCached: "#ff7f0e", EventServer: "#1f77b4"}

const (
	panelW, panelH = 470, 330
	marginL        = 85
	marginR        = 70
	marginT        = 60
	marginB        = 50
	legendRow      = 20
)

// DescribeChartSVG draws the median p50 latency of the describe queries
// against store size, one panel per query, one line per server, both axes
// logarithmic.
func (r *Results) DescribeChartSVG() string {
	rows := map[string]Row{}
	for _, row := range r.Rows() {
		rows[row.Key()] = row
	}
	sizes := r.Options.Sizes
	servers := r.Options.Servers
	width := len(chartQueries) * panelW
	height := panelH + 20 + legendRow*len(servers)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	for i, q := range chartQueries {
		series := map[string][]point{}
		for _, s := range servers {
			for _, n := range sizes {
				row, ok := rows[fmt.Sprintf("describe %s @%d p50", q, n)]
				if !ok {
					continue
				}
				if v, ok := row.Median[s]; ok && v > 0 {
					series[s] = append(series[s], point{float64(n), v})
				}
			}
		}
		drawPanel(&b, i*panelW, q, servers, series)
	}
	// Legend, one server a row.
	for i, s := range servers {
		x := marginL
		yy := panelH + 10 + i*legendRow
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2.5"/>`+"\n", x, yy, x+24, yy, chartColors[s])
		fmt.Fprintf(&b, `<circle cx="%d" cy="%d" r="3.5" fill="%s"/>`+"\n", x+12, yy, chartColors[s])
		fmt.Fprintf(&b, `<text x="%d" y="%d">%s: %s</text>`+"\n", x+32, yy+4, s, html.EscapeString(Titles[s]))
	}
	b.WriteString("</svg>\n")
	return b.String()
}

type point struct{ x, y float64 }

func drawPanel(b *strings.Builder, x0 int, title string, servers []string, series map[string][]point) {
	pw := float64(panelW - marginL - marginR)
	ph := float64(panelH - marginT - marginB)
	px := float64(x0 + marginL)
	py := float64(marginT)

	xmin, xmax := math.Inf(1), math.Inf(-1)
	ymin, ymax := math.Inf(1), math.Inf(-1)
	for _, pts := range series {
		for _, p := range pts {
			xmin, xmax = math.Min(xmin, p.x), math.Max(xmax, p.x)
			ymin, ymax = math.Min(ymin, p.y), math.Max(ymax, p.y)
		}
	}
	fmt.Fprintf(b, `<text x="%.0f" y="%d" font-size="14" font-weight="bold">%s</text>`+"\n",
		px, marginT-32, html.EscapeString("kubectl "+title))
	fmt.Fprintf(b, `<text x="%.0f" y="%d" fill="#555">median p50 latency, both axes logarithmic</text>`+"\n", px, marginT-14)
	if math.IsInf(xmin, 1) {
		fmt.Fprintf(b, `<text x="%.0f" y="%.0f">no data</text>`+"\n", px+pw/2-25, py+ph/2)
		return
	}
	// Whole decades around the data.
	lx0, lx1 := math.Floor(math.Log10(xmin)), math.Ceil(math.Log10(xmax))
	if lx1 == lx0 {
		lx1++
	}
	ly0, ly1 := math.Floor(math.Log10(ymin)), math.Ceil(math.Log10(ymax))
	if ly1 == ly0 {
		ly1++
	}
	sx := func(v float64) float64 { return px + (math.Log10(v)-lx0)/(lx1-lx0)*pw }
	sy := func(v float64) float64 { return py + ph - (math.Log10(v)-ly0)/(ly1-ly0)*ph }

	fmt.Fprintf(b, `<rect x="%.0f" y="%.0f" width="%.0f" height="%.0f" fill="none" stroke="#888"/>`+"\n", px, py, pw, ph)
	for d := lx0; d <= lx1; d++ {
		x := sx(math.Pow(10, d))
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.0f" x2="%.1f" y2="%.0f" stroke="#eee"/>`+"\n", x, py, x, py+ph)
		fmt.Fprintf(b, `<text x="%.1f" y="%.0f" text-anchor="middle">%s</text>`+"\n", x, py+ph+16, countLabel(math.Pow(10, d)))
	}
	for d := ly0; d <= ly1; d++ {
		y := sy(math.Pow(10, d))
		fmt.Fprintf(b, `<line x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="#eee"/>`+"\n", px, y, px+pw, y)
		fmt.Fprintf(b, `<text x="%.0f" y="%.1f" text-anchor="end">%s</text>`+"\n", px-6, y+4, msLabel(math.Pow(10, d)))
	}
	fmt.Fprintf(b, `<text x="%.0f" y="%.0f" text-anchor="middle">Events in the store</text>`+"\n", px+pw/2, py+ph+36)
	fmt.Fprintf(b, `<text transform="translate(%.0f,%.0f) rotate(-90)" text-anchor="middle">p50 latency</text>`+"\n", px-62, py+ph/2)

	for _, s := range servers {
		pts := series[s]
		if len(pts) == 0 {
			continue
		}
		var path []string
		for _, p := range pts {
			path = append(path, fmt.Sprintf("%.1f,%.1f", sx(p.x), sy(p.y)))
		}
		fmt.Fprintf(b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2.5"/>`+"\n", strings.Join(path, " "), chartColors[s])
		// event-apiserver's labels go under its line, the others' above,
		// so that close lines keep readable labels.
		dy := -6.0
		if s == EventServer {
			dy = 15
		}
		for _, p := range pts {
			fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"/>`+"\n", sx(p.x), sy(p.y), chartColors[s])
			fmt.Fprintf(b, `<text x="%.1f" y="%.1f" font-size="10" fill="%s">%s</text>`+"\n", sx(p.x)+5, sy(p.y)+dy, chartColors[s], msLabel(p.y))
		}
	}
}

func countLabel(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%gM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%gk", v/1e3)
	default:
		return fmt.Sprintf("%g", v)
	}
}

// msLabel prints a latency given in milliseconds.
func msLabel(v float64) string {
	switch {
	case v >= 1000:
		return fmt.Sprintf("%.3gs", v/1000)
	case v >= 1:
		return fmt.Sprintf("%.3gms", v)
	default:
		return fmt.Sprintf("%.3gµs", v*1000)
	}
}
