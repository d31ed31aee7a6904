package main

import (
	"errors"
	"fmt"
	"io"

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
	return report.RolloutCharts(runs, before, after, opts)
}
