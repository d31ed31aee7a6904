package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"time"

	"github.com/irqpilot/irqpilot/internal/bench/stats"
	"github.com/irqpilot/irqpilot/internal/outfile"

	"github.com/spf13/cobra"

	"github.com/irqpilot/irqpilot/internal/bench"
)

// tuneOptions are tune's flags.
type tuneOptions struct {
	g         *globalFlags
	wf        workloadFlags
	auto      bool
	search    string
	output    string
	budget    time.Duration
	duration  time.Duration
	rounds    int
	objective string
}

func newTuneCmd(g *globalFlags) *cobra.Command {
	o := &tuneOptions{g: g}
	cmd := &cobra.Command{
		Use:   "tune --auto --workload W",
		Short: "Closed loop: measure the baseline and candidate plans, keep the best only if it beats the baseline beyond the noise",
		Long: fmt.Sprintf(`tune measures the baseline (default) and candidate configurations — irqbalance,
every policy, explicit placements of the application, RPS and NAPI threads,
and the NAPI settings of the device under test (deferral with GRO flush, IRQ
suspension, threaded NAPI, and busy polling where the workload's server opts
its sockets in) — with successive halving within --budget (--search auto), or
every distinct placement on a small machine (--search exhaustive, ≤ 4 CPUs),
ranked on --objective: throughput, p99 (latency) or cpu-per-op (the machine's
busy CPU time per operation). The best placement and the best NAPI setting,
each better than the baseline, are then measured together as one more
candidate (PLACEMENT&SETTING): effects need not add up. The best is measured
again in --rounds interleaved rounds beside the baseline and an A/A twin of
it, and kept only if a sign test of its per-round ratios says it is better at
%.0f %% (from at least %d rounds; fewer give a direction only) and its ratio
lies outside the twin's A/A band (1/F to F, F = max(1/low, high) of the twin's
interval); otherwise the baseline stays and tune says so, with the numbers.
Every change is reverted after each measurement; the winner is written to
--output (its changes, the measurement that justifies it and the report).

Before any run, each candidate is set up as it would be measured: one that
writes and places nothing here is set aside as "no change" (the baseline
measures it), one identical to an earlier candidate as "same as X", one
that cannot be set up on this device (a NAPI setting without a NAPI
instance) as "not measured", each with the reason. Successive halving ranks
no candidate on fewer than %d runs. --budget is a hard limit, checked before
each run: a run that would end past it is not started, a confirmation that
does not fit is not begun (nothing is then kept), and what was cut is said
at the end.`, 100*(1-stats.Confidence), stats.MinRuns, stats.MinRankRuns),
		Args: cobra.NoArgs,
		RunE: runE(o),
	}
	o.wf.add(cmd.Flags())
	cmd.Flags().BoolVar(&o.auto, "auto", false, "search candidates automatically (successive halving)")
	cmd.Flags().StringVar(&o.search, "search", "auto", "auto (successive halving within --budget) or exhaustive")
	cmd.Flags().DurationVar(&o.budget, "budget", 10*time.Minute, "time budget of the auto search")
	cmd.Flags().DurationVar(&o.duration, "duration", 5*time.Second, "length of one measurement")
	cmd.Flags().IntVar(&o.rounds, "rounds", stats.MinRuns, fmt.Sprintf("measurements per candidate (exhaustive), and rounds of the winner, the baseline and its A/A twin in the confirmation; fewer than %d gives no verdict at %.0f %% confidence", stats.MinRuns, 100*stats.Confidence))
	cmd.Flags().StringVar(&o.objective, "objective", "", "what to optimise: throughput, p99 or cpu-per-op (default: p99 for a latency workload, throughput otherwise)")
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "write the result (winner's changes, observations, reasoning) as JSON")
	return cmd
}

