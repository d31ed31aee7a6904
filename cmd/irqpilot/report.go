package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"gonum.org/v1/plot/vg"

	"github.com/irqpilot/irqpilot/internal/record"
	"github.com/irqpilot/irqpilot/internal/report"
)

var reportFlags struct {
	output string
	top    int
	width  float64
}

var reportCmd = &cobra.Command{
	Use:   "report run.jsonl [more.jsonl …] -o report.html|.png|.svg",
	Short: "Chart recordings: per-core utilisation, load over time, IRQ rates",
	Long: `report reads recordings made by 'irqpilot record' (one per host, or
several of one host) and draws:

  - per-core utilisation averaged over the run, every host's CPUs side by side
    on one axis (cluster view), stacked irq / softirq / system / user;
  - per-CPU interrupt time (irq+softirq) and busy time over the run, as heat
    maps with a row per host CPU;
  - the rates of the busiest IRQs over time (--top).

The output format follows the -o file name: .png or .svg (all charts in one
image) or .html (a self-contained page with a summary table and the charts
inlined; it opens without a network connection). A recording that was cut off
mid-line is read up to its last complete sample.`,
	Args: cobra.MinimumNArgs(1),
	RunE: runReport,
}

func init() {
	f := reportCmd.Flags()
	f.StringVarP(&reportFlags.output, "output", "o", "", "report `FILE`: .html, .png or .svg")
	f.IntVar(&reportFlags.top, "top", 8, "how many of the busiest IRQs to chart")
	f.Float64Var(&reportFlags.width, "width", 10, "chart width in inches (PNG: 96 pixels per inch)")
	_ = reportCmd.MarkFlagRequired("output")
	rootCmd.AddCommand(reportCmd)
}

func runReport(cmd *cobra.Command, args []string) error {
	format, err := report.FormatOf(reportFlags.output)
	if err != nil {
		return err
	}
	if reportFlags.width < 4 || reportFlags.width > 100 {
		return fmt.Errorf("--width %g: must be between 4 and 100 inches", reportFlags.width)
	}
	var runs []*report.Run
	for _, path := range args {
		rec, err := record.ReadFile(path)
		if err != nil {
			return err
		}
		if rec.Truncated {
			fmt.Fprintf(os.Stderr, "irqpilot report: %s: last line incomplete (recorder killed?); using %d complete samples\n", path, len(rec.Samples))
		}
		r, err := report.NewRun(rec)
		if err != nil {
			return err
		}
		runs = append(runs, r)
	}
	opts := report.Options{Width: vg.Length(reportFlags.width) * vg.Inch, TopIRQs: reportFlags.top}
	charts, err := report.Charts(runs, opts)
	if err != nil {
		return err
	}
	f, err := os.Create(reportFlags.output)
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
		return fmt.Errorf("%s: %w", reportFlags.output, err)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "wrote %s (%d recording(s), %d charts)\n", reportFlags.output, len(runs), len(charts))
	return nil
}
