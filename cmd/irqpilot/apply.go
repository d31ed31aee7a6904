package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/irqpilot/irqpilot/internal/agent"
	"github.com/irqpilot/irqpilot/internal/apply"
	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/plan"
	"github.com/irqpilot/irqpilot/internal/setting"
)

// applyOptions are apply's flags and argument.
type applyOptions struct {
	g        *globalFlags
	stateDir string
	dryRun   bool
	boot     bool
	replace  bool
	planFile string
	verify   verifyFlags
	// ignoreAgent: apply even though an agent uses the state directory.
	ignoreAgent bool
	input
}

// applyResult is what apply did: the outcome, the error it ended with
// (printed with the outcome: the exit status tells rolled back from
// refused) and, with --verify, the verification.
type applyResult struct {
	res *apply.Outcome
	err error
	ver *pendingVerification
	v   *verificationJSON
}

// applyJSON is `apply --json` (docs/json.md).
type applyJSON struct {
	Journal    string           `json:"journal"`
	Entries    []setting.Change `json:"entries"`
	Changed    int              `json:"changed"`
	Unchanged  int              `json:"unchanged"`
	Skipped    int              `json:"skipped"`
	Error      string           `json:"error"`
	NotPresent []string         `json:"not_present"`
	// Leftovers are settings earlier applied journals still hold that this
	// plan does not mention (with --replace: the ones it could not restore).
	Leftovers []setting.Change `json:"leftovers"`
	// Verification is the prediction checked against the measurement
	// after the change (--verify).
	Verification *verificationJSON `json:"verification,omitempty"`
}

// dryRunJSON is `apply --dry-run --json`.
type dryRunJSON struct {
	DryRun     bool             `json:"dry_run"`
	Entries    []setting.Change `json:"entries"`
	NotPresent []string         `json:"not_present"`
	Leftovers  []setting.Change `json:"leftovers"`
}

func newApplyCmd(g *globalFlags) *cobra.Command {
	o := &applyOptions{g: g}
	cmd := &cobra.Command{
		Use:   "apply PLAN",
		Short: "Apply a plan file transactionally, with a journal for revert",
		Long: `apply reads the plan, resolves it against this machine, and writes only what
differs. Every old value is journaled in --state-dir before the first write,
each write is read back, and any unexpected failure restores everything already
written. Kernel-managed IRQs and settings the device does not support are
reported as skipped. Re-applying the same plan changes nothing.

A plan is the desired state of what it names. apply lists the settings that
earlier applied journals still hold and this plan does not mention; with
--replace it restores them (to their values from before irqpilot changed
them) in the same journal as the plan's writes, so a failure rolls back both
and reverting the new journal puts them back.

The plan file's format is irqpilot-plan(5); 'irqpilot plan -o FILE' makes one.

With --verify[=DURATION] (default 5s) apply measures the machine for that
long before the change, applies it, waits for moved IRQs to take effect,
measures again as long, and prints per CPU the busy and interrupt time
before, predicted and measured, and the error. The prediction is the plan's
when it was made from a measurement that still holds, else one made then by
the same model. The verdict: confirmed (every CPU within --tolerance points
of the prediction, plus the noise measured before), missed (a CPU off by
more, every figure moved the predicted way), worse (a CPU that took work is
now above 80 % busy, or a figure moved the wrong way beyond the noise) or
inconclusive (the packet rate moved by more than 20 % between the windows,
or a NIC's traffic moved between its queues by more than a fifth of its
packets: the workload changed, nothing can be judged). --revert-if worse (or missed)
reverts the change by itself and says so.

When an agent runs with the same state directory (its status socket there
answers), apply refuses and writes nothing: the agent enforces its own plan
and would undo the change within one interval. Give the agent the plan
instead (write it to the agent's --plan file and reload it: SIGHUP, or
systemctl reload irqpilot-agent), or stop the agent first; --ignore-agent
applies anyway. With --boot it applies nothing and says so.

Exit status: 0 applied (or nothing to do) and, with --verify, confirmed;
1 failed and rolled back; 2 error before anything was written; with
--verify, after the change was applied: 3 missed, 4 worse, 5 inconclusive.`,
		Args: exactArgs(1, "a plan file (make one with 'irqpilot plan -o plan.yaml')"),
		RunE: runE(o),
	}
	stateDirFlag(cmd, &o.stateDir)
	cmd.Flags().BoolVar(&o.dryRun, "dry-run", false, "show what would change and write no setting")
	cmd.Flags().BoolVar(&o.boot, "boot", false, "skip entries for devices not present yet (used by the boot unit)")
	cmd.Flags().DurationVar(&o.verify.window, "verify", 0, "measure for `DURATION` before and after the change and check the prediction (default 5s when given without a value)")
	cmd.Flags().Lookup("verify").NoOptDefVal = defaultVerifyWindow.String()
	o.verify.add(cmd, true)
	cmd.Flags().BoolVar(&o.ignoreAgent, "ignore-agent", false, "apply even though an agent runs with this state directory (it will enforce its own plan again)")
	cmd.Flags().BoolVar(&o.replace, "replace", false, "also restore the settings earlier applied journals hold that this plan does not mention (the plan is the whole desired state)")
	return cmd
}

// complete takes the plan argument and the machine to change (--root), or
// with --dry-run also a capture to compare the plan with (--snapshot).
func (o *applyOptions) complete(_ *cobra.Command, args []string) error {
	o.planFile = args[0]
	if o.g.snapshot != "" && !o.dryRun {
		return nil // refused by validate, before anything is unpacked
	}
	return o.open(o.g)
}