func (o *tuneOptions) validate() error {
	if !o.auto && o.search == "auto" {
		return flagErrorf("--auto", "tune needs --auto (or --search exhaustive)")
	}
	if _, err := bench.ParseObjective(o.objective); err != nil {
		return &flagError{flag: "--objective", err: err}
	}
	return nil
}

func (o *tuneOptions) run(_ context.Context, out, errOut io.Writer) error {
	obj, _ := bench.ParseObjective(o.objective) // validated
	r, err := o.wf.runner(nil, 1, o.duration, errOut)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	ctx, stop := signalContext()
	defer stop()
	before, err := bench.ReadMachineState(r.FS)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := r.Close(); cerr != nil {
			fmt.Fprintln(errOut, "close workload:", cerr)
		}
		after, err := bench.ReadMachineState(r.FS)
		if err == nil {
			if d := before.Diff(after); len(d) > 0 {
				fmt.Fprintf(errOut, "WARNING: machine not restored: %v\n", d)
			}
		}
	}()
	if err := r.Start(); err != nil {
		return err
	}
	var cands []string
	app := r.App()
	app.ClientFixed = o.wf.clientCPUs != ""
	if o.search == "exhaustive" {
		if cands, err = bench.ExhaustiveSpace(r.Host(), app); err != nil {
			return err
		}
	} else {
		cands = bench.Candidates(r.Host(), app)
	}
	bp, _ := r.Workload.(interface{ BusyPolls() bool })
	knobs, notes := bench.KnobCandidates(r.Host(), app, bp != nil && bp.BusyPolls())
	cands = append(cands, knobs...)
	fmt.Fprintf(errOut, "%d candidates\n", len(cands))
	res, err := bench.TuneFor(ctx, r, cands, o.search, o.budget, o.rounds, obj)
	if res == nil {
		return err
	}
	res.Notes = append(res.Notes, notes...)
	if o.output != "" {
		b, _ := json.MarshalIndent(res, "", "  ")
		if werr := outfile.Write(o.output, b); werr != nil {
			err = joinErr(err, werr)
		}
	}
	if o.g.json {
		_ = writeJSONLine(out, res)
	} else {
		writeTune(out, res)
	}
	return err
}

// writeTune prints the ten best candidates, the baseline and the winner's
// per-CPU load, and why the winner was kept or not.
func writeTune(w io.Writer, res *bench.TuneResult) {
	unit := ""
	for _, s := range res.Summary { // the objective's
		if s.Unit != "" {
			unit = " " + s.Unit
			break
		}
	}
	fmt.Fprintf(w, "%s search over %d candidates in %s; ranked by the median %s\n", res.Search, len(res.Candidates), res.Elapsed.Round(time.Second), res.Objective.Describe())
	for i, c := range res.Ranked {
		if i >= 10 {
			break
		}
		fmt.Fprintf(w, "  %2d. %-45s median %s%s over %d runs\n", i+1, c, bench.FormatFigure(stats.Median(res.Obs[c])), unit, len(res.Obs[c]))
	}
	fmt.Fprintf(w, "baseline %s median %s%s over %d runs\n", res.Baseline, bench.FormatFigure(stats.Median(res.Obs[res.Baseline])), unit, len(res.Obs[res.Baseline]))
	for _, c := range slices.Sorted(maps.Keys(res.Merged)) {
		fmt.Fprintf(w, "  set aside before measuring: %-30s %s\n", c, res.Merged[c])
	}
	for _, n := range res.Notes {
		fmt.Fprintln(w, "note:", n)
	}
	if res.Cut != "" {
		fmt.Fprintln(w, "cut:", res.Cut)
	}
	for _, s := range res.Summary {
		if s.Config != res.Baseline && s.Config != res.Best {
			continue
		}
		fmt.Fprintf(w, "  %s per-CPU median:", s.Config)
		for _, c := range s.CPUs {
			fmt.Fprintf(w, "  CPU%d %%soft %.1f %%idle %.1f", c.ID, c.SoftIRQ, c.IdleOrIOWait())
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, res.Why)
}
