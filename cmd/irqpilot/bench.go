package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/irqpilot/irqpilot/internal/bench/stats"
	"github.com/irqpilot/irqpilot/internal/outfile"

	"github.com/spf13/cobra"

	"github.com/irqpilot/irqpilot/internal/bench"
	"github.com/irqpilot/irqpilot/internal/report"
)

// benchOptions are bench's flags.
type benchOptions struct {
	g        *globalFlags
	wf       workloadFlags
	configs  string
	rounds   int
	duration time.Duration
	output   string
	chart    string
	baseline string
	from     string
	aa       bool
	sweep    string
	// bench --predictions (bench_predictions.go).
	predictions bool
	markdown    string
	cost        string
	tolerance   float64
	// configsGiven: --configs was given (--predictions: else every policy).
	configsGiven bool
}

func newBenchCmd(g *globalFlags) *cobra.Command {
	o := &benchOptions{g: g}
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "A/B-measure configurations on a real workload, interleaved, with distribution-free intervals and tests",
		Long: fmt.Sprintf(`bench applies each configuration through the normal apply/revert path, runs the
workload, records throughput, latency and per-CPU load, and reverts. After one
unmeasured priming run (--prime), rounds are interleaved in a balanced order (a
Williams design: over every n rounds for n configurations, 2n when n is odd,
each configuration runs in every position and, inside the rounds, after every
other configuration equally often, so what one leaves behind does not bias
the same neighbour every round). It reports the median and its %.0f %%
distribution-free interval (order statistics) per configuration, the ratio to
the baseline (the median of each round's ratio to the baseline's run in that
round, with the order-statistic interval of those ratios) and a verdict from a
sign test of the per-round ratios at %.0f %%. A verdict needs %d rounds or more:
with fewer, even rounds that all agree are not evidence at %.0f %% (3 of 3 is
p = 0.25), and the ratio is marked "indicative". Warnings name configurations
measured on a saturated CPU (under %.0f %% idle) or with the load generator on
the server's CPUs, and a run without an A/A twin (--aa adds one). --from
FILE re-reads a saved report (with --baseline, against another of its
configurations; "#TAG" names the configuration with that tag). The machine is
restored exactly at the end (checked: every IRQ affinity and queue steering
value).

Configurations: default, irqbalance, dedicated-core, per-queue, colocate,
rps-spread, auto, and spec:app=CPUS,client=CPUS,rps=CPUS|off,napi=CPUS,flows=N,irq=N:CPUS.
NAME#TAG measures NAME under its own label: --configs default,default#aa is an
A/A run, the noise floor every other ratio is read against.
NAME/busypoll=US and NAME/epollbusy=US (udp workload) measure NAME with the
sink busy polling its socket or its epoll instance: --configs
default,latency,latency/epollbusy=50 compares the NAPI settings with and
without an application that opts in.

--predictions checks the cost model instead: with the workload running, each
policy (--configs, default every policy) gets one row per round: a window of
--duration is measured, the policy's plan is made from it with its
prediction (scoped to the device under test), applied, the moved IRQs are
waited for, the same window is measured again and the prediction is judged
by the code 'apply --verify' runs (per CPU error; confirmed, missed, worse or
inconclusive); then the change is reverted. --markdown FILE writes the error
table into FILE's generated section (docs/benchmarks.md); --from A.json,B.json
prints saved campaigns again.`, 100*stats.Confidence, 100*(1-stats.Confidence), stats.MinRuns, 100*stats.Confidence, bench.SaturatedIdlePct),
		Args: cobra.NoArgs,
		RunE: runE(o),
	}
	o.wf.add(cmd.Flags())
	cmd.Flags().StringVar(&o.configs, "configs", "default,irqbalance,rps-spread", "comma-separated configurations (spec: configurations use + between CPUs; A&B measures two together, e.g. spec:app=1&napi:threaded=1)")
	cmd.Flags().IntVar(&o.rounds, "rounds", stats.MinRuns, fmt.Sprintf("measurements per configuration (fewer than %d: no verdict at %.0f %% confidence)", stats.MinRuns, 100*stats.Confidence))
	cmd.Flags().DurationVar(&o.duration, "duration", 10*time.Second, "length of one measurement")
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "write the JSON report to this file")
	cmd.Flags().StringVar(&o.chart, "chart", "", "write a chart (.png or .svg): throughput with intervals and per-CPU %soft")
	cmd.Flags().StringVar(&o.baseline, "baseline", "", "configuration the others are compared with (default: the first)")
	cmd.Flags().BoolVar(&o.aa, "aa", false, "also measure an A/A twin: a second copy of the baseline (NAME#aa), whose ratio to the baseline is this run's noise floor")
	cmd.Flags().StringVar(&o.sweep, "sweep", "", "run the whole bench once per value, e.g. connections=1,4,16,64 (the load generator's concurrency), and draw the curve (--chart): the figure of merit against the value, one line per configuration, with intervals")
	cmd.Flags().StringVar(&o.from, "from", "", "measure nothing: read a saved JSON report (-o) and print it again, summarised with this version's statistics (with --predictions: reports, comma-separated)")
	cmd.Flags().BoolVar(&o.predictions, "predictions", false, "check the cost model instead of comparing configurations: for each policy of --configs (default: every policy), measure the running workload for --duration, make the policy's plan from that measurement with its prediction, apply it, measure again and judge the prediction as 'apply --verify' does (per CPU error, verdict), then revert")
	cmd.Flags().StringVar(&o.markdown, "markdown", "", "with --predictions: write the error table into this Markdown `FILE`, between its generated section's markers (appended when it has none)")
	cmd.Flags().Float64Var(&o.tolerance, "tolerance", predictionsTolerance, "with --predictions: verify's tolerance in `POINTS` (as apply --verify's)")
	addCostFlag(cmd, &o.cost)
	return cmd
}