func (o *applyOptions) validate() error {
	if o.g.snapshot != "" && !o.dryRun {
		return flagErrorf("--snapshot", "apply writes kernel settings; on a --snapshot it runs only with --dry-run (what the plan would change on the captured machine)")
	}
	if err := o.verify.check(); err != nil {
		return err
	}
	const msg = "--verify takes a positive duration, does not go with --dry-run, and --revert-if needs it"
	switch {
	case o.verify.window < 0, o.verify.window > 0 && o.dryRun:
		return flagErrorf("--verify", msg)
	case o.verify.revertIf != "" && o.verify.window == 0:
		return flagErrorf("--revert-if", msg)
	}
	return nil
}

func (o *applyOptions) run(_ context.Context, out, errOut io.Writer) error {
	if o.fs.IsLive() && os.Geteuid() != 0 && !o.dryRun {
		return fmt.Errorf("apply must run as root to write /proc/irq and /sys/class/net (nothing was changed); use --dry-run to see what would change")
	}
	if !o.dryRun && !o.ignoreAgent {
		if err := besideAgent("apply", o.stateDir); err != nil {
			if o.boot {
				fmt.Fprintln(out, "nothing applied: an irqpilot agent is running with state directory "+o.stateDir+" and enforces its own plan")
				return nil
			}
			return err
		}
	}
	r, err := o.converge(errOut)
	if err != nil {
		return err
	}
	if o.dryRun {
		return o.renderDryRun(out, r)
	}
	if werr := o.render(out, r); werr != nil && r.err == nil {
		return werr
	}
	return r.exit()
}

// converge reads the plan, measures before the change (--verify), applies
// it and measures after. An error it returns was not printed with an
// outcome.
func (o *applyOptions) converge(errOut io.Writer) (*applyResult, error) {
	fs := o.fs
	data, err := plan.ReadFile(o.planFile)
	if err != nil {
		return nil, err
	}
	p, err := plan.Parse(o.planFile, data)
	if err != nil {
		return nil, err
	}
	// Read without writing: the managed-IRQ probe (a write of each IRQ's
	// own affinity) runs only after the plan passed validation against
	// this host, and only for the IRQs it will change (Converge).
	h, err := readHostWith(fs, false, o.stateDir)
	if err != nil {
		return nil, err
	}
	a := apply.New(fs, o.stateDir)
	sum := sha256.Sum256(data)
	meta := apply.Meta{Host: h.Hostname, PlanFile: o.planFile, PlanHash: hex.EncodeToString(sum[:]), Prediction: p.Prediction}
	var ver *pendingVerification
	if o.verify.window > 0 {
		if ver, err = o.beforeChange(fs, h, p); err != nil {
			return nil, &exitError{code: 2, err: err}
		}
		defer ver.meter.close()
		meta.Prediction = ver.pred
	}
	res, err := a.Converge(h, p, apply.ConvergeOptions{
		DryRun: o.dryRun, Boot: o.boot, Replace: o.replace, Captured: o.g.snapshot != "",
		ProbeManaged: !o.dryRun && fs.IsLive() && os.Geteuid() == 0,
		Meta:         meta,
	})
	if res.HostMismatch != "" {
		fmt.Fprintln(errOut, "note:", res.HostMismatch)
	}
	notePendingMoves(h, res.Entries)
	if o.dryRun {
		if err != nil {
			return nil, &exitError{code: 2, err: err}
		}
		return &applyResult{res: res}, nil
	}
	r := &applyResult{res: res, err: err, ver: ver}
	if ver != nil && err == nil {
		if res.Journal == nil {
			ver.note = "nothing changed, so there is nothing to verify"
		} else if r.v, err = o.afterChange(a, ver, res); err != nil {
			return nil, &exitError{code: 2, err: fmt.Errorf("applied (journal %s), but the verification failed: %w", res.Journal.ID, err)}
		}
	}
	return r, nil
}

// exit is apply's exit status for r.
func (r *applyResult) exit() error {
	if r.err != nil {
		// 1: something was written and then rolled back; 2: refused
		// before the first write (lock held, unreadable value…).
		if r.res.Journal == nil {
			return &exitError{code: 2, err: r.err}
		}
		return &exitError{code: 1, err: r.err}
	}
	if r.v != nil {
		return verdictExit(r.v.Verdict)
	}
	return nil
}

// undoCommand is a revert command line that works when pasted: it names
// the state directory and, when the journal was applied in a named network
// namespace other than the host's, runs there.
func undoCommand(stateDir, id string, ns *kernel.NetNS) string {
	return apply.RevertCommand(stateDir, ns, "--to", id)
}

// besideAgent refuses verb (apply, revert) when an agent answers on the
// status socket in stateDir: it enforces its own plan and would undo the
// change within one interval.
func besideAgent(verb, stateDir string) error {
	socket, running := agent.Running(stateDir)
	if !running {
		return nil
	}
	way := "Give the agent the new plan (write it to the agent's --plan file, then reload: systemctl reload irqpilot-agent, or SIGHUP to the agent), or stop the agent first (systemctl stop irqpilot-agent)"
	if verb == "revert" {
		way = "Stop the agent first (systemctl stop irqpilot-agent; with --revert-on-exit it reverts its own changes), or give it another plan and reload it (SIGHUP)"
	}
	return &exitError{code: 2, err: fmt.Errorf("an irqpilot agent is running with state directory %s (its status socket %s answers); it enforces its own plan and would undo this %s within one interval. Nothing was changed. %s; --ignore-agent does it anyway",
		stateDir, socket, verb, way)}
}
