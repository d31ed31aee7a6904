package report

import (
	"fmt"
	"math"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/irqpilot/irqpilot/internal/bench"
	"github.com/irqpilot/irqpilot/internal/bench/stats"
)

// BenchChart writes a bench's two charts side by side to path (.png,
// .svg): the figure of merit per configuration with its interval, and each
// CPU's softirq share per configuration.
func BenchChart(r *bench.Report, path string) error {
	p1, p2, err := benchPlots(r)
	if err != nil {
		return err
	}
	width := vg.Length(max(6, 0.9*float64(len(r.Summary)))) * vg.Inch
	return SavePlots(path, 2*width, 4*vg.Inch, p1, p2)
}

func benchPlots(r *bench.Report) (*plot.Plot, *plot.Plot, error) {
	obj, lower := r.Objective()
	if lower {
		obj += ", lower is better"
	}
	p1 := barPlot(fmt.Sprintf("%s: %s (median, %.0f%% interval)", r.Workload, obj, 100*stats.Confidence))
	var vals plotter.Values
	var errs plotter.YErrors
	var names []string
	for _, s := range r.Summary {
		v := s.Throughput.Point
		if math.IsNaN(v) {
			v = 0
		}
		vals = append(vals, v)
		lo, hi := v-s.Throughput.Low, s.Throughput.High-v
		if !s.Throughput.Finite() { // too few runs for an interval: no error bar
			lo, hi = 0, 0
		}
		errs = append(errs, struct{ Low, High float64 }{lo, hi})
		names = append(names, shortName(s.Config))
		if s.Unit != "" {
			p1.Y.Label.Text = s.Unit
		}
	}
	bars, err := plotter.NewBarChart(vals, vg.Points(18))
	if err != nil {
		return nil, nil, err
	}
	bars.Color = seriesColour(0)
	bars.LineStyle.Width = 0
	eb := &plotter.YErrorBars{XYs: make(plotter.XYs, len(vals)), YErrors: errs}
	for i, v := range vals {
		eb.XYs[i] = plotter.XY{X: float64(i), Y: v}
	}
	eb.LineStyle.Width = vg.Points(1.5)
	p1.Add(bars, eb)
	// The axis from the data: the highest bar or whisker end, with room
	// above it, so no whisker's cap is cut at the top.
	top := 0.0
	for i, v := range vals {
		top = math.Max(top, v+errs[i].High)
	}
	p1.Y.Max = math.Max(1, top*1.1)
	nominal(p1, names)

	p2 := barPlot("%soft per CPU (median over runs)")
	p2.Y.Label.Text = "% of CPU in softirq"
	ncpu := 0
	for _, s := range r.Summary {
		ncpu = max(ncpu, len(s.CPUs))
	}
	w := vg.Points(min(10, 48/float64(max(ncpu, 1))))
	peak := 0.0
	for _, s := range r.Summary {
		for _, c := range s.CPUs {
			peak = math.Max(peak, c.SoftIRQ)
		}
	}
	shown := 0
	for c := 0; c < ncpu; c++ {
		var v plotter.Values
		most := 0.0
		for _, s := range r.Summary {
			x := 0.0
			if c < len(s.CPUs) {
				x = s.CPUs[c].SoftIRQ
			}
			v = append(v, x)
			most = math.Max(most, x)
		}
		b, err := plotter.NewBarChart(v, w)
		if err != nil {
			return nil, nil, err
		}
		b.Offset = w * vg.Length(float64(c)-float64(ncpu-1)/2)
		b.Color = seriesColour(c)
		b.LineStyle.Width = 0
		p2.Add(b)
		if visible(most, peak) { // the legend names only bars one can see
			p2.Legend.Add("CPU "+strconv.Itoa(c), b)
			shown++
		}
	}
	// The legend sits top right, above the tallest bar.
	p2.Y.Max = math.Max(1, legendRoom(peak, shown))
	nominal(p2, names)
	return p1, p2, nil
}

