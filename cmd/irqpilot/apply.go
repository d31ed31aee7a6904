package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/irqpilot/irqpilot/internal/apply"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/plan"
)

var applyFlags struct {
	dryRun   bool
	stateDir string
	boot     bool
}

var applyCmd = &cobra.Command{
	Use:   "apply PLAN",
	Short: "Apply a plan file transactionally, with a journal for revert",
	Long: `apply reads the plan, resolves it against this machine, and writes only what
differs. Every old value is journaled in --state-dir before the first write,
each write is read back, and any unexpected failure restores everything already
written. Kernel-managed IRQs and settings the device does not support are
reported as skipped. Re-applying the same plan changes nothing.

Exit status: 0 applied (or nothing to do), 1 failed and rolled back, 2 error
before anything was written.`,
	Args: cobra.ExactArgs(1),
	RunE: func(cmd *cobra.Command, args []string) error {
		if global.snapshot != "" {
			return fmt.Errorf("apply writes kernel settings; it cannot run on a --snapshot")
		}
		fs := kernel.New(global.root)
		if fs.IsLive() && os.Geteuid() != 0 && !applyFlags.dryRun {
			return fmt.Errorf("apply must run as root to write /proc/irq and /sys/class/net (nothing was changed); use --dry-run to see what would change")
		}
		data, err := os.ReadFile(args[0])
		if err != nil {
			return err
		}
		p, err := plan.Load(args[0], data)
		if err != nil {
			return err
		}
		// A real apply writes anyway: it may probe for managed IRQs. A dry
		// run writes nothing.
		h, err := readHostWith(fs, !applyFlags.dryRun, applyFlags.stateDir)
		if err != nil {
			return err
		}
		var notPresent []string
		if applyFlags.boot {
			notPresent = dropMissingDevices(p, h)
		}
		if m := plan.HostMismatch(p, h); m != "" {
			fmt.Fprintln(cmd.ErrOrStderr(), "note:", m)
		}
		changes, skipped, err := apply.Resolved(fs, h, p)
		if err != nil {
			return err
		}
		a := &apply.Applier{FS: fs, StateDir: applyFlags.stateDir}
		sum := sha256.Sum256(data)
		out := cmd.OutOrStdout()
		if applyFlags.dryRun {
			entries, err := a.Plan(changes)
			if err != nil {
				return err
			}
			entries = append(entries, skipped...)
			if global.json {
				return writeJSON(out, map[string]any{"dry_run": true, "entries": entries, "not_present": notPresent})
			}
			printEntries(out, entries, true)
			for _, d := range notPresent {
				fmt.Fprintf(out, "not present yet: %s\n", d)
			}
			return nil
		}
		res, err := a.Apply(changes, apply.Meta{Host: h.Hostname, PlanFile: args[0], PlanHash: hex.EncodeToString(sum[:])})
		if res != nil {
			res.Entries = append(res.Entries, skipped...)
			res.Skipped += len(skipped)
			if global.json {
				var id string
				if res.Journal != nil {
					id = res.Journal.ID
				}
				werr := writeJSON(out, map[string]any{"journal": id, "entries": res.Entries, "changed": res.Changed, "unchanged": res.Unchanged, "skipped": res.Skipped, "error": errString(err), "not_present": notPresent})
				if err == nil {
					err = werr
				}
			} else {
				printEntries(out, res.Entries, false)
				switch {
				case err != nil:
				case res.Journal == nil:
					fmt.Fprintf(out, "nothing to change: the plan is already in force (%d settings checked, %d skipped)\n", res.Unchanged, res.Skipped)
				default:
					fmt.Fprintf(out, "applied: %d changed, %d already so, %d skipped; journal %s (undo: irqpilot revert --to %s)\n", res.Changed, res.Unchanged, res.Skipped, res.Journal.ID, res.Journal.ID)
				}
				for _, d := range notPresent {
					fmt.Fprintf(out, "not present yet: %s (applied when it appears)\n", d)
				}
			}
		}
		if err != nil {
			// 1: something was written and then rolled back; 2: refused
			// before the first write (lock held, unreadable value…).
			if res == nil || res.Journal == nil {
				return &exitError{code: 2, err: err}
			}
			return &exitError{code: 1, err: err}
		}
		return nil
	},
}

// dropMissingDevices removes plan entries for network devices that do not
// exist yet (at boot, before a NIC or VLAN is created) and returns their
// names; the udev rule re-applies the plan when they appear.
func dropMissingDevices(p *plan.Plan, h *host.Host) []string {
	missing := map[string]bool{}
	present := func(dev string) bool {
		if dev == "" || h.NIC(dev) != nil {
			return true
		}
		for _, q := range h.IRQs {
			if q.Device == dev {
				return true
			}
		}
		missing[dev] = true
		return false
	}
	p.IRQs = slices.DeleteFunc(p.IRQs, func(e plan.IRQEntry) bool { return !present(e.Device) })
	p.RxQueues = slices.DeleteFunc(p.RxQueues, func(e plan.RxQueueEntry) bool { return !present(e.Device) })
	p.TxQueues = slices.DeleteFunc(p.TxQueues, func(e plan.TxQueueEntry) bool { return !present(e.Device) })
	p.Coalesce = slices.DeleteFunc(p.Coalesce, func(e plan.CoalesceEntry) bool { return !present(e.Device) })
	return slices.Sorted(maps.Keys(missing))
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func printEntries(w io.Writer, entries []apply.Entry, dry bool) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "STATUS\tTARGET\tFROM\tTO\tNOTE")
	for _, e := range entries {
		st := e.Status
		if dry && st == apply.StatusPending {
			st = "would change"
		}
		note := e.Note
		if note == "" {
			note = e.Reason
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", st, e.Target, orDash(e.Old), orDash(e.Value), note)
	}
	tw.Flush()
}

