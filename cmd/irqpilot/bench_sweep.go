package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/irqpilot/irqpilot/internal/bench"
	"github.com/irqpilot/irqpilot/internal/outfile"
	"github.com/irqpilot/irqpilot/internal/report"
)

// runSweep runs the bench once per value of --sweep and writes the sweep
// (JSON to --output, the curve to --chart, the tables to out).
func (o *benchOptions) runSweep(out, errOut io.Writer) error {
	param, values, err := bench.ParseSweep(o.sweep)
	if err != nil {
		return &exitError{code: 2, err: fmt.Errorf("--sweep: %w", err)}
	}
	configs, baseline, err := o.configList()
	if err != nil {
		return err
	}
	mk := func(v int) (*bench.Runner, error) {
		wf := o.wf
		switch param {
		case "connections":
			wf.net.Connections = v
		}
		return wf.runner(configs, o.rounds, o.duration, errOut)
	}
	for _, v := range values { // every value's flags checked before anything starts
		if _, err := mk(v); err != nil {
			return &exitError{code: 2, err: fmt.Errorf("--sweep %s=%d: %w", param, v, err)}
		}
	}
	ctx, stop := signalContext()
	defer stop()
	sw, err := bench.RunSweep(ctx, param, values, baseline, mk, func(format string, args ...any) {
		fmt.Fprintf(errOut, format+"\n", args...)
	})
	if sw != nil && len(sw.Points) > 0 {
		if werr := o.writeSweep(out, sw); werr != nil {
			err = joinErr(err, werr)
		}
		for _, p := range sw.Points {
			if !p.Report.Restored && len(p.Report.Diff) > 0 {
				err = joinErr(err, fmt.Errorf("%s=%d: machine not restored: %d values differ", param, p.Value, len(p.Report.Diff)))
			}
		}
	}
	return err
}

func (o *benchOptions) writeSweep(w io.Writer, sw *bench.Sweep) error {
	if o.output != "" {
		b, err := json.MarshalIndent(sw, "", "  ")
		if err != nil {
			return err
		}
		if err := outfile.Write(o.output, b); err != nil {
			return err
		}
	}
	if o.chart != "" {
		if err := report.SweepChart(sw, o.chart); err != nil {
			return fmt.Errorf("chart: %w", err)
		}
	}
	if o.g.json {
		return writeJSONLine(w, sw)
	}
	return sw.WriteTable(w)
}
