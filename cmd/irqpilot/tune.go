package main

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/irqpilot/irqpilot/internal/bench"
)

func init() {
	var wf workloadFlags
	var auto bool
	var search, out string
	var budget, duration time.Duration
	var rounds int
	cmd := &cobra.Command{
		Use:   "tune --auto --workload W",
		Short: "Closed loop: measure the baseline and candidate plans, keep the best only if it beats the baseline beyond the noise",
		Long: `tune measures the baseline (default) and candidate configurations — irqbalance,
every policy and explicit placements of the application, RPS and NAPI threads —
with successive halving within --budget (--search auto), or every distinct
placement on a small machine (--search exhaustive, ≤ 4 CPUs). The best is kept
only if its ratio to the baseline is above 1 with 95 % confidence; otherwise
the baseline stays and tune says so. Every change is reverted after each
measurement; the winner is written to --output (its changes and the report).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !auto && search == "auto" {
				return &exitError{code: 2, err: fmt.Errorf("tune needs --auto (or --search exhaustive)")}
			}
			r, err := wf.runner(nil, 1, duration)
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
					fmt.Fprintln(os.Stderr, "close workload:", cerr)
				}
				after, err := bench.ReadMachineState()
				if err == nil {
					if d := before.Diff(after); len(d) > 0 {
						fmt.Fprintf(os.Stderr, "WARNING: machine not restored: %v\n", d)
					}
				}
			}()
			if err := r.Start(); err != nil {
				return err
			}
			var cands []string
			app := r.App()
			app.ClientFixed = wf.clientCPUs != ""
			if search == "exhaustive" {
				if cands, err = bench.ExhaustiveSpace(r.Host(), app); err != nil {
					return err
				}
			} else {
				cands = bench.Candidates(r.Host(), app)
			}
			fmt.Fprintf(os.Stderr, "%d candidates\n", len(cands))
			res, err := bench.Tune(ctx, r, cands, search, budget, rounds)
			if res != nil {
				if out != "" {
					b, _ := json.MarshalIndent(res, "", "  ")
					if werr := os.WriteFile(out, b, 0o644); werr != nil {
						err = joinErr(err, werr)
					}
				}
				if global.json {
					_ = json.NewEncoder(cmd.OutOrStdout()).Encode(res)
				} else {
					w := cmd.OutOrStdout()
					fmt.Fprintf(w, "%s search over %d candidates in %s\n", res.Search, len(res.Candidates), res.Elapsed.Round(time.Second))
					for i, c := range res.Ranked {
						if i >= 10 {
							break
						}
						fmt.Fprintf(w, "  %2d. %-45s median %.0f over %d runs\n", i+1, c, bench.Median(res.Obs[c]), len(res.Obs[c]))
					}
					fmt.Fprintf(w, "baseline %s median %.0f\n", res.Baseline, bench.Median(res.Obs[res.Baseline]))
					for _, s := range res.Summary {
						if s.Config != res.Baseline && s.Config != res.Best {
							continue
						}
						fmt.Fprintf(w, "  %s per-CPU median:", s.Config)
						for _, c := range s.CPUs {
							fmt.Fprintf(w, "  CPU%d %%soft %.1f %%idle %.1f", c.ID, c.SoftIRQ, c.Idle)
						}
						fmt.Fprintln(w)
					}
					fmt.Fprintln(w, res.Why)
				}
			}
			return err
		},
	}
	wf.add(cmd.Flags())
	cmd.Flags().BoolVar(&auto, "auto", false, "search candidates automatically (successive halving)")
	cmd.Flags().StringVar(&search, "search", "auto", "auto (successive halving within --budget) or exhaustive")
	cmd.Flags().DurationVar(&budget, "budget", 10*time.Minute, "time budget of the auto search")
	cmd.Flags().DurationVar(&duration, "duration", 5*time.Second, "length of one measurement")
	cmd.Flags().IntVar(&rounds, "rounds", 2, "exhaustive: measurements per candidate")
	cmd.Flags().StringVarP(&out, "output", "o", "", "write the result (winner's changes, observations, reasoning) as JSON")
	rootCmd.AddCommand(cmd)
}