func orDash(s string) string {
	if strings.TrimSpace(s) == "" {
		return "-"
	}
	return s
}

var (
	revertTo    string
	revertForce bool
)

var revertCmd = &cobra.Command{
	Use:   "revert [--to ID]",
	Short: "Restore exactly what an apply's journal recorded (the newest by default)",
	Args:  cobra.NoArgs,
	RunE: func(cmd *cobra.Command, args []string) error {
		if global.snapshot != "" {
			return fmt.Errorf("revert writes kernel settings; it cannot run on a --snapshot")
		}
		fs := kernel.New(global.root)
		if fs.IsLive() && os.Geteuid() != 0 {
			return fmt.Errorf("revert must run as root (nothing was changed)")
		}
		a := &apply.Applier{FS: fs, StateDir: applyFlags.stateDir}
		if revertTo == "" {
			if js, _ := apply.History(applyFlags.stateDir); !anyRevertable(js) {
				fmt.Fprintf(cmd.OutOrStdout(), "nothing to revert: no applied journal in %s\n", applyFlags.stateDir)
				return nil
			}
		}
		j, err := a.Revert(revertTo, revertForce)
		if j != nil {
			if global.json {
				if werr := writeJSON(cmd.OutOrStdout(), j); werr != nil && err == nil {
					err = werr
				}
			} else if err == nil {
				restored := 0
				for _, e := range j.Entries {
					if e.Status == apply.StatusRestored {
						restored++
					}
				}
				fmt.Fprintf(cmd.OutOrStdout(), "reverted journal %s: %d settings restored\n", j.ID, restored)
			}
		}
		if err != nil {
			return &exitError{code: 1, err: err}
		}
		return nil
	},
}

var historyCmd = &cobra.Command{
	Use:   "history",
	Short: "List applied plans from the journal",
	Args:  cobra.NoArgs,
	RunE: func(cmd *cobra.Command, args []string) error {
		js, err := apply.History(applyFlags.stateDir)
		if err != nil {
			return err
		}
		out := cmd.OutOrStdout()
		if global.json {
			if js == nil {
				js = []*apply.Journal{}
			}
			return writeJSON(out, map[string]any{"journals": js})
		}
		if len(js) == 0 {
			fmt.Fprintf(out, "no journals in %s\n", applyFlags.stateDir)
			return nil
		}
		tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tTIME\tSTATE\tCHANGES\tPLAN")
		for _, j := range js {
			n := 0
			for _, e := range j.Entries {
				if e.Status == apply.StatusDone || e.Status == apply.StatusRestored || e.Status == apply.StatusPending {
					n++
				}
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", j.ID, j.Time.Local().Format("2006-01-02 15:04:05"), j.State, n, j.PlanFile)
		}
		return tw.Flush()
	},
}

var persistFlags struct {
	remove bool
	root   string
}

var persistCmd = &cobra.Command{
	Use:   "persist PLAN | --remove",
	Short: "Re-apply a plan at boot and when NICs appear (systemd unit + udev rule)",
	RunE: func(cmd *cobra.Command, args []string) error {
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		p := &apply.Persistence{Root: persistFlags.root, Binary: exe, StateDir: applyFlags.stateDir}
		out := cmd.OutOrStdout()
		if persistFlags.remove {
			if len(args) != 0 {
				return fmt.Errorf("--remove takes no plan")
			}
			removed, err := p.Remove()
			for _, r := range removed {
				fmt.Fprintln(out, "removed", r)
			}
			return err
		}
		if len(args) != 1 {
			return fmt.Errorf("persist needs a plan file (or --remove)")
		}
		data, err := os.ReadFile(args[0])
		if err != nil {
			return err
		}
		if _, err := plan.Load(args[0], data); err != nil {
			return err
		}
		written, err := p.Install(data)
		for _, w := range written {
			fmt.Fprintln(out, "wrote", w)
		}
		if err == nil && persistFlags.root == "" {
			fmt.Fprintln(out, "run 'systemctl daemon-reload && udevadm control --reload' to activate now; the plan is applied at every boot")
		}
		return err
	},
}

func init() {
	for _, c := range []*cobra.Command{applyCmd, revertCmd, historyCmd, persistCmd} {
		c.Flags().StringVar(&applyFlags.stateDir, "state-dir", apply.DefaultStateDir, "directory for journals and the lock")
		rootCmd.AddCommand(c)
	}
	applyCmd.Flags().BoolVar(&applyFlags.dryRun, "dry-run", false, "show what would change and write no setting (as root, kernel-managed IRQs are still found by writing each IRQ's own affinity back)")
	applyCmd.Flags().BoolVar(&applyFlags.boot, "boot", false, "skip entries for devices not present yet (used by the boot unit)")
	revertCmd.Flags().StringVar(&revertTo, "to", "", "journal `ID` to revert (see 'irqpilot history'); default the newest applied")
	revertCmd.Flags().BoolVar(&revertForce, "force", false, "revert an older journal even though a newer applied one changed some of the same settings")
	persistCmd.Flags().BoolVar(&persistFlags.remove, "remove", false, "remove the installed unit, rule and plan")
	persistCmd.Flags().StringVar(&persistFlags.root, "install-root", "", "install below `DIR` instead of / (for packaging and tests)")
}

func anyRevertable(js []*apply.Journal) bool {
	for _, j := range js {
		switch j.State {
		case apply.StateApplied, apply.StateApplying, apply.StateRollbackIncomplete:
			return true
		}
	}
	return false
}