// barPlot is an empty bar chart of configurations, its legend top right.
func barPlot(title string) *plot.Plot {
	p := plot.New()
	sans(p)
	p.Title.Text = title
	p.Y.Min = 0
	p.Y.Tick.Marker = plot.TickerFunc(valueTicks)
	p.Legend.Top = true
	p.Add(horizontalGrid())
	return p
}

// nominal names the bar positions and keeps half a slot either side, so
// the first and last bars are drawn whole.
func nominal(p *plot.Plot, names []string) {
	p.NominalX(names...)
	p.X.Min, p.X.Max = -0.6, float64(len(names))-0.4
	p.X.Tick.Label.Rotation = 0.5
	p.X.Tick.Label.XAlign = -1
}

func horizontalGrid() *plotter.Grid {
	g := plotter.NewGrid()
	g.Vertical.Color = nil
	return g
}

// SweepChart writes a sweep's curve to path (.png, .svg): the figure of
// merit against the parameter (log₂ axis), one line per configuration,
// each point with its interval as an error bar. Below MinRuns runs, where
// the interval has an infinite end, the bar is the range of the runs
// instead, and the title says so.
func SweepChart(sw *bench.Sweep, path string) error {
	if len(sw.Points) == 0 {
		return fmt.Errorf("sweep chart: nothing measured")
	}
	name, unit, lower := sw.Objective()
	p := plot.New()
	sans(p)
	dir := ""
	if lower {
		dir = ", lower is better"
	}
	p.Title.Text = fmt.Sprintf("%s: %s against %s (median, %.0f%% interval%s)", sw.Points[0].Report.Workload, name, sw.Param, 100*stats.Confidence, dir)
	p.X.Label.Text = sw.Param
	p.Y.Label.Text = unit
	p.X.Scale = plot.LogScale{}
	var ticks []plot.Tick
	for _, pt := range sw.Points {
		ticks = append(ticks, plot.Tick{Value: float64(pt.Value), Label: strconv.Itoa(pt.Value)})
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	p.Y.Tick.Marker = plot.TickerFunc(valueTicks)
	// Some room either side on the log axis (and a range at all for a
	// one-value sweep, which would otherwise reach 0).
	p.X.Min, p.X.Max = float64(sw.Points[0].Value)/1.25, float64(sw.Points[len(sw.Points)-1].Value)*1.25
	p.Y.Min = 0
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(horizontalGrid())
	curves := sw.Curves()
	indicative, peak := false, 0.0
	for i, cv := range curves {
		var xys plotter.XYs
		var errs plotter.YErrors
		for _, cp := range cv.Points {
			xys = append(xys, plotter.XY{X: float64(cp.Value), Y: cp.Median})
			errs = append(errs, struct{ Low, High float64 }{cp.Median - cp.Low, cp.High - cp.Median})
			indicative = indicative || cp.Range
			peak = math.Max(peak, cp.High)
		}
		line, points, err := plotter.NewLinePoints(xys)
		if err != nil {
			return err
		}
		line.Color, points.Color = seriesColour(i), seriesColour(i)
		line.Width = vg.Points(1.5)
		points.Shape = draw.CircleGlyph{}
		eb := &plotter.YErrorBars{XYs: xys, YErrors: errs}
		eb.Color = seriesColour(i)
		eb.LineStyle.Width = vg.Points(1.2)
		p.Add(line, points, eb)
		p.Legend.Add(shortName(cv.Config), line, points)
	}
	p.Y.Max = math.Max(1, legendRoom(peak, len(curves)))
	if indicative {
		p.Title.Text += fmt.Sprintf("\nbars from fewer than %d runs: the range of the runs, not an interval", stats.MinRuns)
	}
	return SavePlots(path, 7*vg.Inch, 4.5*vg.Inch, p)
}

func shortName(c string) string {
	if len(c) > 28 {
		return c[:27] + "…"
	}
	return c
}
