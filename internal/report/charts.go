package report

import (
	"fmt"
	"image/color"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/palette"
	"gonum.org/v1/plot/palette/moreland"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/irqpilot/irqpilot/internal/load"
)

// Chart is one plot and the height it wants.
type Chart struct {
	Name   string // file-name friendly: "cluster", "busy-over-time", …
	Title  string
	Plot   *plot.Plot
	Height vg.Length
}

// Options tune the charts.
type Options struct {
	// Width of the charts (default 10 inches).
	Width vg.Length
	// TopIRQs is how many IRQs the rate chart shows (default 8).
	TopIRQs int
}

func (o *Options) defaults() {
	if o.Width <= 0 {
		o.Width = 10 * vg.Inch
	}
	if o.TopIRQs <= 0 {
		o.TopIRQs = 8
	}
}

// Colours of the utilisation components, the same in every chart.
var (
	colIRQ    = color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff} // red
	colSoft   = color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff} // orange
	colSystem = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff} // blue
	colUser   = color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff} // green
	colOther  = color.RGBA{R: 0xa0, G: 0xa0, B: 0xa0, A: 0xff} // grey
)

// Charts builds every chart for the runs (one run per host or recording).
func Charts(runs []*Run, o Options) ([]Chart, error) {
	o.defaults()
	if len(runs) == 0 {
		return nil, fmt.Errorf("no recordings")
	}
	l, err := newLayout(runs, o)
	if err != nil {
		return nil, err
	}
	cost, costDrawn, err := costChart(runs, o)
	if err != nil {
		return nil, err
	}
	dev, err := DeviceChart(runs, o)
	if err != nil {
		return nil, err
	}
	// A panel with nothing to draw is left out; the first chart says why.
	var none []string
	out := []Chart{l.cluster}
	if hasLegend(dev) {
		out = append(out, Chart{Name: "irq-by-device", Title: dev.Title.Text, Plot: dev, Height: 4.2 * vg.Inch})
	} else {
		none = append(none, "no interrupts-by-device chart: no interrupts fired")
	}
	var costCharts []Chart
	if costDrawn {
		costCharts = []Chart{{Name: "interrupt-time", Title: cost.Title.Text, Plot: cost, Height: 4.5 * vg.Inch}}
	} else {
		none = append(none, "no interrupt-time chart: no interrupt time by source in the recording")
	}
	if len(none) > 0 {
		note := "\n(" + strings.Join(none, "; ") + ")"
		out[0].Plot.Title.Text += note
		out[0].Title += note
	}
	out = append(out, l.soft...)
	for _, s := range []struct {
		name, title string
		v           func(*load.CPULoad) float64
	}{
		{"net-rx-over-time", "NET_RX softirqs per second per CPU (receive)", func(c *load.CPULoad) float64 { return c.NetRx }},
		{"net-tx-over-time", "NET_TX softirqs per second per CPU (transmit completion)", func(c *load.CPULoad) float64 { return c.NetTx }},
		{"block-over-time", "BLOCK softirqs per second per CPU (storage completions)", func(c *load.CPULoad) float64 { return c.Block }},
	} {
		p, top := RateOverTimeChart(runs, s.title, s.v)
		out = append(out, l.heat(s.name, p, top, "softirqs per second")...)
	}
	out = append(out, l.busy...)
	out = append(out, l.irqRates...)
	return append(out, costCharts...), nil
}

// layout holds the charts Charts and FleetCharts both draw: the cluster
// view, the heat maps of interrupt and busy time per CPU over time (each
// with its colour scale) and the busiest IRQs' rates.
type layout struct {
	cluster    Chart
	irqRates   []Chart // none when no IRQ is worth a line (the cluster chart's title says so)
	irqNote    string  // why there is no IRQ-rate chart
	soft, busy []Chart // heat map, colour scale
	heatH      vg.Length
}

