package apply

import (
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/plan"
	"github.com/irqpilot/irqpilot/internal/setting"
)

// ConvergeOptions say how to converge.
type ConvergeOptions struct {
	// DryRun reads every current value and reports what would change,
	// writing nothing.
	DryRun bool
	// Boot drops the plan's entries for network devices not present yet
	// (the boot unit; the udev rule applies them when they appear).
	Boot bool
	// Replace makes the plan the whole desired state of what irqpilot
	// holds: settings earlier applied journals still hold and the plan does
	// not mention are restored in the same journal (Outcome.Leftovers lists
	// them either way).
	Replace bool
	// ProbeManaged, once the plan passed validation, finds which of the
	// IRQs the plan will change are kernel-managed by writing each one's
	// current affinity back (host.ProbeManaged); no other IRQ is touched,
	// and nothing is written for a plan that fails validation. Live
	// machine, root, not with DryRun.
	ProbeManaged bool
	// Captured: the FS is a capture of another moment or machine (a dry
	// run against a snapshot). The journals in the state directory are this
	// machine's, not the capture's, so no leftovers are looked for.
	Captured bool
	Meta     Meta
}

// Outcome is what a converge found and did.
type Outcome struct {
	Result
	DryRun bool
	// NotPresent are the devices Boot left out.
	NotPresent []string
	// HostMismatch says why the plan may have been made for another host.
	HostMismatch string
	// Leftovers are settings earlier applied journals still hold that the
	// plan does not mention: without Replace, to show (status pending:
	// --replace would restore it); with Replace, the ones it could not
	// restore (status skipped, Note says how).
	Leftovers []setting.Change
}

// Converge is the pipeline from a plan to the machine (apply, apply --dry-run,
// apply --boot; the agent runs its parts itself — Changes once per host read,
// DiffWith and Apply every pass): with the host read once, resolve the
// plan against it, expand plan-level settings into concrete changes (threads
// of selected processes, irqbalance's file), read what is in force, and —
// unless a dry run — apply the difference with the journal, reading every
// write back. bench and tune build their changes with the same resolver and
// setting constructors (restricted to the devices under test) and apply them
// with the same Applier.Apply.
//
// The error is nil, or says what failed; Outcome.Journal tells whether
// anything was written (nil: nothing was, so the failure came before the
// first write).
func (a *Applier) Converge(h *host.Host, p *plan.Plan, o ConvergeOptions) (*Outcome, error) {
	out := &Outcome{DryRun: o.DryRun}
	if o.Boot {
		cp := *p
		out.NotPresent = plan.DropMissingDevices(&cp, h)
		p = &cp
	}
	out.HostMismatch = plan.HostMismatch(p, h)
	changes, skipped, err := Changes(a.Env, h, p)
	if err != nil {
		return out, err
	}
	if o.ProbeManaged && !o.DryRun {
		if irqs := irqsToChange(changes, h); len(irqs) > 0 {
			host.ProbeManaged(a.Env.FS, h, irqs)
			if changes, skipped, err = Changes(a.Env, h, p); err != nil {
				return out, err
			}
		}
	}
	if (o.DryRun || !o.Replace) && !o.Captured {
		if left, lerr := a.Leftovers(changes); lerr == nil || len(left) > 0 {
			out.Leftovers = left
		}
	}
	if o.DryRun {
		entries, err := a.Diff(changes)
		if err != nil {
			return out, err
		}
		out.Entries = append(entries, skipped...)
		out.count()
		return out, nil
	}
	var res *Result
	if o.Replace {
		res, out.Leftovers, err = a.ApplyReplacing(changes, o.Meta)
	} else {
		res, err = a.Apply(changes, o.Meta)
	}
	if res != nil {
		_ = a.RecordManaged(h, res.Entries)
		out.Result = *res
		out.Entries = append(out.Entries, skipped...)
		out.Skipped += len(skipped)
	}
	return out, err
}

// irqsToChange lists the IRQs whose affinity changes will write: not
// skipped, not known either way, and not already at the value asked for.
func irqsToChange(changes []setting.Change, h *host.Host) []int {
	unknown := map[int]bool{}
	for i := range h.IRQs {
		if h.IRQs[i].Managed == host.ManagedUnknown {
			unknown[h.IRQs[i].Number] = true
		}
	}
	var out []int
	for i := range changes {
		c := &changes[i]
		if c.Kind != setting.KindIRQAffinity || c.IRQ == nil || c.Status == setting.StatusSkipped || !unknown[*c.IRQ] {
			continue
		}
		if hd, err := setting.Lookup(c.Kind); err == nil && c.Old != "" {
			if same, err := hd.Same(c.Old, hd.Expected(c)); err == nil && same {
				continue
			}
		}
		out = append(out, *c.IRQ)
	}
	return out
}

// Changes resolves a plan against h and expands it into the concrete
// changes to write, and the settings that will not be written (skipped,
// with the reason).
func Changes(env setting.Env, h *host.Host, p *plan.Plan) (changes, skipped []setting.Change, err error) {
	resolved, err := plan.Resolve(p, h)
	if err != nil {
		return nil, nil, err
	}
	return setting.Expand(env.FS, resolved)
}
