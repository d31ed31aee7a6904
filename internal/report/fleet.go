package report

import (
	"fmt"
	"sort"

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
	out, _, err := fleetCharts(runs, o)
	return out, err
}

// fleetCharts is FleetCharts and why it has no IRQ-rate chart, if so.
func fleetCharts(runs []*Run, o Options) ([]Chart, string, error) {
	o.defaults()
	if len(runs) == 0 {
		return nil, "", fmt.Errorf("no nodes")
	}
	l, err := newLayout(runs, o)
	if err != nil {
		return nil, "", err
	}
	for _, c := range append([]Chart{l.soft[0], l.busy[0]}, l.irqRates...) {
		c.Plot.X.Label.Text = "seconds since the start of the range"
	}
	out := append([]Chart{l.cluster}, l.soft...)
	out = append(out, l.busy...)
	return append(out, l.irqRates...), l.irqNote, nil
}
