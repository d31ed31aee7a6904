package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/irqpilot/irqpilot/internal/apply"
	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/setting"
)

type revertOptions struct {
	g        *globalFlags
	stateDir string
	to       string
	force    bool
	all      bool
	session  string
	// ignoreAgent: revert even though an agent uses the state directory.
	ignoreAgent bool
	fs          *kernel.FS
}

func newRevertCmd(g *globalFlags) *cobra.Command {
	o := &revertOptions{g: g}
	cmd := &cobra.Command{
		Use:   "revert [--to ID | --session[=ID] | --all]",
		Short: "Restore exactly what an apply's journal recorded (the newest by default)",
		Long: `revert restores exactly what an apply's journal recorded: the newest applied
journal, or --to ID. Journals are checked before anything is written: a
journal file that cannot be read, or whose entries name anything but the
settings irqpilot writes, is refused whole and named.

--session undoes every applied journal of one session in one step: all that
one process applied (an agent run, a bench), by default the newest
journal's; --all undoes every applied journal. Each setting is restored once,
to its value from before the oldest of those journals changed it, so values
that drifted during the session are not written on the way back.

A setting whose device, queue, IRQ or thread no longer exists is reported
gone and the journal completes. A journal applied in a network namespace
that no longer exists completes with --force (its device settings are
reported gone, never written).

When an agent runs with the same state directory (its status socket there
answers), revert refuses and writes nothing: the agent would apply its plan
again within one interval. Stop the agent first (systemctl stop
irqpilot-agent; with --revert-on-exit it reverts its own changes), or give
it another plan and reload it; --ignore-agent reverts anyway.

Exit status: 0 reverted (or nothing to revert), 1 a restore failed (the
message names it), 2 refused before anything was written (not root, lock
held, unreadable or refused journal, newer journal in the way).`,
		Args: cobra.NoArgs,
		RunE: runE(o),
	}
	stateDirFlag(cmd, &o.stateDir)
	cmd.Flags().StringVar(&o.to, "to", "", "journal `ID` to revert (see 'irqpilot history'); default the newest applied")
	cmd.Flags().BoolVar(&o.force, "force", false, "revert an older journal even though a newer applied one changed some of the same settings; complete a journal whose network namespace is gone")
	cmd.Flags().BoolVar(&o.ignoreAgent, "ignore-agent", false, "revert even though an agent runs with this state directory (it will apply its plan again)")
	cmd.Flags().BoolVar(&o.all, "all", false, "revert every applied journal, each setting to its value from before the first")
	cmd.Flags().StringVar(&o.session, "session", "", "revert every applied journal of session `ID` (--session alone: the newest journal's session)")
	cmd.Flags().Lookup("session").NoOptDefVal = newestSession
	cmd.MarkFlagsMutuallyExclusive("to", "all", "session")
	return cmd
}

// complete refuses a --state-dir given that does not exist, and takes the
// machine (--root) to restore.
func (o *revertOptions) complete(cmd *cobra.Command, _ []string) error {
	if err := existingStateDir(cmd, o.stateDir); err != nil {
		return err
	}
	o.fs = kernel.New(o.g.root)
	return nil
}

func (o *revertOptions) validate() error {
	if o.g.snapshot != "" {
		return flagErrorf("--snapshot", "revert writes kernel settings; it cannot run on a --snapshot")
	}
	return nil
}

func (o *revertOptions) run(_ context.Context, out, errOut io.Writer) error {
	fs := o.fs
	if fs.IsLive() && os.Geteuid() != 0 {
		return fmt.Errorf("revert must run as root (nothing was changed)")
	}
	if !o.ignoreAgent {
		if err := besideAgent("revert", o.stateDir); err != nil {
			return err
		}
	}
	a := apply.New(fs, o.stateDir)
	if o.all || o.session != "" {
		return o.runMany(a, out)
	}
	j, err := a.Revert(o.to, o.force)
	if errors.Is(err, apply.ErrNothingToRevert) {
		if o.g.json {
			return writeJSON(out, nothingJSON{Nothing: true, Reason: err.Error()})
		}
		fmt.Fprintln(out, err)
		return nil
	}
	var herr *apply.HistoryError
	if errors.As(err, &herr) && j != nil && j.State == apply.StateReverted {
		// Reverted; an older journal file could not be read: say so.
		fmt.Fprintf(errOut, "warning: %v\n", herr)
		err = nil
	}
	if j != nil {
		// Also when err is set: the closing line then says the journal
		// is NOT fully reverted, as revert --all does.
		if werr := o.renderReverted(out, []*apply.Journal{j}, false); werr != nil && err == nil {
			err = werr
		}
	}
	return revertExit(err)
}

