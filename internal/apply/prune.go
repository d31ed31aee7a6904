package apply

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// PruneJournals bounds the journal directory for long-running users (the
// agent): of the journals that hold nothing in force any more (reverted,
// rolled back, no change), all but the newest keep are removed. Journals
// that may hold changes (applied, applying, rollback incomplete) are never
// removed, nor are files that cannot be read. It returns the IDs removed.
func PruneJournals(stateDir string, keep int) ([]string, error) {
	all, err := History(stateDir)
	var herr *HistoryError
	if err != nil && !errors.As(err, &herr) {
		return nil, err
	}
	var done []*Journal
	for _, j := range all {
		switch j.State {
		case StateReverted, StateRolledBack, StateNoChange:
			done = append(done, j)
		}
	}
	var removed []string
	var errs []error
	for i := 0; i < len(done)-keep; i++ { // oldest first
		if err := os.Remove(filepath.Join(journalDir(stateDir), done[i].ID+".json")); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, done[i].ID)
	}
	return removed, errors.Join(errs...)
}

// RemoveJournal removes one applied journal whose every change a caller
// knows an older journal, kept, also made (the agent's superseded drift
// repairs): reverting every journal newest first then ends where it ended
// with it. It refuses any other state and an ID that is not a journal's.
func RemoveJournal(stateDir, id string) error {
	if !journalID.MatchString(id) {
		return fmt.Errorf("%q is not a journal ID", id)
	}
	// Under the state directory's lock, so no apply or revert reads the
	// journal list while it changes.
	lk, err := AcquireLock(stateDir)
	if err != nil {
		return err
	}
	defer lk.Release()
	j, err := LoadJournal(stateDir, id)
	if err != nil {
		return err
	}
	if j.State != StateApplied {
		return fmt.Errorf("journal %s is %s, not applied: not removed (PruneJournals bounds finished journals)", id, j.State)
	}
	return os.Remove(filepath.Join(journalDir(stateDir), id+".json"))
}
