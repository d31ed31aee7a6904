package report

import (
	"fmt"
	"math"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/irqpilot/irqpilot/internal/sim"
)

// SimCharts writes the simulator's closed-loop charts to dir in each format
// ("png", "svg"): IOPS, median and p99 latency and interrupts per second
// against commands in flight (CIF, log₂ axis), one line per policy. It
// returns the files written.
func SimCharts(rs []sim.Result, policies []string, dir string, formats []string) ([]string, error) {
	type chart struct {
		file, title, ylabel string
		y                   func(sim.Result) float64
	}
	charts := []chart{
		{"iops_vs_cif", "IOPS vs commands in flight", "IOPS", func(r sim.Result) float64 { return r.IOPS }},
		{"latency_p50_vs_cif", "Median latency vs commands in flight", "latency p50 (µs)", func(r sim.Result) float64 { return r.LatencyP50Us }},
		{"latency_p99_vs_cif", "p99 latency vs commands in flight", "latency p99 (µs)", func(r sim.Result) float64 { return r.LatencyP99Us }},
		{"interrupts_vs_cif", "Interrupts per second vs commands in flight", "interrupts/s", func(r sim.Result) float64 { return r.InterruptsPerSec }},
	}
	var files []string
	for _, c := range charts {
		p := plot.New()
		sans(p)
		p.Title.Text = c.title
		p.X.Label.Text = "commands in flight (CIF)"
		p.Y.Label.Text = c.ylabel
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
		p.Y.Tick.Marker = plot.TickerFunc(valueTicks)
		p.Legend.Top, p.Legend.Left = true, true
		var names []string
		var series []plotter.XYs
		lo, hi, peak := math.Inf(1), 0.0, 0.0
		for _, pol := range policies {
			var xys plotter.XYs
			for _, r := range rs {
				if r.Policy == pol && r.CIF > 0 {
					xys = append(xys, plotter.XY{X: float64(r.CIF), Y: c.y(r)})
					lo, hi, peak = math.Min(lo, float64(r.CIF)), math.Max(hi, float64(r.CIF)), math.Max(peak, c.y(r))
				}
			}
			if len(xys) > 0 {
				names, series = append(names, pol), append(series, xys)
			}
		}
		if len(series) == 0 {
			return nil, fmt.Errorf("sim charts: no closed-loop results to plot")
		}
		if err := addSeries(p, names, series, true); err != nil {
			return nil, fmt.Errorf("sim charts: %w", err)
		}
		// Room either side on the log axis, so the end points are whole,
		// and above the lines for the legend (top left).
		p.X.Min, p.X.Max = lo/1.25, hi*1.25
		p.Y.Min, p.Y.Max = 0, math.Max(1, legendRoom(peak, len(series)))
		for _, f := range formats {
			path := filepath.Join(dir, c.file+"."+f)
			if err := SavePlots(path, 7*vg.Inch, 4.5*vg.Inch, p); err != nil {
				return nil, fmt.Errorf("sim charts: %s: %w", path, err)
			}
			files = append(files, path)
		}
	}
	return files, nil
}
