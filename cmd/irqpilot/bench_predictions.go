package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/irqpilot/irqpilot/internal/bench"
	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/outfile"
	"github.com/irqpilot/irqpilot/internal/policy"
	"github.com/irqpilot/irqpilot/internal/verify"
)

// runPredictions is bench --predictions: every policy of --configs (every
// policy when --configs is not given) predicted, applied and verified on
// the workload; or, with --from, saved campaigns (one JSON per workload,
// comma-separated) printed again and, with --markdown, written into a
// document's generated section.
func (o *benchOptions) runPredictions(out, errOut io.Writer) error {
	var reps []*bench.PredictionReport
	if o.from != "" {
		for _, f := range strings.Split(o.from, ",") {
			b, err := os.ReadFile(f)
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			rep, err := bench.ReadPredictionReport(b)
			if err != nil {
				return &exitError{code: 2, err: fmt.Errorf("%s: %w", f, err)}
			}
			reps = append(reps, rep)
		}
		return o.writePredictions(out, reps)
	}
	policies := policy.PolicyNames()
	if o.configsGiven {
		policies = splitConfigs(o.configs)
	}
	r, err := o.wf.runner(nil, o.rounds, o.duration, errOut)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	reader, stopCost, note, err := startCost(o.cost, kernel.New("/"))
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	defer stopCost()
	fmt.Fprintln(errOut, note)
	ctx, stop := signalContext()
	defer stop()
	rep, err := bench.Predictions(ctx, r, policies, bench.PredictionOptions{Window: o.duration, Warmup: o.wf.warmup, Cost: reader, Tolerance: o.tolerance})
	if rep != nil {
		if werr := o.writePredictions(out, []*bench.PredictionReport{rep}); werr != nil {
			err = joinErr(err, werr)
		}
		if !rep.Restored && len(rep.Diff) > 0 {
			err = joinErr(err, fmt.Errorf("machine not restored: %d values differ", len(rep.Diff)))
		}
	}
	return err
}

// writePredictions writes one campaign to --output, the table to out and,
// with --markdown, the generated section into that file.
func (o *benchOptions) writePredictions(w io.Writer, reps []*bench.PredictionReport) error {
	if o.output != "" && len(reps) == 1 {
		b, err := json.MarshalIndent(reps[0], "", "  ")
		if err != nil {
			return err
		}
		if err := outfile.Write(o.output, b); err != nil {
			return err
		}
	}
	if o.markdown != "" {
		doc, err := os.ReadFile(o.markdown)
		if err != nil && !os.IsNotExist(err) {
			return err
		}
		updated := bench.ReplacePredictionsSection(string(doc), bench.PredictionMarkdown(reps))
		if err := outfile.Write(o.markdown, []byte(updated)); err != nil {
			return err
		}
	}
	if o.g.json {
		return writeJSONLine(w, reps)
	}
	return bench.WritePredictionTable(w, reps)
}

// predictionsTolerance is --tolerance's default for bench --predictions.
const predictionsTolerance = verify.DefaultTolerance