func newLayout(runs []*Run, o Options) (*layout, error) {
	cl, err := ClusterChart(runs, o)
	if err != nil {
		return nil, err
	}
	rows := 0
	for _, r := range runs {
		rows += len(r.CPUs)
	}
	l := &layout{heatH: vg.Length(math.Min(10, math.Max(2.6, 1.3+0.2*float64(rows)))) * vg.Inch}
	soft, softTop := overTime(runs, "CPU interrupt % over time (irq + softirq)", (*load.CPUTime).IRQTime)
	busy, busyTop := overTime(runs, "CPU busy % over time (100 − idle − iowait)", (*load.CPUTime).Busy)
	irq, none, err := IRQChart(runs, o)
	if err != nil {
		return nil, err
	}
	if irq == nil {
		// An empty panel says nothing: leave it out and say why where the
		// charts start.
		cl.Title.Text += "\n(" + none + ")"
		l.irqNote = none
	}
	l.cluster = Chart{Name: "cluster", Title: cl.Title.Text, Plot: cl, Height: 4.2 * vg.Inch}
	l.soft = l.heat("irq-soft-over-time", soft, softTop, "% of CPU in irq + softirq")
	l.busy = l.heat("busy-over-time", busy, busyTop, "% of CPU busy")
	if irq != nil {
		l.irqRates = []Chart{{Name: "irq-rates", Title: irq.Title.Text, Plot: irq, Height: 4.5 * vg.Inch}}
	}
	return l, nil
}

// heat is a heat map chart and, under it, its colour scale (0 … top in unit).
func (l *layout) heat(name string, p *plot.Plot, top float64, unit string) []Chart {
	return []Chart{
		{Name: name, Title: p.Title.Text, Plot: p, Height: l.heatH},
		{Name: name + "-scale", Title: "colour scale", Plot: ScaleChart(top, unit), Height: 0.75 * vg.Inch},
	}
}

// sans switches a plot's text to the sans-serif face of the embedded
// Liberation fonts (cleaner for charts than the default serif), without
// changing the package-wide plot.DefaultFont other users may rely on.
func sans(p *plot.Plot) {
	for _, f := range []*font.Font{
		&p.Title.TextStyle.Font, &p.X.Label.TextStyle.Font, &p.Y.Label.TextStyle.Font,
		&p.X.Tick.Label.Font, &p.Y.Tick.Label.Font, &p.Legend.TextStyle.Font,
	} {
		f.Variant = "Sans"
	}
	p.Title.TextStyle.Font.Size = 13
	p.Title.Padding = 6
}

// cpuPlot is an empty chart of a bar per CPU, its legend top right.
func cpuPlot(title, yLabel string) *plot.Plot {
	p := plot.New()
	sans(p)
	p.Title.Text = title
	p.Y.Label.Text = yLabel
	p.X.Label.Text = "CPU"
	p.Legend.Top = true
	return p
}

// ClusterChart is per-core utilisation averaged over each run: one stacked
// bar per CPU (irq, softirq, system, user, other from the bottom), every
// host's CPUs side by side on one axis with a gap between hosts, like the
// per-core cluster charts of the ClustrixDB core-0 write-up.
func ClusterChart(runs []*Run, o Options) (*plot.Plot, error) {
	o.defaults()
	p := cpuPlot("Per-core utilisation, mean over the run (cluster view)", "% of CPU")
	p.Y.Min, p.Y.Max = 0, 160 // room above 100 % for host names and, above them, the legend
	p.Y.Tick.Marker = plot.ConstantTicks(percentTicks())
	p.Legend.Padding = 2

	slots := cpuSlots(runs)
	barW := vg.Length(math.Min(60, math.Max(1, 0.75*float64(o.Width-1.3*vg.Inch)/float64(slots))))
	step := int(math.Ceil(float64(slots) / 32))

	var ticks []plot.Tick
	var labels plotter.XYLabels
	x := 0.0
	for k, r := range runs {
		if k > 0 {
			x++
		}
		means := r.MeanCPUs()
		comp := []struct {
			name string
			col  color.Color
			v    func(m CPUMean) float64
		}{
			{"irq", colIRQ, func(m CPUMean) float64 { return m.IRQ }},
			{"softirq", colSoft, func(m CPUMean) float64 { return m.SoftIRQ }},
			{"system", colSystem, func(m CPUMean) float64 { return m.System }},
			{"user", colUser, func(m CPUMean) float64 { return m.User }},
			{"nice+iowait+steal", colOther, func(m CPUMean) float64 { return m.Others() }},
		}
		var below *plotter.BarChart
		for _, c := range comp {
			vals := make(plotter.Values, len(means))
			for i, m := range means {
				if v := c.v(m); !math.IsNaN(v) {
					vals[i] = v
				}
			}
			bc, err := plotter.NewBarChart(vals, barW)
			if err != nil {
				return nil, fmt.Errorf("cluster chart %s: %w", r.Host, err)
			}
			bc.XMin = x
			bc.Color = c.col
			bc.LineStyle.Width = 0
			if below != nil {
				bc.StackOn(below)
			}
			below = bc
			p.Add(bc)
			if k == 0 {
				p.Legend.Add(c.name, bc)
			}
		}
		for i, m := range means {
			if (int(x)+i)%step == 0 || len(means) <= 32 {
				ticks = append(ticks, plot.Tick{Value: x + float64(i), Label: strconv.Itoa(m.ID)})
			}
		}
		labels.XYs = append(labels.XYs, plotter.XY{X: x + float64(len(means)-1)/2, Y: 104})
		labels.Labels = append(labels.Labels, r.Host)
		x += float64(len(means))
	}
	return p, hostAxis(p, labels, ticks, x)
}

