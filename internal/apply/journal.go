package apply

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultStateDir is where journals and the lock live.
const DefaultStateDir = "/var/lib/irqpilot"

// Journal states.
const (
	StateApplying   = "applying"    // written before the first change; a crash leaves it so
	StateApplied    = "applied"     // every change done (or skipped)
	StateRolledBack = "rolled-back" // a change failed and everything done was undone
	StateReverted   = "reverted"    // `irqpilot revert` restored it
	StateNoChange   = "no-change"   // nothing needed writing
	// StateRollbackIncomplete: a change failed and restoring the others
	// failed too; `revert` retries from the journal.
	StateRollbackIncomplete = "rollback-incomplete"
)

// Entry statuses.
const (
	StatusPending   = "pending"   // old value recorded, write not yet confirmed
	StatusDone      = "done"      // written and read back
	StatusUnchanged = "unchanged" // already had the value
	StatusSkipped   = "skipped"   // kernel refused for a known reason (managed IRQ, unsupported)
	StatusFailed    = "failed"    // unexpected failure: triggers rollback
	StatusRestored  = "restored"  // old value written back
	StatusGone      = "gone"      // thread exited; nothing to restore
	// StatusNotAttempted: after a failure or crash, a change that was never
	// written; nothing to restore.
	StatusNotAttempted = "not-attempted"
)

// Entry is one change with what was there before.
type Entry struct {
	Change
	Old string `json:"old"`
	// OldFile is the whole previous content of a configuration file the
	// change edits (nil: the file did not exist), restored byte for byte.
	OldFile *string `json:"old_file,omitempty"`
	Status  string  `json:"status"`
	Note    string  `json:"note,omitempty"` // why skipped, the error, effective affinity …
}

// Journal is the write-ahead record of one apply.
type Journal struct {
	ID       string    `json:"id"`
	Time     time.Time `json:"time"`
	Host     string    `json:"host,omitempty"`
	PlanFile string    `json:"plan_file,omitempty"`
	PlanHash string    `json:"plan_hash,omitempty"` // sha256 of the plan file's bytes
	State    string    `json:"state"`
	Entries  []Entry   `json:"entries"`
	Error    string    `json:"error,omitempty"`

	path string
}

// save writes the journal atomically and durably: temp file, fsync, rename,
// fsync of the directory. It is called before every kernel write, so a crash
// at any moment leaves a journal that names every value that may have changed.
func (j *Journal) save() error {
	data, err := json.MarshalIndent(j, "", "  ")
	if err != nil {
		return err
	}
	tmp := j.path + ".tmp"
	fh, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := fh.Write(append(data, '\n')); err != nil {
		fh.Close()
		return err
	}
	if err := fh.Sync(); err != nil {
		fh.Close()
		return err
	}
	if err := fh.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, j.path); err != nil {
		return err
	}
	if d, err := os.Open(filepath.Dir(j.path)); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

func journalDir(stateDir string) string { return filepath.Join(stateDir, "journal") }

func newJournal(stateDir string, now time.Time) (*Journal, error) {
	dir := journalDir(stateDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("state dir: %w", err)
	}
	base := now.UTC().Format("20060102T150405Z")
	id := base
	for i := 2; ; i++ {
		if _, err := os.Stat(filepath.Join(dir, id+".json")); errors.Is(err, os.ErrNotExist) {
			break
		}
		id = fmt.Sprintf("%s-%d", base, i)
	}
	return &Journal{ID: id, Time: now, State: StateApplying, path: filepath.Join(dir, id+".json")}, nil
}

// LoadJournal reads one journal by ID.
func LoadJournal(stateDir, id string) (*Journal, error) {
	if strings.ContainsAny(id, "/\\") || id == "" || id == "." || id == ".." {
		return nil, fmt.Errorf("journal id %q is not valid", id)
	}
	p := filepath.Join(journalDir(stateDir), id+".json")
	data, err := os.ReadFile(p)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("no journal %q in %s", id, journalDir(stateDir))
		}
		return nil, err
	}
	var j Journal
	if err := json.Unmarshal(data, &j); err != nil {
		return nil, fmt.Errorf("journal %s: %w", p, err)
	}
	j.path = p
	return &j, nil
}

// History lists the journals, oldest first.
func History(stateDir string) ([]*Journal, error) {
	names, err := filepath.Glob(filepath.Join(journalDir(stateDir), "*.json"))
	if err != nil {
		return nil, err
	}
	var out []*Journal
	for _, n := range names {
		j, err := LoadJournal(stateDir, strings.TrimSuffix(filepath.Base(n), ".json"))
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	sort.Slice(out, func(a, b int) bool {
		if !out[a].Time.Equal(out[b].Time) {
			return out[a].Time.Before(out[b].Time)
		}
		return out[a].ID < out[b].ID
	})
	return out, nil
}

// Lock is an exclusive lock on the state directory: two applies (or an apply
// and a revert) never interleave.
type Lock struct{ fh *os.File }

// AcquireLock takes the lock without waiting; if another irqpilot holds it,
// the error names its PID.
func AcquireLock(stateDir string) (*Lock, error) {
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return nil, fmt.Errorf("state dir %s: %w", stateDir, err)
	}
	p := filepath.Join(stateDir, "lock")
	fh, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(fh.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(p)
		fh.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("another irqpilot apply/revert holds %s (pid %s); try again when it ends", p, strings.TrimSpace(string(holder)))
		}
		return nil, fmt.Errorf("lock %s: %w", p, err)
	}
	fh.Truncate(0)
	fmt.Fprintf(fh, "%d\n", os.Getpid())
	return &Lock{fh: fh}, nil
}

// Release drops the lock.
func (l *Lock) Release() {
	if l == nil || l.fh == nil {
		return
	}
	unix.Flock(int(l.fh.Fd()), unix.LOCK_UN)
	l.fh.Close()
	l.fh = nil
}
