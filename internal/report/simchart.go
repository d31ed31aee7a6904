package sim

import (
	"fmt"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// WriteCharts writes iops_vs_cif and latency_vs_cif charts (one line per
// policy, CIF on a log2 axis) to dir in each format ("png", "svg").
// It returns the files written.
func WriteCharts(rs []Result, policies []string, dir string, formats []string) ([]string, error) {
	type chart struct {
		file, title, ylabel string
		y                   func(Result) float64
	}
	charts := []chart{
		{"iops_vs_cif", "IOPS vs commands in flight", "IOPS", func(r Result) float64 { return r.IOPS }},
		{"latency_p50_vs_cif", "Median latency vs commands in flight", "latency p50 (µs)", func(r Result) float64 { return r.LatencyP50Us }},
		{"latency_p99_vs_cif", "p99 latency vs commands in flight", "latency p99 (µs)", func(r Result) float64 { return r.LatencyP99Us }},
		{"interrupts_vs_cif", "Interrupts per second vs commands in flight", "interrupts/s", func(r Result) float64 { return r.InterruptsPerSec }},
	}
	var files []string
	for _, c := range charts {
		p := plot.New()
		p.Title.Text = c.title
		p.X.Label.Text = "commands in flight (CIF)"
		p.Y.Label.Text = c.ylabel
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
		p.Legend.Top = true
		var args []any
		for _, pol := range policies {
			var xys plotter.XYs
			for _, r := range rs {
				if r.Policy == pol && r.CIF > 0 {
					xys = append(xys, plotter.XY{X: float64(r.CIF), Y: c.y(r)})
				}
			}
			if len(xys) > 0 {
				args = append(args, pol, xys)
			}
		}
		if len(args) == 0 {
			return nil, fmt.Errorf("sim charts: no closed-loop results to plot")
		}
		if err := plotutil.AddLinePoints(p, args...); err != nil {
			return nil, fmt.Errorf("sim charts: %w", err)
		}
		for _, f := range formats {
			path := filepath.Join(dir, c.file+"."+f)
			if err := p.Save(7*vg.Inch, 4.5*vg.Inch, path); err != nil {
				return nil, fmt.Errorf("sim charts: %s: %w", path, err)
			}
			files = append(files, path)
		}
	}
	return files, nil
}