// renderReverted prints the journals a revert left: JSON (the journal
// itself unless many), or one table of every write and a closing line per
// journal.
func (o *revertOptions) renderReverted(out io.Writer, js []*apply.Journal, many bool) error {
	if o.g.json {
		if many {
			return writeJSON(out, nonNil(js))
		}
		return writeJSON(out, js[0])
	}
	// One table for the whole revert: every write it made, once.
	var all []setting.Change
	for _, j := range js {
		all = append(all, j.Entries...)
	}
	printRestored(out, all)
	for _, j := range js {
		fmt.Fprintln(out, revertedLine(j))
	}
	return nil
}

// revertExit maps a revert's error to its exit status: 2 when revert
// refused before acting (nothing was written), 1 when it acted and failed.
func revertExit(err error) error {
	if err == nil {
		return nil
	}
	var ref *apply.RefusedError
	if errors.As(err, &ref) {
		return &exitError{code: 2, err: err}
	}
	return &exitError{code: 1, err: err}
}

// newestSession is --session without a value: the newest journal's.
const newestSession = "newest"

// revertedLine is revert's closing line for one journal.
func revertedLine(j *apply.Journal) string {
	restored, gone := 0, 0
	for _, e := range j.Entries {
		switch e.Status {
		case setting.StatusRestored:
			restored++
		case setting.StatusGone:
			gone++
		}
	}
	msg := fmt.Sprintf("reverted journal %s: %d settings restored", j.ID, restored)
	if j.State != apply.StateReverted {
		msg = fmt.Sprintf("journal %s NOT fully reverted (still %s): %d settings restored", j.ID, j.State, restored)
	}
	if gone > 0 {
		msg += fmt.Sprintf(", %d gone (the thread, device, queue or IRQ no longer exists: nothing to restore)", gone)
	}
	return msg
}

// runMany is revert --all and revert --session.
func (o *revertOptions) runMany(a *apply.Applier, out io.Writer) error {
	sel := apply.Selection{All: o.all, Session: o.session}
	if sel.Session == newestSession {
		sel.Session = ""
	}
	js, err := a.RevertMany(sel, o.force)
	if errors.Is(err, apply.ErrNothingToRevert) {
		if o.g.json {
			return writeJSON(out, []*apply.Journal{})
		}
		fmt.Fprintln(out, err)
		return nil
	}
	if werr := o.renderReverted(out, js, true); werr != nil && err == nil {
		err = werr
	}
	return revertExit(err)
}

// nothingJSON is `revert --json` when no applied journal is left.
type nothingJSON struct {
	Nothing bool   `json:"nothing_to_revert"`
	Reason  string `json:"reason"`
}

// printRestored lists the writes the revert made: each restored setting
// once, from the value it found to the value it wrote and read back. A
// later journal's entry for a setting an older journal of the same revert
// restored (RestoredBy) made no write of its own: it is counted, not
// listed as one.
func printRestored(w io.Writer, entries []setting.Change) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "STATUS\tTARGET\tSETTING\tFROM\tRESTORED TO\tNOTE")
	folded := map[string]int{}
	for _, e := range entries {
		if e.RestoredBy != "" {
			folded[e.RestoredBy]++
			continue
		}
		from, to := e.Value, e.Old
		if e.Status != setting.StatusRestored {
			from, to = "", ""
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", e.Status, e.Target, e.Name(), orDash(setting.Display(e.Kind, from)), orDash(setting.Display(e.Kind, to)), e.Note)
	}
	tw.Flush()
	for _, id := range slices.Sorted(maps.Keys(folded)) {
		fmt.Fprintf(w, "%d later write(s) of the same settings: undone by restoring journal %s's value, listed with it\n", folded[id], id)
	}
}
