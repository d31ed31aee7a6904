package apply

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/irqpilot/irqpilot/internal/setting"
)

// revertable reports whether a journal may still hold changes in force.
func revertable(j *Journal) bool {
	switch j.State {
	case StateApplied, StateApplying, StateRollbackIncomplete:
		return true
	}
	return false
}

// RefusedError is a revert refused before anything was written.
type RefusedError struct{ Err error }

func (e *RefusedError) Error() string { return e.Err.Error() }
func (e *RefusedError) Unwrap() error { return e.Err }

func refused(err error) error {
	if err == nil {
		return nil
	}
	return &RefusedError{Err: err}
}

// ErrNothingToRevert: every journal that could be read is reverted or
// rolled back (and none failed to read).
var ErrNothingToRevert = errors.New("nothing to revert")

// Revert restores exactly what journal id recorded (the newest applied
// journal when id is ""), newest change first, and marks it reverted. An
// older journal whose settings a newer, still applied journal changed again
// is refused unless force: restoring it would silently undo the newer one.
//
// Without an id, a journal file that cannot be read is never skipped
// silently: if it is newer than the newest readable applied journal, revert
// refuses (it may be the one in force); if older, revert goes ahead and
// returns the journal with a *HistoryError naming the file.
func (a *Applier) Revert(id string, force bool) (*Journal, error) {
	unlock, err := a.lock()
	if err != nil {
		return nil, refused(err)
	}
	defer unlock()
	j, warn, err := a.pick(id, force)
	if err != nil {
		return j, refused(err)
	}
	if otherBoot(j, a.Env.FS.BootID()) {
		// Forced across a reboot: thread ids are another boot's.
		for i := range j.Entries {
			if e := &j.Entries[i]; e.Kind == setting.KindThreadAffinity && (e.Status == setting.StatusDone || e.Status == setting.StatusPending) {
				e.Status, e.Note = setting.StatusGone, "journaled in an earlier boot: thread ids are not the same threads; left alone"
			}
		}
	}
	err = a.rollback(j, j.State == StateApplying)
	if err == nil {
		j.State = StateReverted
	}
	if serr := j.save(); serr != nil {
		err = errors.Join(err, fmt.Errorf("the settings were restored but journal %s could not record it: %w", j.path, serr))
	}
	if err == nil && warn != nil {
		return j, warn
	}
	return j, err
}

// pick finds and checks the journal to revert.
func (a *Applier) pick(id string, force bool) (j *Journal, warn, err error) {
	if id == "" {
		all, err := History(a.StateDir)
		var herr *HistoryError
		if err != nil && !errors.As(err, &herr) {
			return nil, nil, err
		}
		boot := a.Env.FS.BootID()
		var earlier *Journal
		for i := len(all) - 1; i >= 0; i-- {
			if !revertable(all[i]) {
				continue
			}
			if otherBoot(all[i], boot) {
				if earlier == nil {
					earlier = all[i]
				}
				continue
			}
			j = all[i]
			break
		}
		if j == nil && earlier != nil && herr == nil {
			return nil, nil, fmt.Errorf("%w in this boot: journal %s was applied in an earlier boot, where IRQ numbers and thread ids meant other things; check it with 'irqpilot history' and use --to %s --force to restore its IRQ and queue values anyway (threads are never re-pinned)", ErrNothingToRevert, earlier.ID, earlier.ID)
		}
		if herr != nil {
			if j == nil {
				return nil, nil, fmt.Errorf("no readable applied journal, and %w; fix or move the file(s) away, then run revert again (or revert --to ID)", herr)
			}
			for _, f := range herr.Files {
				if idLess(j.ID, idOf(f.File)) {
					return nil, nil, fmt.Errorf("newest readable applied journal is %s, but a newer journal file cannot be read (%s); it may hold the changes in force, so nothing was reverted — fix or move it away, or revert --to %s explicitly", j.ID, f.Err, j.ID)
				}
			}
			warn = herr
		}
		if j == nil {
			return nil, nil, fmt.Errorf("%w: no applied journal in %s", ErrNothingToRevert, journalDir(a.StateDir))
		}
	} else if j, err = LoadJournal(a.StateDir, id); err != nil {
		return nil, nil, err
	}
	if j.State == StateReverted || j.State == StateRolledBack {
		return j, nil, fmt.Errorf("journal %s is already %s", j.ID, j.State)
	}
	if err := a.checkNetNS(j, force); err != nil {
		return nil, nil, err
	}
	if otherBoot(j, a.Env.FS.BootID()) && !force {
		return nil, nil, fmt.Errorf("journal %s was applied in an earlier boot, where IRQ numbers and thread ids meant other things; use --force to restore its IRQ and queue values anyway (threads are never re-pinned)", j.ID)
	}
	if !force {
		if newer, err := a.newerTouching(j); err != nil {
			return nil, nil, err
		} else if newer != "" {
			return nil, nil, fmt.Errorf("journal %s is older than %s, which changed some of the same settings and is still applied; revert that one first (or use --force to restore %s's old values anyway)", j.ID, newer, j.ID)
		}
	}
	return j, warn, nil
}