// grid is a heat map grid: rows are host/CPU, columns are intervals.
type grid struct {
	z      [][]float64 // [row][col], NaN where missing
	xs     []float64
	nrows  int
	labels []string
}

func (g *grid) Dims() (int, int)   { return len(g.xs), g.nrows }
func (g *grid) Z(c, r int) float64 { return g.z[g.nrows-1-r][c] }
func (g *grid) X(c int) float64    { return g.xs[c] }
func (g *grid) Y(r int) float64    { return float64(r) }
func (g *grid) label(r int) string { return g.labels[g.nrows-1-r] }
func (g *grid) cols() int          { return len(g.xs) }

// overTime is a heat map of one per-CPU percentage over time: a row per
// CPU (hosts one after another, first host at the top), a column per
// interval, colour from blue (0 %) to red (100 %). A heat map stays
// readable for hundreds of cores where one line per core would not.
// It returns the top of its colour range too.
func overTime(runs []*Run, title string, v func(*load.CPUTime) float64) (*plot.Plot, float64) {
	g, peak := cpuGrid(runs, func(cl *load.CPULoad) (float64, bool) {
		if cl.NoTicks {
			return 0, false
		}
		return math.Max(0, math.Min(100, v(&cl.CPUTime))), true
	})
	// Colour range 0 … the highest value rounded up to 10 % (at least
	// 10 %), so that a few percent of interrupt time is still visible.
	top := math.Max(10, math.Ceil(peak/10)*10)
	return heatMap(g, title, top, moreland.SmoothBlueRed().Palette(64)), top
}

// heatMap draws g coloured from 0 to top, grey where a cell has no value.
func heatMap(g *grid, title string, top float64, pal palette.Palette) *plot.Plot {
	p := plot.New()
	sans(p)
	p.X.Label.Text = "seconds since the recording started"
	p.Title.Text = title
	hm := plotter.NewHeatMap(g, pal)
	hm.Min, hm.Max = 0, top
	hm.NaN = color.RGBA{R: 0xee, G: 0xee, B: 0xee, A: 0xff}
	p.Add(hm)
	yTicks(p, g)
	return p
}

// cpuGrid lays out a heat map: a row per host and CPU, a column per
// interval of the longest run (other runs are aligned by interval index:
// all use the same --interval in practice), each cell v of that CPU's load
// (left NaN where v says there is no value). It returns the highest cell
// value too (0 when none is above 0).
func cpuGrid(runs []*Run, v func(*load.CPULoad) (float64, bool)) (*grid, float64) {
	longest := runs[0]
	g := &grid{}
	for _, r := range runs {
		if len(r.Loads) > len(longest.Loads) {
			longest = r
		}
		g.nrows += len(r.CPUs)
	}
	for _, l := range longest.Loads {
		g.xs = append(g.xs, l.End.Sub(longest.Start).Seconds())
	}
	if len(g.xs) == 1 { // a heat map needs two columns to know their width
		g.xs = append(g.xs, g.xs[0]+longest.Loads[0].Interval.Seconds())
	}
	row := 0
	for _, r := range runs {
		rowOf := map[int]int{}
		for _, id := range r.CPUs {
			rowOf[id] = row
			g.labels = append(g.labels, r.Host+" cpu"+strconv.Itoa(id))
			g.z = append(g.z, nanRow(g.cols()))
			row++
		}
		for c, l := range r.Loads {
			if c >= g.cols() {
				break
			}
			for i := range l.CPUs {
				if x, ok := v(&l.CPUs[i]); ok {
					g.z[rowOf[l.CPUs[i].ID]][c] = x
				}
			}
		}
	}
	peak := 0.0
	for _, r := range g.z {
		for _, z := range r {
			if !math.IsNaN(z) {
				peak = math.Max(peak, z)
			}
		}
	}
	return g, peak
}

