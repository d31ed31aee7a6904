package apply

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/plan"
	"github.com/irqpilot/irqpilot/internal/setting"
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

var journalStates = map[string]bool{StateApplying: true, StateApplied: true, StateRolledBack: true,
	StateReverted: true, StateNoChange: true, StateRollbackIncomplete: true}

var entryStatuses = map[setting.Status]bool{setting.StatusPending: true, setting.StatusDone: true,
	setting.StatusUnchanged: true, setting.StatusSkipped: true, setting.StatusFailed: true,
	setting.StatusRestored: true, setting.StatusGone: true, setting.StatusNotAttempted: true}

// maxJournalSize bounds a journal file: the largest real plan (every IRQ and
// queue of a 1152-CPU host plus every thread of a large server) journals in
// a few megabytes.
const maxJournalSize = 64 << 20

// Journal is the write-ahead record of one apply.
type Journal struct {
	ID       string    `json:"id"`
	Time     time.Time `json:"time"`
	Host     string    `json:"host,omitempty"`
	PlanFile string    `json:"plan_file,omitempty"`
	PlanHash string    `json:"plan_hash,omitempty"` // sha256 of the plan file's bytes
	// BootID is the boot the journal was written in: after a reboot IRQ
	// numbers and thread ids mean other things.
	BootID string `json:"boot_id,omitempty"`
	// NetNS is the network namespace the journal was applied in: a
	// device's queues and coalescing can be restored only from there.
	NetNS *kernel.NetNS `json:"netns,omitempty"`
	// Session names the process that applied the journal (every journal
	// of one agent run, or of one bench, shares it), so that
	// `revert --session` undoes that run in one step.
	Session string `json:"session,omitempty"`
	// Prediction is the change's predicted effect per CPU, when the plan
	// was made from a measurement (verify checks it).
	Prediction *plan.Prediction `json:"prediction,omitempty"`
	State      string           `json:"state"`
	Entries    []setting.Change `json:"entries"`
	Error      string           `json:"error,omitempty"`

	path string
}

// journalID is the form of a journal's ID (and file name without .json).
var journalID = regexp.MustCompile(`^[0-9]{8}T[0-9]{6}Z(-[0-9]{1,6})?$`)

// save writes the journal atomically and durably: a new temp file (created
// exclusively, never through a symlink), fsync, rename, fsync of the
// directory. It is called before every kernel write, so a crash at any
// moment leaves a journal that names every value that may have changed.
func (j *Journal) save() error {
	data, err := json.MarshalIndent(j, "", "  ")
	if err != nil {
		return err
	}
	tmp := j.path + ".tmp"
	if err := os.Remove(tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	fh, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	if _, err := fh.Write(append(data, '\n')); err != nil {
		fh.Close()
		os.Remove(tmp)
		return err
	}
	if err := fh.Sync(); err != nil {
		fh.Close()
		os.Remove(tmp)
		return err
	}
	if err := fh.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, j.path); err != nil {
		os.Remove(tmp)
		return err
	}
	if d, err := os.Open(filepath.Dir(j.path)); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// discard removes a journal whose first save failed (nothing was changed).
func (j *Journal) discard() {
	os.Remove(j.path + ".tmp")
	os.Remove(j.path)
}

func journalDir(stateDir string) string { return filepath.Join(stateDir, "journal") }

func newJournal(stateDir string, now time.Time) (*Journal, error) {
	if err := SecureStateDir(stateDir); err != nil {
		return nil, err
	}
	dir := journalDir(stateDir)
	if err := secureSubdir(dir); err != nil {
		return nil, err
	}
	base := now.UTC().Format("20060102T150405Z")
	id := base
	for i := 2; ; i++ {
		if _, err := os.Lstat(filepath.Join(dir, id+".json")); errors.Is(err, os.ErrNotExist) {
			break
		}
		id = fmt.Sprintf("%s-%d", base, i)
	}
	return &Journal{ID: id, Time: now, State: StateApplying, path: filepath.Join(dir, id+".json")}, nil
}

// LoadJournal reads one journal by ID. The state directory must pass
// SecureStateDir, the file is opened without following a symlink, and every
// entry must pass its kind's checks (the object it may touch, its value):
// a journal with one forged or garbled entry is refused whole, before
// anything acts on it.
func LoadJournal(stateDir, id string) (*Journal, error) {
	if !journalID.MatchString(id) {
		return nil, fmt.Errorf("journal id %q is not valid (IDs look like 20261122T103000Z; see 'irqpilot history')", id)
	}
	if err := CheckStateDir(stateDir); err != nil {
		return nil, err
	}
	if fi, err := os.Lstat(journalDir(stateDir)); err == nil {
		if err := checkStateComponent(journalDir(stateDir), journalDir(stateDir), fi, true); err != nil {
			return nil, err
		}
	}
	p := filepath.Join(journalDir(stateDir), id+".json")
	j, err := readJournal(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("no journal %q in %s", id, journalDir(stateDir))
	}
	return j, err
}

func readJournal(p string) (*Journal, error) {
	fh, err := os.OpenFile(p, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return nil, fmt.Errorf("journal %s is a symbolic link; refused", p)
		}
		return nil, err
	}
	defer fh.Close()
	if fi, err := fh.Stat(); err != nil {
		return nil, err
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("journal %s is not a regular file; refused", p)
	} else if err := checkOwner(p, fi); err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(fh, maxJournalSize+1))
	if err != nil {
		return nil, fmt.Errorf("journal %s: %w", p, err)
	}
	if len(data) > maxJournalSize {
		return nil, fmt.Errorf("journal %s is larger than %d bytes; refused", p, maxJournalSize)
	}
	var j Journal
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return nil, fmt.Errorf("journal %s: %w", p, err)
	}
	id := strings.TrimSuffix(filepath.Base(p), ".json")
	if j.ID != id {
		return nil, fmt.Errorf("journal %s: its id %q does not match its file name; refused", p, j.ID)
	}
	if err := j.validate(); err != nil {
		return nil, fmt.Errorf("journal %s: %w; refused (nothing was changed)", p, err)
	}
	j.path = p
	return &j, nil
}

