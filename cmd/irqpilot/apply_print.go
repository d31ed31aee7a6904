package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/setting"
)

func printEntries(w io.Writer, entries []setting.Change, dry bool) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "STATUS\tTARGET\tSETTING\tFROM\tTO\tNOTE")
	for _, e := range entries {
		st := string(e.Status)
		if dry && e.Status == setting.StatusPending {
			st = "would change"
		}
		note := e.Note
		if note == "" {
			note = e.Reason
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", st, e.Target, e.Name(), orDash(setting.Display(e.Kind, e.Old)), orDash(setting.Display(e.Kind, e.Value)), note)
	}
	tw.Flush()
	printPendingMoves(w, entries)
}

// notePendingMoves notes, on an IRQ affinity already in force, a move an
// earlier write left pending (the host as read before the apply: the
// interrupt lands outside the CPUs in force), as a write's note does.
func notePendingMoves(h *host.Host, entries []setting.Change) {
	for i := range entries {
		e := &entries[i]
		if e.Kind != setting.KindIRQAffinity || e.Status != setting.StatusUnchanged || e.IRQ == nil || e.Note != "" {
			continue
		}
		if q := h.IRQ(*e.IRQ); q != nil && q.MovePending() {
			e.Note = "effective " + q.EffectiveAffinity.String() + ": " + host.MovePendingNote
		}
	}
}

// printPendingMoves says what a "done" IRQ affinity whose interrupt still
// lands on its old CPU means: written and in force, moved by the kernel
// when the IRQ next fires.
func printPendingMoves(w io.Writer, entries []setting.Change) {
	var targets []string
	var irqs []int
	for i := range entries {
		if e := &entries[i]; setting.MovePending(e) {
			targets = append(targets, e.Target)
			if e.IRQ != nil {
				irqs = append(irqs, *e.IRQ)
			}
		}
	}
	switch {
	case len(targets) == 0:
		return
	case len(targets) == 1:
		fmt.Fprintf(w, "%s: %s; the kernel moves it when it next fires (inventory shows where it lands)\n", targets[0], host.MovePendingNote)
	default:
		// A cpulist is also the shortest way to list IRQ numbers.
		fmt.Fprintf(w, "irqs %s: %d moves pending until their next interrupt; the kernel moves each when it next fires (inventory shows where they land)\n",
			cpuset.Of(irqs...), len(targets))
	}
}

// printLeftovers lists what earlier applied journals still hold that the
// plan does not mention: without --replace, what --replace would restore;
// with it, what it could not.
func printLeftovers(w io.Writer, left []setting.Change, replace, dry bool) {
	if len(left) == 0 {
		return
	}
	switch {
	case replace && dry:
		fmt.Fprintf(w, "\n--replace would restore %d setting(s) earlier journals hold that this plan does not mention:\n", len(left))
	case replace:
		fmt.Fprintf(w, "\n%d setting(s) from earlier journals that --replace could not restore:\n", len(left))
	default:
		fmt.Fprintf(w, "\nstill in force from earlier journals, not in this plan (apply --replace restores them; or revert those journals):\n")
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TARGET\tSETTING\tNOW\tBEFORE\tNOTE")
	for _, e := range left {
		note := e.Note
		if note == "" {
			note = e.Reason
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", e.Target, e.Name(), orDash(setting.Display(e.Kind, e.Old)), orDash(setting.Display(e.Kind, e.Value)), note)
	}
	tw.Flush()
}

func orDash(s string) string {
	if strings.TrimSpace(s) == "" {
		return "-"
	}
	return s
}

// renderDryRun prints what apply --dry-run would change.
func (o *applyOptions) renderDryRun(out io.Writer, r *applyResult) error {
	res := r.res
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

// render prints what apply changed, its error and its verification; the
// error is that of writing the JSON.
func (o *applyOptions) render(out io.Writer, r *applyResult) error {
	res, v, ver := r.res, r.v, r.ver
	if o.g.json {
		j := applyJSON{Verification: v, Entries: nonNil(res.Entries), Changed: res.Changed, Unchanged: res.Unchanged, Skipped: res.Skipped,
			Error: errString(r.err), NotPresent: res.NotPresent, Leftovers: nonNil(res.Leftovers)}
		if res.Journal != nil {
			j.Journal = res.Journal.ID
		}
		return writeJSON(out, j)
	}
	if len(res.Entries) > 0 {
		printEntries(out, res.Entries, false)
	}
	switch {
	case r.err != nil:
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
	return nil
}