func idOf(file string) string {
	base := file
	for i := len(base) - 1; i >= 0; i-- {
		if base[i] == '/' {
			base = base[i+1:]
			break
		}
	}
	if len(base) > 5 && base[len(base)-5:] == ".json" {
		base = base[:len(base)-5]
	}
	return base
}

// newerTouching returns the ID of a journal newer than j, still applied (or
// interrupted), that wrote one of the same targets; "" if none.
func (a *Applier) newerTouching(j *Journal) (string, error) {
	all, err := History(a.StateDir)
	var herr *HistoryError
	if err != nil && !errors.As(err, &herr) {
		return "", err
	}
	if herr != nil {
		// A newer journal that cannot be read may have changed the same
		// settings: refuse rather than silently undo it (--force overrides).
		for _, f := range herr.Files {
			if idLess(j.ID, idOf(f.File)) {
				return "", fmt.Errorf("journal file %s is newer than %s and cannot be read (%s), so it may have changed the same settings; fix or move it away, or use --force", f.File, j.ID, f.Err)
			}
		}
	}
	mine := map[string]bool{}
	for i, e := range j.Entries {
		if e.Status == setting.StatusDone || e.Status == setting.StatusPending {
			mine[setting.Key(&j.Entries[i])] = true
		}
	}
	for _, o := range all {
		if o.ID == j.ID || !revertable(o) {
			continue
		}
		if !(o.Time.After(j.Time) || (o.Time.Equal(j.Time) && idLess(j.ID, o.ID))) {
			continue
		}
		for i, e := range o.Entries {
			if (e.Status == setting.StatusDone || e.Status == setting.StatusPending) && mine[setting.Key(&o.Entries[i])] {
				return o.ID, nil
			}
		}
	}
	return "", nil
}

// idLess orders journal IDs by time, then by their numeric suffix
// ("…Z-9" before "…Z-10").
func idLess(a, b string) bool {
	ab, as, _ := strings.Cut(a, "-")
	bb, bs, _ := strings.Cut(b, "-")
	if ab != bb {
		return ab < bb
	}
	an, _ := strconv.Atoi(as)
	bn, _ := strconv.Atoi(bs)
	return an < bn
}

// otherBoot reports whether j was written in a boot other than boot (both
// known).
func otherBoot(j *Journal, boot string) bool {
	return j.BootID != "" && boot != "" && j.BootID != boot
}

// Selection says which journals RevertMany undoes together.
type Selection struct {
	// All: every journal still applied (or interrupted).
	All bool
	// Session: every such journal of one session (Journal.Session); "" is
	// the session of the newest one. A journal written before sessions
	// were recorded is a session of its own.
	Session string
}

