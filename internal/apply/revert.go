package apply

import (
	"errors"
	"fmt"

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

// AnyRevertable reports whether some journal may still hold changes.
func AnyRevertable(js []*Journal) bool {
	for _, j := range js {
		if revertable(j) {
			return true
		}
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
		for i := len(all) - 1; i >= 0; i-- {
			if revertable(all[i]) {
				j = all[i]
				break
			}
		}
		if herr != nil {
			if j == nil {
				return nil, nil, fmt.Errorf("no readable applied journal, and %w; fix or move the file(s) away, then run revert again (or revert --to ID)", herr)
			}
			for _, f := range herr.Files {
				if idOf(f.File) > j.ID {
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
		if !(o.Time.After(j.Time) || (o.Time.Equal(j.Time) && o.ID > j.ID)) {
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
