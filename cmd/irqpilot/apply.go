package main

import (
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
		RunE: func(cmd *cobra.Command, args []string) error {
			o.planFile = args[0]
			return o.run(cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
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

func (o *applyOptions) run(out, errOut io.Writer) error {
	if o.g.snapshot != "" {
		return fmt.Errorf("apply writes kernel settings; it cannot run on a --snapshot")
	}
	fs := kernel.New(o.g.root)
	if fs.IsLive() && os.Geteuid() != 0 && !o.dryRun {
		return fmt.Errorf("apply must run as root to write /proc/irq and /sys/class/net (nothing was changed); use --dry-run to see what would change")
	}
	if err := o.verify.check(); err != nil {
		return err
	}
	if o.verify.window < 0 || (o.verify.window > 0 && o.dryRun) || (o.verify.revertIf != "" && o.verify.window == 0) {
		return fmt.Errorf("--verify takes a positive duration, does not go with --dry-run, and --revert-if needs it")
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
	data, err := plan.ReadFile(o.planFile)
	if err != nil {
		return err
	}
	p, err := plan.Parse(o.planFile, data)
	if err != nil {
		return err
	}
	// Read without writing: the managed-IRQ probe (a write of each IRQ's
	// own affinity) runs only after the plan passed validation against
	// this host, and only for the IRQs it will change (Converge).
	h, err := readHostWith(fs, false, o.stateDir)
	if err != nil {
		return err
	}
	a := apply.New(fs, o.stateDir)
	sum := sha256.Sum256(data)
	meta := apply.Meta{Host: h.Hostname, PlanFile: o.planFile, PlanHash: hex.EncodeToString(sum[:]), Prediction: p.Prediction}
	var ver *pendingVerification
	if o.verify.window > 0 {
		if ver, err = o.beforeChange(fs, h, p); err != nil {
			return &exitError{code: 2, err: err}
		}
		defer ver.meter.close()
		meta.Prediction = ver.pred
	}
	res, err := a.Converge(h, p, apply.ConvergeOptions{
		DryRun: o.dryRun, Boot: o.boot, Replace: o.replace,
		ProbeManaged: !o.dryRun && fs.IsLive() && os.Geteuid() == 0,
		Meta:         meta,
	})
	if res.HostMismatch != "" {
		fmt.Fprintln(errOut, "note:", res.HostMismatch)
	}
	notePendingMoves(h, res.Entries)
	if o.dryRun {
		if err != nil {
			return &exitError{code: 2, err: err}
		}
		if o.g.json {
			return writeJSON(out, dryRunJSON{DryRun: true, Entries: nonNil(res.Entries), NotPresent: res.NotPresent, Leftovers: nonNil(res.Leftovers)})
		}
		printEntries(out, res.Entries, true)
		for _, d := range res.NotPresent {
			fmt.Fprintf(out, "not present yet: %s\n", d)
		}
		printLeftovers(out, res.Leftovers, o.replace, true)
		return nil
	}
	var v *verificationJSON
	if ver != nil && err == nil {
		if res.Journal == nil {
			ver.note = "nothing changed, so there is nothing to verify"
		} else if v, err = o.afterChange(a, ver, res); err != nil {
			return &exitError{code: 2, err: fmt.Errorf("applied (journal %s), but the verification failed: %w", res.Journal.ID, err)}
		}
	}
	if o.g.json {
		j := applyJSON{Verification: v, Entries: nonNil(res.Entries), Changed: res.Changed, Unchanged: res.Unchanged, Skipped: res.Skipped,
			Error: errString(err), NotPresent: res.NotPresent, Leftovers: nonNil(res.Leftovers)}
		if res.Journal != nil {
			j.Journal = res.Journal.ID
		}
		if werr := writeJSON(out, j); err == nil && werr != nil {
			return werr
		}
	} else {
		if len(res.Entries) > 0 {
			printEntries(out, res.Entries, false)
		}
		switch {
		case err != nil:
		case res.Journal == nil:
			fmt.Fprintf(out, "nothing to change: the plan is already in force (%d settings checked, %d skipped)\n", res.Unchanged, res.Skipped)
		default:
			fmt.Fprintf(out, "applied: %d changed, %d already so, %d skipped; journal %s (undo: %s)\n",
				res.Changed, res.Unchanged, res.Skipped, res.Journal.ID, undoCommand(o.stateDir, res.Journal.ID, res.Journal.NetNS))
		}
		for _, d := range res.NotPresent {
			fmt.Fprintf(out, "not present yet: %s (applied when it appears)\n", d)
		}
		printLeftovers(out, res.Leftovers, o.replace, false)
		if v != nil {
			printVerification(out, v, ver.meter.note)
			if v.Reverted {
				fmt.Fprintf(out, "reverted: journal %s (--revert-if %s); the settings are as they were before the change\n", res.Journal.ID, o.verify.revertIf)
			}
		} else if ver != nil && ver.note != "" {
			fmt.Fprintf(out, "verification: %s\n", ver.note)
		}
	}
	if err != nil {
		// 1: something was written and then rolled back; 2: refused
		// before the first write (lock held, unreadable value…).
		if res.Journal == nil {
			return &exitError{code: 2, err: err}
		}
		return &exitError{code: 1, err: err}
	}
	if v != nil {
		return verdictExit(v.Verdict)
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
