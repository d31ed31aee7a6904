package apply

import (
	"errors"
	"fmt"

	"github.com/irqpilot/irqpilot/internal/setting"
)

// A plan is the desired state of what it names. Settings that an earlier,
// still applied journal changed and that the plan being applied does not
// mention are its leftovers: apply lists them, and apply --replace restores
// them to what they were before irqpilot changed them, in the same journal
// and under the same lock as the plan's own writes (so a failure rolls back
// both, and reverting the new journal puts the leftovers back too).

// Leftovers returns, for the changes about to be applied, every setting an
// earlier applied journal (of this boot) still holds in force that changes
// does not mention. Each is a change back to the value from before the
// first journal that touched it: Status pending when --replace can restore
// it, skipped (Note says how to undo it instead) when it cannot be replayed
// as a plain write. A setting someone changed again since is not a leftover.
func (a *Applier) Leftovers(changes []setting.Change) ([]setting.Change, error) {
	all, err := History(a.StateDir)
	var herr *HistoryError
	if err != nil && !errors.As(err, &herr) {
		return nil, err
	}
	planned := map[string]bool{}
	for i := range changes {
		planned[setting.Key(&changes[i])] = true
	}
	type held struct {
		first, last setting.Change
		journal     string
	}
	byKey := map[string]*held{}
	var order []string
	boot := a.Env.FS.BootID()
	for _, j := range all { // oldest first
		if !revertable(j) || otherBoot(j, boot) {
			continue
		}
		for i := range j.Entries {
			e := j.Entries[i]
			if e.Status != setting.StatusDone || e.Kind == setting.KindApp {
				continue
			}
			k := setting.Key(&e)
			if h, ok := byKey[k]; ok {
				h.last, h.journal = e, j.ID
				continue
			}
			byKey[k] = &held{first: e, last: e, journal: j.ID}
			order = append(order, k)
		}
	}
	var out []setting.Change
	for _, k := range order {
		h := byKey[k]
		if planned[k] {
			continue
		}
		hd, err := setting.Lookup(h.last.Kind)
		if err != nil {
			continue
		}
		if same, err := hd.Same(h.last.Value, h.first.Old); err == nil && same {
			continue // the newest journal already put the old value back
		}
		cur, err := hd.Read(&a.Env, &h.last)
		if err != nil {
			continue // gone, or not visible from here: nothing to restore
		}
		if same, err := hd.Same(cur, hd.Expected(&h.last)); err != nil || !same {
			continue // changed since by someone else: not ours to restore
		}
		c := h.first
		c.Value, c.Old, c.Note = h.first.Old, cur, ""
		c.Reason = "not in this plan; set by journal " + h.journal
		c.Line = 0
		c.Status = setting.StatusPending
		if _, keeps := hd.(setting.Keeper); keeps {
			c.Status = setting.StatusSkipped
			c.Note = fmt.Sprintf("--replace cannot restore a configuration file in place; 'irqpilot revert --to %s' restores it", h.journal)
		}
		out = append(out, c)
	}
	if herr != nil {
		return out, herr
	}
	return out, nil
}

// ApplyReplacing is Apply for a plan that is the whole desired state of what
// it owns: under the same lock, it finds the leftovers of earlier journals
// (Leftovers) and restores the ones it can in the same journal as changes.
// It returns the leftovers it could not restore.
func (a *Applier) ApplyReplacing(changes []setting.Change, meta Meta) (*Result, []setting.Change, error) {
	var kept []setting.Change
	res, err := a.apply(changes, meta, func(cs []setting.Change) ([]setting.Change, error) {
		left, err := a.Leftovers(cs)
		var herr *HistoryError
		if err != nil && !errors.As(err, &herr) {
			return nil, err
		}
		if herr != nil {
			return nil, fmt.Errorf("--replace: %w; fix or move the file(s) away first (they may hold settings this plan would have to restore)", herr)
		}
		var restore []setting.Change
		for _, c := range left {
			if c.Status == setting.StatusPending {
				restore = append(restore, c)
			} else {
				kept = append(kept, c)
			}
		}
		return restore, nil
	})
	return res, kept, err
}
