package apply

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
)

// PruneJournals bounds the journal directory for long-running users (the
// agent): of the journals that hold nothing in force any more (reverted,
// rolled back, no change), all but the newest keep are removed. Journals
// that may hold changes (applied, applying, rollback incomplete) are never
// removed, nor are files that cannot be read. It returns the IDs removed.
// A caller that prunes again and again uses one Pruner instead.
func PruneJournals(stateDir string, keep int) ([]string, error) {
	var p Pruner
	return p.Prune(stateDir, keep)
}

// Pruner is PruneJournals for a caller that prunes after every apply (the
// agent): it remembers each journal file's state by the file's identity
// (inode, size, modification time — a journal is saved by renaming a new
// file over it, so any save changes the inode), and opens only the files
// that are new or changed since its last pass. The cost of a prune is then
// one directory listing and one lstat per journal, not reading the history.
type Pruner struct {
	known  map[string]prunerFile // journal ID → what its file held
	opened int                   // journal files read (tests)
}

type prunerFile struct {
	ino, size uint64
	mtime     int64
	state     string
}

// Prune is PruneJournals.
func (p *Pruner) Prune(stateDir string, keep int) ([]string, error) {
	dir, ents, err := readJournalDir(stateDir)
	if err != nil || ents == nil {
		return nil, err
	}
	if p.known == nil {
		p.known = map[string]prunerFile{}
	}
	seen := make(map[string]bool, len(ents))
	var done []string
	for _, de := range ents {
		id, ok := strings.CutSuffix(de.Name(), ".json")
		if !ok || !journalID.MatchString(id) {
			continue
		}
		fi, err := de.Info()
		if err != nil {
			continue
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			continue
		}
		f := prunerFile{ino: st.Ino, size: uint64(fi.Size()), mtime: fi.ModTime().UnixNano()}
		if k, ok := p.known[id]; ok && k.ino == f.ino && k.size == f.size && k.mtime == f.mtime {
			f.state = k.state
		} else {
			p.opened++
			j, err := readJournal(filepath.Join(dir, de.Name()))
			if err != nil {
				continue // never removed, read again next time
			}
			f.state = j.State
		}
		p.known[id] = f
		seen[id] = true
		switch f.state {
		case StateReverted, StateRolledBack, StateNoChange:
			done = append(done, id)
		}
	}
	for id := range p.known {
		if !seen[id] {
			delete(p.known, id)
		}
	}
	// IDs are the journal's time (then a sequence number): oldest first.
	sort.Slice(done, func(a, b int) bool { return idLess(done[a], done[b]) })
	var removed []string
	var errs []error
	for i := 0; i < len(done)-keep; i++ {
		if err := os.Remove(filepath.Join(dir, done[i]+".json")); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		delete(p.known, done[i])
		removed = append(removed, done[i])
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
