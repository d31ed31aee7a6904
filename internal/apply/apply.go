package apply

import (
	"errors"
	"fmt"
	"math/bits"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/kernel"
)

// writeLockWait is how long an apply or revert waits for another irqpilot
// process that is writing kernel settings (an apply, or an inventory's
// managed-IRQ probe, which takes well under a second).
const writeLockWait = 30 * time.Second

// Applier applies changes to the machine behind FS.
type Applier struct {
	FS       *kernel.FS
	StateDir string
	// Now is the clock (tests pin it).
	Now func() time.Time
	// BeforeWrite, when set, is called before the i-th write with its entry;
	// tests use it to kill the process between two writes.
	BeforeWrite func(i int, e *Entry)
}

// Meta describes the plan being applied.
type Meta struct {
	Host     string
	PlanFile string
	PlanHash string
}

// Result is what an apply did.
type Result struct {
	Journal *Journal // nil on dry run or when nothing changed
	Entries []Entry  // every change with its status
	// Changed, Unchanged, Skipped count entries by outcome.
	Changed, Unchanged, Skipped int
}

// Validate checks a change list before anything is read or written:
// duplicate targets and unparseable values are errors naming the change.
func Validate(changes []Change) error {
	seen := map[string]int{}
	for i, c := range changes {
		switch c.Kind {
		case KindThreadAffinity:
			if c.TID <= 0 {
				return fmt.Errorf("change %d (%s): thread id %d is not valid", i+1, c.Target, c.TID)
			}
		case KindCoalesce:
			if c.Device == "" {
				return fmt.Errorf("change %d (%s): no device", i+1, c.Target)
			}
		case KindIrqbalance:
			if c.Value != "running" && c.Value != "stopped" {
				return fmt.Errorf("change %d (%s): irqbalance state %q is not running or stopped", i+1, c.Target, c.Value)
			}
		default:
			if c.Path == "" {
				return fmt.Errorf("change %d (%s): no kernel file", i+1, c.Target)
			}
		}
		if prev, ok := seen[c.key()]; ok {
			return fmt.Errorf("change %d (%s) and change %d (%s) both write %s", prev+1, changes[prev].Target, i+1, c.Target, strings.TrimPrefix(c.key(), "path:"))
		}
		seen[c.key()] = i
		if _, err := sameValue(c.Kind, c.Value, c.Value); err != nil {
			return fmt.Errorf("change %d (%s): value %q: %v", i+1, c.Target, c.Value, err)
		}
	}
	return nil
}

// Plan reads the current value of every change and reports which would
// change, without writing (the dry run and the first half of Apply).
func (a *Applier) Plan(changes []Change) ([]Entry, error) {
	if err := Validate(changes); err != nil {
		return nil, err
	}
	entries := make([]Entry, len(changes))
	for i, c := range changes {
		e := Entry{Change: c}
		old, err := a.read(c)
		switch {
		case err != nil && (errors.Is(err, kernel.ErrUnsupported) || errors.Is(err, kernel.ErrNoSuchTask)):
			e.Status, e.Note = StatusSkipped, err.Error()
		case err != nil:
			return nil, fmt.Errorf("%s: read current value: %w", c.Target, err)
		default:
			e.Old = old
			if c.Kind == KindIrqbalanceBan {
				// Revert restores the whole file byte for byte (or removes
				// it if it did not exist), not just the variable.
				if b, err := a.FS.ReadFile(c.Path); err == nil {
					content := string(b)
					e.OldFile = &content
				}
			}
			same, err := sameValue(c.Kind, old, expected(c))
			if err != nil {
				return nil, fmt.Errorf("%s: current value %q: %w", c.Target, old, err)
			}
			if same {
				e.Status = StatusUnchanged
			} else {
				e.Status = StatusPending
			}
		}
		entries[i] = e
	}
	return entries, nil
}