// RevertMany undoes several journals in one step (revert --all,
// revert --session) and returns them, newest first. Each setting is
// restored once, to the value it had before the oldest of those journals
// changed it: a setting that a later journal of the set wrote again (an
// agent repairing drift) is not first put back to the drifted value the
// later journal found. Settings whose device, queue, IRQ or thread is gone
// are marked gone; a journal whose every entry is restored or gone is
// marked reverted. Refusals are those of Revert, for each journal of the
// set: an unreadable journal file newer than the oldest of the set, a
// newer applied journal outside the set that changed the same settings,
// an earlier boot or another namespace (unless force).
func (a *Applier) RevertMany(sel Selection, force bool) ([]*Journal, error) {
	unlock, err := a.lock()
	if err != nil {
		return nil, refused(err)
	}
	defer unlock()
	set, err := a.pickMany(sel, force)
	if err != nil {
		return nil, refused(err)
	}

	// Which entries write: of each setting, the oldest journal's entry.
	type ref struct{ j, i int }
	owner := map[string]ref{}
	writes := make([]map[int]bool, len(set))
	for ji, j := range set { // oldest first
		writes[ji] = map[int]bool{}
		crashed := j.State == StateApplying
		inFlight := false
		for i := range j.Entries {
			e := &j.Entries[i]
			switch {
			case e.Status == setting.StatusDone:
			case e.Status == setting.StatusPending && crashed && !inFlight:
				// Only the first pending entry of an interrupted apply
				// may have been written (see rollback).
				inFlight = true
			case e.Status == setting.StatusPending:
				e.Status = setting.StatusNotAttempted
				continue
			default:
				continue
			}
			writes[ji][i] = true
			k := setting.Key(e)
			if _, ok := owner[k]; !ok {
				owner[k] = ref{ji, i}
			}
		}
	}
	boot := a.Env.FS.BootID()
	for ji, j := range set {
		if !otherBoot(j, boot) {
			continue
		}
		// Forced across a reboot: thread ids are another boot's.
		for i := range j.Entries {
			if e := &j.Entries[i]; e.Kind == setting.KindThreadAffinity && writes[ji][i] {
				e.Status, e.Note = setting.StatusGone, "journaled in an earlier boot: thread ids are not the same threads; left alone"
			}
		}
	}

	// Newest journal first, newest entry first, as one revert each would.
	failed := map[string]error{}
	var errs []error
	for ji := len(set) - 1; ji >= 0; ji-- {
		j := set[ji]
		for i := len(j.Entries) - 1; i >= 0; i-- {
			e := &j.Entries[i]
			if !writes[ji][i] || e.Status == setting.StatusGone {
				continue
			}
			if o := owner[setting.Key(e)]; o != (ref{ji, i}) {
				continue // restored with the older journal's value below
			}
			if err := a.restore(e); err != nil {
				failed[setting.Key(e)] = err
				errs = append(errs, fmt.Errorf("journal %s: %w", j.ID, err))
			}
		}
	}
	// The later writes of a setting share the outcome of its oldest.
	for ji, j := range set {
		for i := range j.Entries {
			e := &j.Entries[i]
			if !writes[ji][i] || e.Status == setting.StatusGone {
				continue
			}
			k := setting.Key(e)
			o := owner[k]
			if o == (ref{ji, i}) {
				continue
			}
			if _, bad := failed[k]; bad {
				continue
			}
			first := &set[o.j].Entries[o.i]
			e.Status, e.RestoredBy = first.Status, set[o.j].ID
			if first.Status == setting.StatusRestored {
				e.Note = fmt.Sprintf("restored to %q, the value from before journal %s", first.Old, set[o.j].ID)
			} else {
				e.Note = first.Note
			}
		}
	}
	for _, j := range set {
		done := true
		for i := range j.Entries {
			if s := j.Entries[i].Status; s == setting.StatusDone || s == setting.StatusPending {
				done = false
			}
		}
		if done {
			j.State = StateReverted
		}
		if serr := j.save(); serr != nil {
			errs = append(errs, fmt.Errorf("the settings were restored but journal %s could not record it: %w", j.path, serr))
		}
	}
	slices.Reverse(set)
	return set, errors.Join(errs...)
}