func nanRow(n int) []float64 {
	r := make([]float64, n)
	for i := range r {
		r[i] = math.NaN()
	}
	return r
}

// IRQChart draws the rates of the busiest IRQs (highest mean rate over
// all runs) over time, one line each, labelled with host, interface or
// device, queue and IRQ. Lines that would lie flat along the axis, too
// small beside the busiest to be seen, are left out and counted in the
// title. With no IRQ to draw it returns no plot and why.
func IRQChart(runs []*Run, o Options) (*plot.Plot, string, error) {
	o.defaults()
	var all []IRQSeries
	for _, r := range runs {
		all = append(all, r.IRQSeries()...)
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].Mean > all[j].Mean })
	n := min(o.TopIRQs, len(all))
	for n > 0 && all[n-1].Mean < MinIRQLineRate {
		n--
	}
	all = all[:n]
	peak := 0.0
	for _, s := range all {
		peak = math.Max(peak, slices.Max(append([]float64{0}, s.Rate...)))
	}
	small := 0
	all = slices.DeleteFunc(all, func(s IRQSeries) bool {
		if !visible(slices.Max(append([]float64{0}, s.Rate...)), peak) {
			small++
			return true
		}
		return false
	})
	n = len(all)
	if n == 0 {
		return nil, fmt.Sprintf("no IRQ-rate chart: no IRQ fired %.0f times per second or more on average", MinIRQLineRate), nil
	}
	p := linePlot("interrupts per second")
	p.Title.Text = fmt.Sprintf("Top %d IRQs by rate over time (IRQs under %.0f/s on average not drawn)", n, MinIRQLineRate)
	if small > 0 {
		p.Title.Text = fmt.Sprintf("Top %d IRQs by rate over time (under %.0f/s on average, or under %.0f%% of the busiest: not drawn, %d such)",
			n, MinIRQLineRate, 100*visibleShare, small)
	}
	err := addLines(p, n, func(i int) (string, []float64, []float64) {
		s := all[i]
		name := s.Label
		if len(runs) > 1 {
			name = s.Host + ": " + name
		}
		if len(name) > 48 {
			name = name[:47] + "…"
		}
		return name, s.T, s.Rate
	})
	if err != nil {
		return nil, "", err
	}
	return p, "", nil
}

// linePlot is an empty chart of lines over time with a grid and the legend
// top left.
func linePlot(yLabel string) *plot.Plot {
	p := plot.New()
	sans(p)
	p.X.Label.Text = "seconds since the recording started"
	p.Y.Label.Text = yLabel
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.Padding = 1
	p.Y.Tick.Marker = plot.TickerFunc(valueTicks)
	p.Add(plotter.NewGrid())
	return p
}

// addLines draws n series, series(i) giving the i-th one's legend name,
// times and values, each in its own colour, and sets the y range from 0 to
// the highest value with room for the legend (top left, a row per series)
// above the lines.
func addLines(p *plot.Plot, n int, series func(i int) (name string, t, y []float64)) error {
	var peak float64
	names := make([]string, n)
	lines := make([]plotter.XYs, n)
	for k := range n {
		name, t, y := series(k)
		xys := make(plotter.XYs, len(t))
		for i := range t {
			xys[i] = plotter.XY{X: t[i], Y: y[i]}
			peak = math.Max(peak, y[i])
		}
		names[k], lines[k] = name, xys
	}
	if err := addSeries(p, names, lines, false); err != nil {
		return err
	}
	p.Y.Min = 0
	p.Y.Max = legendRoom(peak, n)
	return nil
}

// percentTicks label 0, 50 and 100 % with minor ticks every 10 %, leaving
// the space above 100 % for host names and the legend.
func percentTicks() []plot.Tick {
	var t []plot.Tick
	for v := 0; v <= 100; v += 10 {
		l := ""
		if v%50 == 0 {
			l = strconv.Itoa(v)
		}
		t = append(t, plot.Tick{Value: float64(v), Label: l})
	}
	return t
}