// complete notes whether --configs was given and, for --predictions,
// defaults --rounds to one verified change per policy.
func (o *benchOptions) complete(cmd *cobra.Command, _ []string) error {
	o.configsGiven = cmd.Flags().Changed("configs")
	if o.predictions && !cmd.Flags().Changed("rounds") {
		o.rounds = 1
	}
	return nil
}

func (o *benchOptions) validate() error {
	if o.predictions {
		for _, f := range []struct {
			name string
			set  bool
		}{{"--sweep", o.sweep != ""}, {"--aa", o.aa}, {"--chart", o.chart != ""}, {"--baseline", o.baseline != ""}} {
			if f.set {
				return flagErrorf(f.name, "--predictions checks the model: --sweep, --aa, --chart and --baseline compare configurations")
			}
		}
		return nil
	}
	switch {
	case o.markdown != "":
		return flagErrorf("--markdown", "--markdown writes --predictions' table")
	case o.from != "" && o.sweep != "":
		return flagErrorf("--sweep", "--sweep measures; --from measures nothing")
	case o.from != "" && o.aa:
		return flagErrorf("--aa", "--aa measures a twin; --from measures nothing")
	}
	return nil
}

func (o *benchOptions) run(_ context.Context, out, errOut io.Writer) error {
	if o.predictions {
		return o.runPredictions(out, errOut)
	}
	if o.from != "" {
		b, err := os.ReadFile(o.from)
		if err != nil {
			return &exitError{code: 2, err: err}
		}
		rep, err := bench.ReadReport(b, o.baseline)
		if err != nil {
			return &exitError{code: 2, err: fmt.Errorf("%s: %w", o.from, err)}
		}
		return o.writeReport(out, rep)
	}
	if o.sweep != "" {
		return o.runSweep(out, errOut)
	}
	configs, baseline, err := o.configList()
	if err != nil {
		return err
	}
	r, err := o.wf.runner(configs, o.rounds, o.duration, errOut)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	ctx, stop := signalContext()
	defer stop()
	rep, err := bench.Bench(ctx, r, baseline)
	if rep != nil {
		if werr := o.writeReport(out, rep); werr != nil {
			err = joinErr(err, werr)
		}
		if !rep.Restored && len(rep.Diff) > 0 {
			err = joinErr(err, fmt.Errorf("machine not restored: %d values differ", len(rep.Diff)))
		}
	}
	return err
}

func splitConfigs(s string) []string {
	var out []string
	cur := ""
	// spec:…,… and napi:…,… contain commas: a part continues one only
	// when it is one of its KEY=VALUE fields; anything else ("latency/busypoll=50",
	// "spec:…", "default") starts the next configuration. In a combination
	// ("spec:…&napi:…") the last of its parts is the one continued.
	parts := strings.Split(s, ",")
	for _, p := range parts {
		key, _, _ := strings.Cut(strings.TrimSpace(p), "=")
		last := cur[strings.LastIndex(cur, bench.CombineSep)+1:]
		if cur != "" && (strings.HasPrefix(last, "spec:") && slices.Contains(bench.SpecFields, key) ||
			strings.HasPrefix(last, "napi:") && slices.Contains(bench.KnobFields, key)) {
			cur += "," + p
			continue
		}
		if cur != "" {
			out = append(out, cur)
		}
		cur = strings.TrimSpace(p)
	}
	if cur != "" {
		out = append(out, cur)
	}
	return out
}

// writeReport writes the report to --output and --chart, and prints it.
func (o *benchOptions) writeReport(w io.Writer, rep *bench.Report) error {
	if out := o.output; out != "" {
		b, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		if err := outfile.Write(out, b); err != nil {
			return err
		}
	}
	if o.chart != "" && len(rep.Summary) > 0 {
		if err := report.BenchChart(rep, o.chart); err != nil {
			return fmt.Errorf("chart: %w", err)
		}
	}
	if o.g.json {
		return writeJSONLine(w, rep)
	}
	return rep.WriteTable(w)
}

// configList is --configs with --baseline resolved to one of them and,
// with --aa, the baseline's A/A twin added. It runs before anything
// starts: a --baseline typo would otherwise measure every run and compare
// none.
func (o *benchOptions) configList() (configs []string, baseline string, err error) {
	configs = splitConfigs(o.configs)
	if o.baseline != "" {
		if baseline, err = bench.FindConfig(configs, o.baseline); err != nil {
			return nil, "", &exitError{code: 2, err: fmt.Errorf("--baseline: %w", err)}
		}
	}
	if o.aa {
		configs = bench.WithTwin(configs, baseline)
	}
	return configs, baseline, nil
}
