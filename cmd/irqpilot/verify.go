package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/irqpilot/irqpilot/internal/apply"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/plan"
	"github.com/irqpilot/irqpilot/internal/setting"
	"github.com/irqpilot/irqpilot/internal/verify"
)

// Exit statuses of a verification (apply --verify, verify), after the
// change was applied: 0 confirmed.
const (
	exitMissed       = 3
	exitWorse        = 4
	exitInconclusive = 5
)

// defaultVerifyWindow is how long --verify measures before and after the
// change when no duration is given.
const defaultVerifyWindow = 5 * time.Second

// verifyFlags are the flags apply --verify and verify share.
type verifyFlags struct {
	window    time.Duration
	tolerance float64
	revertIf  string
	cost      string
}

func (f *verifyFlags) add(cmd *cobra.Command, withRevert bool) {
	fl := cmd.Flags()
	fl.Float64Var(&f.tolerance, "tolerance", verify.DefaultTolerance, "a CPU is within the prediction when its busy and interrupt time are within this many `POINTS` of it (plus the noise measured before the change)")
	if withRevert {
		fl.StringVar(&f.revertIf, "revert-if", "", "with --verify, revert the change by itself when the verdict is `worse` (or missed: missed or worse)")
	}
	addCostFlag(cmd, &f.cost)
}

func (f *verifyFlags) check() error {
	switch f.revertIf {
	case "", string(verify.Worse), string(verify.Missed):
	default:
		return flagErrorf("--revert-if", "--revert-if %q: want worse or missed", f.revertIf)
	}
	if f.tolerance <= 0 || f.tolerance > 100 {
		return flagErrorf("--tolerance", "--tolerance %v: want points between 0 and 100", f.tolerance)
	}
	return nil
}

// shouldRevert reports whether --revert-if asks to undo a change with verdict v.
func (f *verifyFlags) shouldRevert(v verify.Verdict) bool {
	switch f.revertIf {
	case string(verify.Worse):
		return v == verify.Worse
	case string(verify.Missed):
		return v == verify.Worse || v == verify.Missed
	}
	return false
}

// verificationJSON is the `verification` object of apply --verify --json
// and verify --json (docs/json.md).
type verificationJSON struct {
	verify.Result
	Seconds float64 `json:"window_seconds"`
	Journal string  `json:"journal,omitempty"`
	// Reverted is set when --revert-if undid the change.
	Reverted bool   `json:"reverted"`
	Note     string `json:"note,omitempty"`
}

// verifyOptions are verify's flags.
type verifyOptions struct {
	g        *globalFlags
	stateDir string
	journal  string
	flags    verifyFlags
	fs       *kernel.FS
}

func newVerifyCmd(g *globalFlags) *cobra.Command {
	o := &verifyOptions{g: g}
	cmd := &cobra.Command{
		Use:   "verify [--journal ID]",
		Short: "Check an applied change's prediction against the machine now",
		Long: `verify measures the machine for --duration and compares each CPU's busy and
interrupt time with what the applied journal's plan predicted (a plan made
from a measurement carries its prediction, and apply keeps it in the
journal). It writes nothing.

The verdict: confirmed (every CPU within --tolerance points of the
prediction, plus the noise), missed (a CPU off by more, every figure moved
the predicted way), worse (a CPU that took work is above 80 % busy, or a
figure moved the wrong way beyond the noise) or inconclusive (the packet
rate is more than 20 % away from the one the prediction was made at: the
workload changed, so nothing can be judged). Made later than the apply, the
verification knows the measurement before the change only as far as the
prediction keeps it; 'apply --verify' measures both sides itself.

Exit status: 0 confirmed, 2 error (no applied journal, no prediction),
3 missed, 4 worse, 5 inconclusive.`,
		Args: cobra.NoArgs,
		RunE: runE(o),
	}
	stateDirFlag(cmd, &o.stateDir)
	cmd.Flags().StringVar(&o.journal, "journal", "", "applied journal `ID` to verify (see 'irqpilot history'); default the newest applied")
	cmd.Flags().DurationVar(&o.flags.window, "duration", defaultVerifyWindow, "how long to measure")
	o.flags.add(cmd, false)
	return cmd
}

// complete refuses a --state-dir given that does not exist, and takes the
// machine (--root) to measure.
func (o *verifyOptions) complete(cmd *cobra.Command, _ []string) error {
	if err := existingStateDir(cmd, o.stateDir); err != nil {
		return err
	}
	o.fs = kernel.New(o.g.root)
	return nil
}

func (o *verifyOptions) validate() error {
	if o.g.snapshot != "" {
		return flagErrorf("--snapshot", "verify measures the live machine a journal changed; it cannot run on a --snapshot")
	}
	if err := o.flags.check(); err != nil {
		return err
	}
	if o.flags.window <= 0 {
		return flagErrorf("--duration", "--duration %v: must be positive", o.flags.window)
	}
	return nil
}