// Apply makes the changes. Every old value is journaled before the first
// write; each write is read back; a refusal for a known reason (kernel-managed
// IRQ, setting not supported) is recorded as skipped; any other failure rolls
// back every change already made and returns an error that names the change.
// Re-applying the same changes writes nothing.
func (a *Applier) Apply(changes []Change, meta Meta) (*Result, error) {
	unlock, err := a.lock()
	if err != nil {
		return nil, err
	}
	defer unlock()

	entries, err := a.Plan(changes)
	if err != nil {
		return nil, err
	}
	res := &Result{Entries: entries}
	pending := 0
	for _, e := range entries {
		if e.Status == StatusPending {
			pending++
		}
	}
	if pending == 0 {
		res.count()
		return res, nil
	}
	j, err := newJournal(a.StateDir, a.now())
	if err != nil {
		return nil, err
	}
	j.Host, j.PlanFile, j.PlanHash = meta.Host, meta.PlanFile, meta.PlanHash
	j.Entries = entries
	if err := j.save(); err != nil {
		return nil, fmt.Errorf("journal %s: %w; nothing was changed", j.path, err)
	}
	res.Journal = j

	n := 0
	for i := range j.Entries {
		e := &j.Entries[i]
		if e.Status != StatusPending {
			continue
		}
		if a.BeforeWrite != nil {
			a.BeforeWrite(n, e)
		}
		n++
		werr := a.write(e.Change, e.Change.Value)
		written := werr == nil
		if written {
			werr = a.verify(e)
		}
		switch {
		case werr == nil:
			e.Status = StatusDone
		case errors.Is(werr, kernel.ErrManaged):
			e.Status = StatusSkipped
			e.Note = "the kernel refuses this IRQ's affinity (kernel-managed, or per-CPU): managed queue IRQs follow their queue's CPUs; left as is"
		case errors.Is(werr, kernel.ErrUnsupported), errors.Is(werr, kernel.ErrNoSuchTask):
			e.Status = StatusSkipped
			e.Note = werr.Error()
		default:
			// A refused write changed nothing ("failed", not restored); a
			// write that read back wrong did change the file, so it is
			// rolled back with the others.
			e.Status = StatusFailed
			if written {
				e.Status = StatusDone
			}
			e.Note = werr.Error()
			j.Error = fmt.Sprintf("%s: %v", e.Target, werr)
			rbErr := a.rollback(j, false)
			j.State = StateRolledBack
			if rbErr != nil {
				// Revert accepts this state, so the journal's advice works.
				j.State = StateRollbackIncomplete
			}
			if serr := j.save(); serr != nil && rbErr == nil {
				rbErr = serr
			}
			res.Entries = j.Entries
			res.count()
			if rbErr != nil {
				return res, fmt.Errorf("%s: %v; ROLLBACK INCOMPLETE: %v (journal %s; run `irqpilot revert --to %s`)", e.Target, werr, rbErr, j.path, j.ID)
			}
			return res, fmt.Errorf("%s: %v; every change already made was restored (journal %s)", e.Target, werr, j.ID)
		}
		if err := j.save(); err != nil {
			// Cannot keep the journal current: undo, so that nothing is left
			// changed without a record.
			rbErr := a.rollback(j, false)
			if rbErr != nil {
				return res, fmt.Errorf("journal %s: %v; ROLLBACK INCOMPLETE: %v", j.path, err, rbErr)
			}
			return res, fmt.Errorf("journal %s: %v; every change already made was restored", j.path, err)
		}
	}
	j.State = StateApplied
	if err := j.save(); err != nil {
		return res, fmt.Errorf("journal %s: %w", j.path, err)
	}
	res.Entries = j.Entries
	res.count()
	return res, nil
}

func (r *Result) count() {
	r.Changed, r.Unchanged, r.Skipped = 0, 0, 0
	for _, e := range r.Entries {
		switch e.Status {
		case StatusDone:
			r.Changed++
		case StatusUnchanged:
			r.Unchanged++
		case StatusSkipped:
			r.Skipped++
		}
	}
}

// rollback restores, newest first, every entry that was written. After a
// crash (a journal left "applying"), the first pending entry is restored too:
// entries are written in order and the journal is saved after each, so only
// that one can have been in flight when the process died. Other pending
// entries were never attempted and are marked so.
func (a *Applier) rollback(j *Journal, crashed bool) error {
	inFlight := -1
	for i, e := range j.Entries {
		if e.Status == StatusPending {
			if inFlight < 0 && crashed {
				inFlight = i
			} else {
				j.Entries[i].Status = StatusNotAttempted
			}
		}
	}
	var errs []error
	for i := len(j.Entries) - 1; i >= 0; i-- {
		e := &j.Entries[i]
		if e.Status != StatusDone && i != inFlight {
			continue
		}
		if err := a.restore(e); err != nil {
			if errors.Is(err, kernel.ErrNoSuchTask) {
				e.Status = StatusGone
				continue
			}
			// A failed write usually changed nothing: if the old value is
			// still there, there is nothing to restore.
			if cur, rerr := a.read(e.Change); rerr == nil {
				if same, _ := sameValue(e.Kind, cur, e.Old); same {
					e.Status = StatusRestored
					continue
				}
			}
			errs = append(errs, fmt.Errorf("%s: restore %q: %w", e.Target, e.Old, err))
			continue
		}
		e.Status = StatusRestored
	}
	return errors.Join(errs...)
}

// restore puts an entry's old value back; a configuration file is restored
// byte for byte, or removed if it did not exist.
func (a *Applier) restore(e *Entry) error {
	if e.Kind == KindIrqbalanceBan {
		return restoreConfigFile(a.FS, e.Path, e.OldFile)
	}
	return a.write(e.Change, e.Old)
}

