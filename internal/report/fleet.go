package report

import (
	"fmt"
	"math"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"

	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/load"
)

// RunOf builds a Run from loads computed elsewhere than a recording (the
// Prometheus source, internal/report/promsource): one node's per-interval
// loads, all on the same time grid as the other nodes' (a load may have no
// CPUs: a gap). inv, when not nil, names the device and queue of IRQs in the
// IRQ chart. source says where the data came from (the report's "file").
func RunOf(node, source string, loads []*load.Load, inv *host.Host) (*Run, error) {
	if len(loads) == 0 {
		return nil, fmt.Errorf("%s: no intervals", node)
	}
	r := &Run{Host: node, File: source, Start: loads[0].Start, Loads: loads, inv: inv}
	seen := map[int]bool{}
	for _, l := range loads {
		for _, c := range l.CPUs {
			if !seen[c.ID] {
				seen[c.ID] = true
				r.CPUs = append(r.CPUs, c.ID)
			}
		}
	}
	if len(r.CPUs) == 0 {
		return nil, fmt.Errorf("%s: no CPU has data in any interval", node)
	}
	sort.Ints(r.CPUs)
	return r, nil
}

// FleetCharts are the charts of seed 000's figures, for sources that carry
// CPU times and device-queue IRQ rates but not every counter a recording
// has (Prometheus): the cluster view of per-core utilisation, interrupt
// time (irq + softirq) per core over time, busy time per core over time,
// and the busiest device-queue IRQs over time.
func FleetCharts(runs []*Run, o Options) ([]Chart, error) {
	o.defaults()
	if len(runs) == 0 {
		return nil, fmt.Errorf("no nodes")
	}
	cl, err := ClusterChart(runs, o)
	if err != nil {
		return nil, err
	}
	rows := 0
	for _, r := range runs {
		rows += len(r.CPUs)
	}
	hmH := vg.Length(math.Min(10, math.Max(2.6, 1.3+0.2*float64(rows)))) * vg.Inch
	soft, softTop := overTime(runs, "CPU interrupt % over time (irq + softirq)", func(c *cpuPoint) float64 { return c.IRQ + c.SoftIRQ })
	busy, busyTop := overTime(runs, "CPU busy % over time (100 − idle − iowait)", func(c *cpuPoint) float64 { return 100 - c.Idle - c.IOWait })
	irq, err := IRQChart(runs, o)
	if err != nil {
		return nil, err
	}
	for _, p := range []*plot.Plot{soft, busy, irq} {
		p.X.Label.Text = "seconds since the start of the range"
	}
	scaleH := 0.75 * vg.Inch
	return []Chart{
		{Name: "cluster", Title: cl.Title.Text, Plot: cl, Height: 4.2 * vg.Inch},
		{Name: "irq-soft-over-time", Title: soft.Title.Text, Plot: soft, Height: hmH},
		{Name: "irq-soft-over-time-scale", Title: "colour scale", Plot: ScaleChart(softTop, "% of CPU in irq + softirq"), Height: scaleH},
		{Name: "busy-over-time", Title: busy.Title.Text, Plot: busy, Height: hmH},
		{Name: "busy-over-time-scale", Title: "colour scale", Plot: ScaleChart(busyTop, "% of CPU busy"), Height: scaleH},
		{Name: "irq-rates", Title: irq.Title.Text, Plot: irq, Height: 4.5 * vg.Inch},
	}, nil
}