func (o *verifyOptions) run(_ context.Context, out, _ io.Writer) error {
	j, err := o.pick()
	if err != nil {
		return err
	}
	if j.Prediction == nil {
		return fmt.Errorf("journal %s has no prediction to verify: its plan was not made from a measurement (apply --verify measures before the change and predicts then)", j.ID)
	}
	fs := o.fs
	m, err := newLiveMeter(fs, o.flags.cost)
	if err != nil {
		return err
	}
	defer m.close()
	h, err := readHostWith(fs, false, o.stateDir)
	if err != nil {
		return err
	}
	after, _, err := m.measure(h, o.flags.window)
	if err != nil {
		return err
	}
	vo := verify.Options{Tolerance: o.flags.tolerance}
	v := &verificationJSON{Result: verify.Judge(j.Prediction, verify.FromPrediction(j.Prediction), after, vo), Seconds: after.Seconds, Journal: j.ID,
		Note: fmt.Sprintf("before is the measurement journal %s's prediction was made from (%s)", j.ID, j.Time.Format(time.RFC3339))}
	if err := renderVerification(out, v, m.note, o.g.json); err != nil {
		return err
	}
	return verdictExit(v.Verdict)
}

// renderVerification prints verify's verdict (costNote: how interrupt
// time was known), or its JSON document.
func renderVerification(out io.Writer, v *verificationJSON, costNote string, asJSON bool) error {
	if asJSON {
		return writeJSON(out, struct {
			Verification *verificationJSON `json:"verification"`
		}{v})
	}
	printVerification(out, v, costNote)
	return nil
}

// pick is the journal --journal names, or the newest applied one.
func (o *verifyOptions) pick() (*apply.Journal, error) {
	if o.journal != "" {
		j, err := apply.LoadJournal(o.stateDir, o.journal)
		if err != nil {
			return nil, err
		}
		if j.State != apply.StateApplied {
			return nil, fmt.Errorf("journal %s is %s, not applied: there is no change in force to verify", j.ID, j.State)
		}
		return j, nil
	}
	js, err := apply.History(o.stateDir)
	if err != nil {
		return nil, err
	}
	for i := len(js) - 1; i >= 0; i-- {
		if js[i].State == apply.StateApplied {
			return js[i], nil
		}
	}
	return nil, fmt.Errorf("no applied journal in %s to verify", o.stateDir)
}

// pendingVerification is apply --verify's state between the measurement
// before the change and the one after.
type pendingVerification struct {
	meter  *liveMeter
	h      *host.Host
	before verify.Measurement
	pred   *plan.Prediction
	note   string
	// repredicted: the plan's own prediction was set aside, and why.
	repredicted string
}

// beforeChange checks the plan against the host (so nothing is measured
// for a plan that will be refused), measures the machine and settles the
// prediction to verify.
func (o *applyOptions) beforeChange(fs *kernel.FS, h *host.Host, p *plan.Plan) (*pendingVerification, error) {
	if _, err := plan.Resolve(p, h); err != nil {
		return nil, err
	}
	m, err := newLiveMeter(fs, o.verify.cost)
	if err != nil {
		return nil, err
	}
	before, l, err := m.measure(h, o.verify.window)
	if err != nil {
		m.close()
		return nil, fmt.Errorf("measuring before the change (nothing was written): %w", err)
	}
	pred, note, re := predictionFor(h, p, before, l, verify.Options{Tolerance: o.verify.tolerance})
	return &pendingVerification{meter: m, h: h, before: before, pred: pred, note: note, repredicted: re}, nil
}

// afterChange measures the machine after the change, judges the
// prediction and, when --revert-if asks, reverts the journal.
func (o *applyOptions) afterChange(a *apply.Applier, ver *pendingVerification, res *apply.Outcome) (*verificationJSON, error) {
	var moved []int
	for _, e := range res.Entries {
		if e.IRQ != nil && e.Status == setting.StatusDone {
			moved = append(moved, *e.IRQ)
		}
	}
	ver.meter.settle(moved)
	after, _, err := ver.meter.measure(ver.h, o.verify.window)
	if err != nil {
		return nil, err
	}
	v := &verificationJSON{Result: verify.Judge(ver.pred, ver.before, after, verify.Options{Tolerance: o.verify.tolerance}),
		Seconds: after.Seconds, Journal: res.Journal.ID, Note: ver.note}
	v.Repredicted = ver.repredicted
	if o.verify.shouldRevert(v.Verdict) {
		if _, err := a.Revert(res.Journal.ID, false); err != nil {
			return v, fmt.Errorf("verdict %s, and --revert-if %s could not revert: %w (undo: %s)", v.Verdict, o.verify.revertIf, err,
				undoCommand(o.stateDir, res.Journal.ID, res.Journal.NetNS))
		}
		v.Reverted = true
	}
	return v, nil
}
