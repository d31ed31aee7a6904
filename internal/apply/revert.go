package apply

import (
	"errors"
	"fmt"
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
	if err := a.checkNetNS(j); err != nil {
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