// Revert restores exactly what journal id recorded (the newest applied
// journal when id is ""), newest change first, and marks it reverted. An
// older journal whose settings a newer, still applied journal changed again
// is refused unless force: restoring it would silently undo the newer one.
func (a *Applier) Revert(id string, force bool) (*Journal, error) {
	unlock, err := a.lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	var j *Journal
	if id == "" {
		all, err := History(a.StateDir)
		if err != nil {
			return nil, err
		}
		for i := len(all) - 1; i >= 0; i-- {
			if all[i].State == StateApplied || all[i].State == StateApplying || all[i].State == StateRollbackIncomplete {
				j = all[i]
				break
			}
		}
		if j == nil {
			return nil, fmt.Errorf("nothing to revert: no applied journal in %s", journalDir(a.StateDir))
		}
	} else if j, err = LoadJournal(a.StateDir, id); err != nil {
		return nil, err
	}
	if j.State == StateReverted || j.State == StateRolledBack {
		return j, fmt.Errorf("journal %s is already %s", j.ID, j.State)
	}
	if !force {
		if newer, err := a.newerTouching(j); err != nil {
			return nil, err
		} else if newer != "" {
			return nil, fmt.Errorf("journal %s is older than %s, which changed some of the same settings and is still applied; revert that one first (or use --force to restore %s's old values anyway)", j.ID, newer, j.ID)
		}
	}
	err = a.rollback(j, j.State == StateApplying)
	if err == nil {
		j.State = StateReverted
	}
	if serr := j.save(); serr != nil && err == nil {
		err = serr
	}
	return j, err
}

func (a *Applier) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

func (a *Applier) read(c Change) (string, error) {
	switch c.Kind {
	case KindThreadAffinity:
		s, err := a.FS.ThreadAffinity(c.TID)
		return s.String(), err
	case KindCoalesce:
		return readCoalesce(a.FS, c)
	case KindIrqbalance:
		return readIrqbalanceState(a.FS)
	case KindIrqbalanceBan:
		return readBanned(a.FS, c.Path)
	}
	v, err := a.FS.ReadString(c.Path)
	if errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("%s: %w", c.Path, kernel.ErrUnsupported)
	}
	return v, err
}

func (a *Applier) write(c Change, value string) error {
	switch c.Kind {
	case KindThreadAffinity:
		s, err := cpuset.Parse(value)
		if err != nil {
			return err
		}
		return a.FS.SetThreadAffinity(c.TID, s)
	case KindCoalesce:
		return writeCoalesce(a.FS, c, value)
	case KindIrqbalance:
		return writeIrqbalanceState(a.FS, value)
	case KindIrqbalanceBan:
		return writeBanned(a.FS, c.Path, value)
	}
	return a.FS.WriteFile(c.Path, value)
}

// verify reads a written value back. The kernel rounds flow-table sizes up to
// a power of two, so those compare after rounding. For IRQs it also records
// where the interrupt is actually delivered (effective_affinity_list).
func (a *Applier) verify(e *Entry) error {
	got, err := a.read(e.Change)
	if err != nil {
		return fmt.Errorf("read back: %w", err)
	}
	same, err := sameValue(e.Kind, got, expected(e.Change))
	if err != nil {
		return fmt.Errorf("read back %q: %w", got, err)
	}
	if !same {
		return fmt.Errorf("read back %q after writing %q", got, e.Value)
	}
	if e.Kind == KindIRQAffinity {
		eff := strings.TrimSuffix(e.Path, "smp_affinity_list") + "effective_affinity_list"
		if v, err := a.FS.ReadString(eff); err == nil {
			e.Note = "effective " + v
		}
	}
	return nil
}

// expected is the value the kernel will show after writing c.Value: flow
// table sizes (rps_flow_cnt, rps_sock_flow_entries) are rounded up to a power
// of two by the kernel.
func expected(c Change) string {
	if c.Kind == KindRPSFlowCnt || strings.HasSuffix(c.Path, "rps_sock_flow_entries") {
		if n, err := strconv.ParseUint(strings.TrimSpace(c.Value), 10, 64); err == nil && n > 1 {
			return strconv.FormatUint(1<<bits.Len64(n-1), 10)
		}
	}
	return c.Value
}

// newerTouching returns the ID of a journal newer than j, still applied (or
// interrupted), that wrote one of the same targets; "" if none.
func (a *Applier) newerTouching(j *Journal) (string, error) {
	all, err := History(a.StateDir)
	if err != nil {
		return "", err
	}
	mine := map[string]bool{}
	for _, e := range j.Entries {
		if e.Status == StatusDone || e.Status == StatusPending {
			mine[e.key()] = true
		}
	}
	for _, o := range all {
		if o.ID == j.ID {
			continue
		}
		if o.State != StateApplied && o.State != StateApplying && o.State != StateRollbackIncomplete {
			continue
		}
		if !(o.Time.After(j.Time) || (o.Time.Equal(j.Time) && o.ID > j.ID)) {
			continue
		}
		for _, e := range o.Entries {
			if (e.Status == StatusDone || e.Status == StatusPending) && mine[e.key()] {
				return o.ID, nil
			}
		}
	}
	return "", nil
}

// lock takes the state directory's lock (two applies or reverts never
// interleave) and the machine-wide kernel write lock (no managed-IRQ probe
// writes in between).
func (a *Applier) lock() (unlock func(), err error) {
	l, err := AcquireLock(a.StateDir)
	if err != nil {
		return nil, err
	}
	release, err := a.FS.LockWrites(writeLockWait)
	if err != nil {
		l.Release()
		return nil, err
	}
	return func() { release(); l.Release() }, nil
}
