package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"gonum.org/v1/plot/vg"

	"github.com/irqpilot/irqpilot/internal/record"
	"github.com/irqpilot/irqpilot/internal/report"
)

// reportOptions are report's flags and arguments.
type reportOptions struct {
	output     string
	top        int
	width      float64
	recordings []string
}

func newReportCmd() *cobra.Command {
	o := &reportOptions{}
	cmd := &cobra.Command{
		Use:   "report run.jsonl [more.jsonl …] -o report.html|.png|.svg",
		Short: "Chart recordings: per-core utilisation, load over time, IRQ rates",
		Long: `report reads recordings made by 'irqpilot record' (one per host, or
several of one host) and draws:

  - per-core utilisation averaged over the run, every host's CPUs side by side
    on one axis (cluster view), stacked irq / softirq / system / user;
  - per-CPU interrupt time (irq+softirq) and busy time over the run, as heat
    maps with a row per host CPU;
  - the rates of the busiest IRQs over time (--top);
  - interrupt time per CPU by source (hardirq, NET_RX, BLOCK, …) over time,
    measured with eBPF when the recording has it, else estimated from counts.

The output format follows the -o file name: .png or .svg (all charts in one
image) or .html (a self-contained page with a summary table and the charts
inlined; it opens without a network connection). A recording that was cut off
mid-line is read up to its last complete sample.`,
		Args: minArgs(1, "at least one recording (make one with 'irqpilot record -o run.jsonl')"),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.recordings = args
			return o.run(cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.output, "output", "o", "", "report `FILE`: .html, .png or .svg")
	f.IntVar(&o.top, "top", 8, "how many of the busiest IRQs to chart")
	f.Float64Var(&o.width, "width", 10, "chart width in inches (PNG: 96 pixels per inch)")
	_ = cmd.MarkFlagRequired("output")
	return cmd
}

func (o *reportOptions) run(out, errOut io.Writer) error {
	format, err := report.FormatOf(o.output)
	if err != nil {
		return err
	}
	if o.width < 4 || o.width > 100 {
		return fmt.Errorf("--width %g: must be between 4 and 100 inches", o.width)
	}
	var runs []*report.Run
	for _, path := range o.recordings {
		rec, err := record.ReadFile(path)
		if err != nil {
			return err
		}
		if rec.Truncated {
			fmt.Fprintf(errOut, "irqpilot report: %s: last line incomplete (recorder killed?); using %d complete samples\n", path, len(rec.Samples))
		}
		r, err := report.NewRun(rec)
		if err != nil {
			return err
		}
		runs = append(runs, r)
	}
	opts := report.Options{Width: vg.Length(o.width) * vg.Inch, TopIRQs: o.top}
	charts, err := report.Charts(runs, opts)
	if err != nil {
		return err
	}
	f, err := os.Create(o.output)
	if err != nil {
		return err
	}
	if format == "html" {
		err = report.WriteHTML(f, runs, charts, opts.Width)
	} else {
		err = report.WriteImage(f, format, charts, opts.Width)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%s: %w", o.output, err)
	}
	fmt.Fprintf(out, "wrote %s (%d recording(s), %d charts)\n", o.output, len(runs), len(charts))
	return nil
}