// pickMany finds the journals of sel, oldest first, and checks them as
// pick checks one.
func (a *Applier) pickMany(sel Selection, force bool) ([]*Journal, error) {
	all, err := History(a.StateDir)
	var herr *HistoryError
	if err != nil && !errors.As(err, &herr) {
		return nil, err
	}
	var open []*Journal
	for _, j := range all {
		if revertable(j) {
			open = append(open, j)
		}
	}
	var set []*Journal
	switch {
	case sel.All:
		set = open
	default:
		session := sel.Session
		if session == "" {
			boot := a.Env.FS.BootID()
			for i := len(open) - 1; i >= 0; i-- {
				if !otherBoot(open[i], boot) {
					if session = open[i].Session; session == "" {
						set = []*Journal{open[i]}
					}
					break
				}
			}
			if session == "" && set == nil {
				if herr != nil {
					return nil, fmt.Errorf("no readable applied journal in this boot, and %w; fix or move the file(s) away, then run revert again", herr)
				}
				return nil, fmt.Errorf("%w: no applied journal of this boot in %s", ErrNothingToRevert, journalDir(a.StateDir))
			}
		}
		if session != "" {
			for _, j := range open {
				if j.Session == session {
					set = append(set, j)
				}
			}
			if len(set) == 0 {
				return nil, fmt.Errorf("%w: no applied journal of session %q in %s (see 'irqpilot history --json')", ErrNothingToRevert, session, journalDir(a.StateDir))
			}
		}
	}
	if len(set) == 0 {
		if herr != nil {
			return nil, fmt.Errorf("no readable applied journal, and %w; fix or move the file(s) away, then run revert again", herr)
		}
		return nil, fmt.Errorf("%w: no applied journal in %s", ErrNothingToRevert, journalDir(a.StateDir))
	}
	oldest := set[0]
	if herr != nil && !force {
		for _, f := range herr.Files {
			if idLess(oldest.ID, idOf(f.File)) {
				return nil, fmt.Errorf("journal file %s cannot be read (%s) and is newer than %s, so it may hold settings in force; nothing was reverted — fix or move it away, or use --force", f.File, f.Err, oldest.ID)
			}
		}
	}
	in := map[string]bool{}
	for _, j := range set {
		in[j.ID] = true
	}
	boot := a.Env.FS.BootID()
	for _, j := range set {
		if err := a.checkNetNS(j, force); err != nil {
			// The hint repeats this revert there: reverting one journal
			// of the set alone is refused while newer ones stay applied.
			var werr *WrongNetNSError
			if errors.As(err, &werr) {
				switch {
				case sel.All:
					werr.Args = []string{"--all"}
				case j.Session != "":
					werr.Args = []string{"--session=" + j.Session}
				}
			}
			return nil, err
		}
		if otherBoot(j, boot) && !force {
			return nil, fmt.Errorf("journal %s was applied in an earlier boot, where IRQ numbers and thread ids meant other things; use --force to restore its IRQ and queue values anyway (threads are never re-pinned)", j.ID)
		}
		if force {
			continue
		}
		// A newer applied journal outside the set that changed the same
		// settings would be silently undone.
		mine := map[string]bool{}
		for i, e := range j.Entries {
			if e.Status == setting.StatusDone || e.Status == setting.StatusPending {
				mine[setting.Key(&j.Entries[i])] = true
			}
		}
		for _, o := range open {
			if in[o.ID] || !(o.Time.After(j.Time) || (o.Time.Equal(j.Time) && idLess(j.ID, o.ID))) {
				continue
			}
			for i, e := range o.Entries {
				if (e.Status == setting.StatusDone || e.Status == setting.StatusPending) && mine[setting.Key(&o.Entries[i])] {
					return nil, fmt.Errorf("journal %s is older than %s, which is not part of this revert, changed some of the same settings and is still applied; revert that one first (or use --force)", j.ID, o.ID)
				}
			}
		}
	}
	return set, nil
}