// validate checks a journal read from disk before anything acts on it.
func (j *Journal) validate() error {
	if !journalStates[j.State] {
		return fmt.Errorf("unknown state %q", j.State)
	}
	for i := range j.Entries {
		e := &j.Entries[i]
		if !entryStatuses[e.Status] {
			return fmt.Errorf("entry %d (%s): unknown status %q", i+1, e.Target, e.Status)
		}
		if err := setting.CheckRecorded(e); err != nil {
			return fmt.Errorf("entry %d: %w", i+1, err)
		}
	}
	return nil
}

// Unreadable is a file in the journal directory that could not be used.
type Unreadable struct {
	File string `json:"file"`
	Err  string `json:"error"`
}

// HistoryError lists the journal files that could not be read; History
// returns it with every journal that could.
type HistoryError struct{ Files []Unreadable }

func (e *HistoryError) Error() string {
	parts := make([]string, len(e.Files))
	for i, f := range e.Files {
		parts[i] = f.Err
	}
	return "unreadable journal(s): " + strings.Join(parts, "; ")
}

// History lists the journals, oldest first. Files whose names are not
// journal IDs (a stray notes.json, a leftover .tmp) are not journals and are
// ignored; a journal file that cannot be read or fails its checks is
// reported in a *HistoryError naming it, beside every journal that could be
// read. A directory that cannot be listed is an error of its own.
func History(stateDir string) ([]*Journal, error) {
	dir, ents, err := readJournalDir(stateDir)
	if err != nil || ents == nil {
		return nil, err
	}
	var out []*Journal
	var bad []Unreadable
	for _, de := range ents {
		name := de.Name()
		id, ok := strings.CutSuffix(name, ".json")
		if !ok || !journalID.MatchString(id) {
			continue
		}
		j, err := readJournal(filepath.Join(dir, name))
		if err != nil {
			bad = append(bad, Unreadable{File: filepath.Join(dir, name), Err: err.Error()})
			continue
		}
		out = append(out, j)
	}
	sort.Slice(out, func(a, b int) bool {
		if !out[a].Time.Equal(out[b].Time) {
			return out[a].Time.Before(out[b].Time)
		}
		return idLess(out[a].ID, out[b].ID)
	})
	if len(bad) > 0 {
		return out, &HistoryError{Files: bad}
	}
	return out, nil
}

// Lock is an exclusive lock on the state directory: two applies (or an apply
// and a revert) never interleave.
type Lock struct{ fh *os.File }

// AcquireLock takes the lock without waiting; if another irqpilot holds it,
// the error names its PID. The state directory is created (0700) or checked
// (SecureStateDir) first, and the lock file is never opened through a
// symlink.
func AcquireLock(stateDir string) (*Lock, error) {
	if err := SecureStateDir(stateDir); err != nil {
		return nil, err
	}
	p := filepath.Join(stateDir, "lock")
	fh, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return nil, fmt.Errorf("lock %s is a symbolic link; refused (remove it)", p)
		}
		return nil, err
	}
	if fi, err := fh.Stat(); err != nil || !fi.Mode().IsRegular() {
		fh.Close()
		return nil, fmt.Errorf("lock %s is not a regular file; refused", p)
	}
	if err := unix.Flock(int(fh.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		holder := kernel.LockHolder(fh)
		fh.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("another irqpilot apply/revert holds %s (%s); try again when it ends", p, holder)
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
	// The pid names the holder only while it holds the lock: a later
	// holder that writes none (flock(1)) is not mistaken for us.
	l.fh.Truncate(0)
	unix.Flock(int(l.fh.Fd()), unix.LOCK_UN)
	l.fh.Close()
	l.fh = nil
}

// readJournalDir checks the state directory and its journal directory
// under the state directory's rules and lists the journals; a journal
// directory not made yet lists nothing (nil entries, no error).
func readJournalDir(stateDir string) (string, []os.DirEntry, error) {
	if err := CheckStateDir(stateDir); err != nil {
		return "", nil, err
	}
	dir := journalDir(stateDir)
	if fi, err := os.Lstat(dir); err == nil {
		if err := checkStateComponent(dir, dir, fi, true); err != nil {
			return "", nil, err
		}
	}
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return dir, nil, nil
	}
	if err != nil {
		return "", nil, fmt.Errorf("journal directory %s: %w", dir, err)
	}
	if ents == nil {
		ents = []os.DirEntry{}
	}
	return dir, ents, nil
}
