package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/irqpilot/irqpilot/internal/report"
)

// promCharts are the charts of report --prometheus: with --before and
// --after the cluster view of both windows and each CPU's share of
// interrupt time in both, else the fleet charts. Either way it says where
// a node's data is missing within the range.
func (o *reportOptions) promCharts(out io.Writer, runs []*report.Run, opts report.Options) ([]report.Chart, error) {
	for _, g := range report.Gaps(runs) {
		fmt.Fprintf(out, "data missing: %s\n", g)
	}
	if o.before == "" && o.after == "" {
		return report.FleetCharts(runs, opts)
	}
	if o.before == "" || o.after == "" {
		return nil, errors.New("--before and --after go together: give both windows (FROM,TO each)")
	}
	before, err := report.ParseWindow("before", o.before)
	if err != nil {
		return nil, err
	}
	after, err := report.ParseWindow("after", o.after)
	if err != nil {
		return nil, err
	}
	for _, r := range runs {
		fmt.Fprintf(out, "interrupt share %s: %s\n", r.Host, shares(r, before, after))
	}
	return report.RolloutCharts(runs, before, after, opts)
}

// shares says, per CPU, its share of the node's interrupt time in both
// windows ("cpu0 31%→8%"; "-" where a window has no data).
func shares(r *report.Run, before, after report.Window) string {
	pct := func(w report.Window) []string {
		out := make([]string, len(r.CPUs))
		var s []float64
		if c := r.Within(w); c != nil {
			s = c.InterruptShare()
		}
		for i := range out {
			out[i] = "-"
			if i < len(s) && !math.IsNaN(s[i]) {
				out[i] = fmt.Sprintf("%.0f%%", s[i])
			}
		}
		return out
	}
	b, a := pct(before), pct(after)
	parts := make([]string, len(r.CPUs))
	for i, id := range r.CPUs {
		parts[i] = fmt.Sprintf("cpu%d %s→%s", id, b[i], a[i])
	}
	return before.Name + "→" + after.Name + " " + strings.Join(parts, ", ")
}
