package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/irqpilot/irqpilot/internal/bench/stats"

	"github.com/spf13/cobra"

	"github.com/irqpilot/irqpilot/internal/bench"
)

// tuneOptions are tune's flags.
type tuneOptions struct {
	g        *globalFlags
	wf       workloadFlags
	auto     bool
	search   string
	output   string
	budget   time.Duration
	duration time.Duration
	rounds   int
}

func newTuneCmd(g *globalFlags) *cobra.Command {
	o := &tuneOptions{g: g}
	cmd := &cobra.Command{
		Use:   "tune --auto --workload W",
		Short: "Closed loop: measure the baseline and candidate plans, keep the best only if it beats the baseline beyond the noise",
		Long: fmt.Sprintf(`tune measures the baseline (default) and candidate configurations — irqbalance,
every policy and explicit placements of the application, RPS and NAPI threads —
with successive halving within --budget (--search auto), or every distinct
placement on a small machine (--search exhaustive, ≤ 4 CPUs). The best is kept
only if a Mann-Whitney U test of its runs against the baseline's says it is
faster at %.0f %% (from at least %d runs of each; fewer give a direction only);
otherwise the baseline stays and tune says so. Every change is reverted after
each measurement; the winner is written to --output (its changes and the
report).`, 100*(1-stats.Confidence), stats.MinRuns),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd.OutOrStdout(), cmd.ErrOrStderr()) },
	}
	o.wf.add(cmd.Flags())
	cmd.Flags().BoolVar(&o.auto, "auto", false, "search candidates automatically (successive halving)")
	cmd.Flags().StringVar(&o.search, "search", "auto", "auto (successive halving within --budget) or exhaustive")
	cmd.Flags().DurationVar(&o.budget, "budget", 10*time.Minute, "time budget of the auto search")
	cmd.Flags().DurationVar(&o.duration, "duration", 5*time.Second, "length of one measurement")
	cmd.Flags().IntVar(&o.rounds, "rounds", stats.MinRuns, fmt.Sprintf("measurements per candidate (exhaustive), or at least, of the winner and the baseline (auto); fewer than %d gives no verdict at %.0f %% confidence", stats.MinRuns, 100*stats.Confidence))
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "write the result (winner's changes, observations, reasoning) as JSON")
	return cmd
}

func (o *tuneOptions) run(out, errOut io.Writer) error {
	if !o.auto && o.search == "auto" {
		return &exitError{code: 2, err: fmt.Errorf("tune needs --auto (or --search exhaustive)")}
	}
	r, err := o.wf.runner(nil, 1, o.duration, errOut)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	ctx, stop := signalContext()
	defer stop()
	before, err := bench.ReadMachineState()
	if err != nil {
		return err
	}
	defer func() {
		if cerr := r.Close(); cerr != nil {
			fmt.Fprintln(errOut, "close workload:", cerr)
		}
		after, err := bench.ReadMachineState()
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
	fmt.Fprintf(errOut, "%d candidates\n", len(cands))
	res, err := bench.Tune(ctx, r, cands, o.search, o.budget, o.rounds)
	if res == nil {
		return err
	}
	if o.output != "" {
		b, _ := json.MarshalIndent(res, "", "  ")
		if werr := os.WriteFile(o.output, b, 0o644); werr != nil {
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
	for _, r := range res.Runs {
		if r.Unit != "" {
			unit = " " + r.Unit
			break
		}
	}
	fmt.Fprintf(w, "%s search over %d candidates in %s; ranked by median throughput%s\n", res.Search, len(res.Candidates), res.Elapsed.Round(time.Second), unitParen(unit))
	for i, c := range res.Ranked {
		if i >= 10 {
			break
		}
		fmt.Fprintf(w, "  %2d. %-45s median %.0f%s over %d runs\n", i+1, c, stats.Median(res.Obs[c]), unit, len(res.Obs[c]))
	}
	fmt.Fprintf(w, "baseline %s median %.0f%s over %d runs\n", res.Baseline, stats.Median(res.Obs[res.Baseline]), unit, len(res.Obs[res.Baseline]))
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

func unitParen(unit string) string {
	if unit == "" {
		return ""
	}
	return " (" + strings.TrimSpace(unit) + ")"
}
