package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"gonum.org/v1/plot/vg"

	"github.com/irqpilot/irqpilot/internal/outfile"
	"github.com/irqpilot/irqpilot/internal/record"
	"github.com/irqpilot/irqpilot/internal/report"
	"github.com/irqpilot/irqpilot/internal/report/promsource"
)

// reportOptions are report's flags and arguments.
type reportOptions struct {
	output     string
	top        int
	width      float64
	recordings []string
	// prom: read the agents' metrics from Prometheus instead of recordings.
	prom promsource.Options
	// before, after: with prom, the windows the cluster view compares.
	before, after string
	// maxAnswerMiB: with prom, the largest answer read per query.
	maxAnswerMiB int64
}

func newReportCmd() *cobra.Command {
	o := &reportOptions{}
	cmd := &cobra.Command{
		Use:   "report run.jsonl [more.jsonl …] | --prometheus URL --range 5m  -o report.html|.png|.svg",
		Short: "Chart recordings: per-core utilisation, load over time, IRQ rates",
		Long: `report reads recordings made by 'irqpilot record' (one per host, or
several of one host) and draws:

  - per-core utilisation averaged over the run, every host's CPUs side by side
    on one axis (cluster view), stacked irq / softirq / system / user;
  - per-CPU interrupt time (irq+softirq) and busy time over the run, as heat
    maps with a row per host CPU;
  - the rates of the busiest IRQs over time (--top), named by device and queue;
  - NET_RX, NET_TX and BLOCK softirq rates per CPU over time, as heat maps,
    each with its colour scale;
  - interrupt time per CPU by source (hardirq, NET_RX, BLOCK, …) over time,
    measured with eBPF when the recording has it, else estimated from counts.

With --prometheus URL --range D instead of recordings, the same cluster view
and heat maps come from the agents' metrics in Prometheus.

The output format follows the -o file name: .png or .svg (all charts in one
image) or .html (a self-contained page with a summary table and the charts
inlined; it opens without a network connection). A recording that was cut off
mid-line is read up to its last complete sample.

With --prometheus URL (no recordings) it reads the last --range of every
agent's metrics from that Prometheus server instead (irqpilot agent --listen,
scraped by Prometheus) and draws the fleet charts: per-core utilisation of
every node on one axis, interrupt and busy time per core over time, and the
busiest device-queue IRQs. Nodes are named by the agents' host names.
Each answer is bounded: at most --max-answer MiB (64) read and
--query-timeout (30s) spent per query; a query past either fails with an
error naming the limit, so a long range at a fine step may need a larger
--max-answer or --step.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if o.prom.URL != "" {
				if len(args) > 0 {
					return fmt.Errorf("report: give recordings or --prometheus, not both (got %d recording(s) and --prometheus %s)", len(args), o.prom.URL)
				}
				return nil
			}
			return minArgs(1, "at least one recording (make one with 'irqpilot record -o run.jsonl') or --prometheus URL")(cmd, args)
		},
		RunE: runE(o),
	}
	f := cmd.Flags()
	f.StringVarP(&o.output, "output", "o", "", "report `FILE`: .html, .png or .svg")
	f.IntVar(&o.top, "top", 8, "how many of the busiest IRQs to chart")
	f.Float64Var(&o.width, "width", 10, "chart width in inches (PNG: 96 pixels per inch)")
	f.StringVar(&o.prom.URL, "prometheus", "", "read the agents' metrics from the Prometheus server at `URL` instead of recordings")
	f.DurationVar(&o.prom.Range, "range", 5*time.Minute, "with --prometheus: how far back to read (`duration`)")
	f.DurationVar(&o.prom.Step, "step", 0, "with --prometheus: time between points (`duration`; default 5s, coarser for long ranges)")
	f.DurationVar(&o.prom.RateWindow, "rate-window", 0, "with --prometheus: rate() window (`duration`; default max(step + scrape interval, 4 × scrape interval))")
	f.StringVar(&o.prom.Selector, "selector", "", "with --prometheus: label `matchers` added to every query, e.g. 'job=\"irqpilot\"'")
	f.Int64Var(&o.maxAnswerMiB, "max-answer", promsource.DefaultMaxAnswer>>20, "with --prometheus: the largest answer read per query, in `MiB`")
	f.DurationVar(&o.prom.QueryTimeout, "query-timeout", promsource.DefaultQueryTimeout, "with --prometheus: the longest one query may take, its answer included (`duration`)")
	f.StringVar(&o.before, "before", "", "with --prometheus and --after: the window `FROM,TO` (RFC 3339 or Unix seconds) before a rollout, for the cluster view before and after")
	f.StringVar(&o.after, "after", "", "with --prometheus and --before: the window `FROM,TO` after the rollout")
	_ = cmd.MarkFlagRequired("output")
	return cmd
}

// complete takes the recordings and --max-answer in bytes.
func (o *reportOptions) complete(_ *cobra.Command, args []string) error {
	o.recordings = args
	o.prom.MaxAnswer = o.maxAnswerMiB << 20
	return nil
}

func (o *reportOptions) validate() error {
	if _, err := report.FormatOf(o.output); err != nil {
		return &flagError{flag: "-o", err: err}
	}
	if o.width < 4 || o.width > 100 {
		return flagErrorf("--width", "--width %g: must be between 4 and 100 inches", o.width)
	}
	if o.prom.URL == "" {
		return nil
	}
	if o.maxAnswerMiB <= 0 || o.maxAnswerMiB > 1<<20 {
		return flagErrorf("--max-answer", "--max-answer %d: must be between 1 and %d MiB", o.maxAnswerMiB, 1<<20)
	}
	if o.prom.QueryTimeout <= 0 {
		return flagErrorf("--query-timeout", "--query-timeout %s: must be positive", o.prom.QueryTimeout)
	}
	return nil
}

func (o *reportOptions) run(ctx context.Context, out, errOut io.Writer) error {
	if o.prom.URL != "" {
		return o.runPrometheus(ctx, out, errOut)
	}
	return o.runRecordings(out, errOut)
}

// runPrometheus charts the fleet from Prometheus.
func (o *reportOptions) runPrometheus(ctx context.Context, out, errOut io.Writer) error {
	format, err := report.FormatOf(o.output)
	if err != nil {
		return err
	}
	res, err := promsource.Fetch(ctx, o.prom)
	if err != nil {
		return err
	}
	for _, w := range res.Warnings {
		fmt.Fprintf(errOut, "irqpilot report: prometheus warning: %s\n", w)
	}
	runs, err := promRuns(res.Nodes)
	if err != nil {
		return err
	}
	opts := report.Options{Width: vg.Length(o.width) * vg.Inch, TopIRQs: o.top}
	charts, err := o.promCharts(out, runs, opts)
	if err != nil {
		return err
	}
	if err := o.write(format, runs, charts, opts.Width); err != nil {
		return err
	}
	fmt.Fprintf(out, "wrote %s (%d node(s) from %s, %s to %s every %s, rate window %s, %d charts)\n", o.output, len(runs), o.prom.URL,
		res.Start.Format(time.RFC3339), res.End.Format(time.RFC3339), res.Step, res.Window, len(charts))
	return nil
}

// promRuns makes the nodes read from Prometheus the report's runs.
func promRuns(nodes []promsource.Node) ([]*report.Run, error) {
	runs := make([]*report.Run, len(nodes))
	for i, n := range nodes {
		r, err := report.RunOf(n.Name, n.Source, n.Loads, n.Inv)
		if err != nil {
			return nil, err
		}
		runs[i] = r
	}
	return runs, nil
}

// write writes the charts to -o in its format.
func (o *reportOptions) write(format string, runs []*report.Run, charts []report.Chart, width vg.Length) error {
	f, err := outfile.Create(o.output)
	if err != nil {
		return err
	}
	if format == "html" {
		err = report.WriteHTML(f, runs, charts, width)
	} else {
		err = report.WriteImage(f, format, charts, width)
	}
	if err != nil {
		f.Abort()
	} else {
		err = f.Close()
	}
	if err != nil {
		return fmt.Errorf("%s: %w", o.output, err)
	}
	return nil
}

// runRecordings charts the recordings.
func (o *reportOptions) runRecordings(out, errOut io.Writer) error {
	format, err := report.FormatOf(o.output)
	if err != nil {
		return err
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
	if err := o.write(format, runs, charts, opts.Width); err != nil {
		return err
	}
	fmt.Fprintf(out, "wrote %s (%d recording(s), %d charts)\n", o.output, len(runs), len(charts))
	return nil
}
