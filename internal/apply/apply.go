// Package apply is the converge pipeline: it turns resolved changes into
// kernel writes, safely. It takes a lock, records every old value in a
// write-ahead journal before touching anything, skips writes that change
// nothing, reads every value back, and on an unexpected failure restores
// every change already made. Journals stay in the state directory so
// `revert` can restore exactly what was there. How each kind of setting is
// read, written, compared and restored is the setting registry's business;
// this package only sequences it.
package apply

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/plan"
	"github.com/irqpilot/irqpilot/internal/setting"
)

// writeLockWait is how long an apply or revert waits for another irqpilot
// process that is writing kernel settings.
const writeLockWait = 30 * time.Second

// Applier applies changes to the machine behind Env.
type Applier struct {
	Env      setting.Env
	StateDir string
	// Now is the clock (tests pin it).
	Now func() time.Time
	// BeforeWrite, when set, is called before the i-th write with its entry;
	// tests use it to kill the process between two writes.
	BeforeWrite func(i int, e *setting.Change)
	// Session is written into every journal this applier makes ("" means
	// this process's: ProcessSession).
	Session string
}

// processStart is when this process started (near enough: its package
// initialisation), part of ProcessSession.
var processStart = time.Now()

// ProcessSession names this process's journals: its start time and pid,
// unique on this machine (a pid alone is reused).
func ProcessSession() string {
	return fmt.Sprintf("%s-p%d", processStart.UTC().Format("20060102T150405.000Z"), os.Getpid())
}

// New returns an Applier for the machine behind fs.
func New(fs *kernel.FS, stateDir string) *Applier {
	return &Applier{Env: setting.Env{FS: fs}, StateDir: stateDir}
}

// Meta describes the plan being applied.
type Meta struct {
	Host     string
	PlanFile string
	PlanHash string
	// Prediction is what the change is expected to do (the plan's, or one
	// made before the apply from a fresh measurement): kept in the journal
	// so that `verify` can check it later.
	Prediction *plan.Prediction
}

// Result is what an apply did.
type Result struct {
	Journal *Journal         // nil on dry run or when nothing changed
	Entries []setting.Change // every change with its status
	// Changed, Unchanged, Skipped count entries by outcome.
	Changed, Unchanged, Skipped int
}

// Validate checks a change list before anything is read or written: every
// change is checked by its kind (known kind, the object it may touch, a
// valid value) and two changes that write one thing are an error naming
// both.
func Validate(changes []setting.Change) error {
	seen := map[string]int{}
	for i := range changes {
		c := &changes[i]
		if err := setting.Check(c); err != nil {
			return fmt.Errorf("change %d: %w", i+1, err)
		}
		k := setting.Key(c)
		if prev, ok := seen[k]; ok {
			if p := changes[prev]; p.Line > 0 && c.Line > 0 {
				return fmt.Errorf("plan lines %d and %d both set %s (%s): one entry per thread, IRQ or file", p.Line, c.Line, c.Target, c.Name())
			}
			return fmt.Errorf("change %d (%s) and change %d (%s) both write %s", prev+1, changes[prev].Target, i+1, c.Target, c.Name())
		}
		seen[k] = i
	}
	return nil
}

// Diff reads the current value of every change and reports which would
// change, without writing (the dry run and the first half of Apply).
func (a *Applier) Diff(changes []setting.Change) ([]setting.Change, error) {
	return a.diff(changes, nil)
}

// diff is Diff; m, when set, carries what the last diff of the same
// changes validated and compared (DiffMemo).
func (a *Applier) diff(changes []setting.Change, m *DiffMemo) ([]setting.Change, error) {
	entries, err := m.entries(changes)
	if err != nil {
		return nil, err
	}
	for i := range entries {
		e := &entries[i]
		h, _ := setting.Lookup(e.Kind)
		e.Old, e.OldFile, e.Note = "", nil, ""
		old, err := h.Read(&a.Env, e)
		switch {
		case err != nil && (errors.Is(err, kernel.ErrUnsupported) || errors.Is(err, kernel.ErrNoSuchTask)):
			e.Status, e.Note = setting.StatusSkipped, err.Error()
			continue
		case err != nil:
			return nil, fmt.Errorf("%s: read current value: %w", e.Target, err)
		}
		e.Old = old
		if k, ok := h.(setting.Keeper); ok {
			if err := k.Keep(&a.Env, e); err != nil {
				return nil, fmt.Errorf("%s: %w", e.Target, err)
			}
		} else if st, ok := m.verdict(i, old); ok {
			e.Status = st
			continue
		}
		same, err := h.Same(old, h.Expected(e))
		if err != nil {
			return nil, fmt.Errorf("%s: current value %q: %w", e.Target, old, err)
		}
		if same {
			e.Status = setting.StatusUnchanged
		} else {
			e.Status = setting.StatusPending
		}
		m.remember(i, old, e.Status)
	}
	return entries, nil
}

// Apply makes the changes. Every old value is journaled before the first
// write; each write is read back; a refusal for a known reason (kernel-managed
// IRQ, setting not supported) is recorded as skipped; any other failure rolls
// back every change already made and returns an error that names the change.
// Re-applying the same changes writes nothing.
func (a *Applier) Apply(changes []setting.Change, meta Meta) (*Result, error) {
	return a.apply(changes, meta, nil)
}

// apply is Apply; more, when set, adds changes under the lock (the
// leftovers --replace restores), before anything is read or journaled.
func (a *Applier) apply(changes []setting.Change, meta Meta, more func([]setting.Change) ([]setting.Change, error)) (*Result, error) {
	unlock, err := a.lock()
	if err != nil {
		return nil, err
	}
	defer unlock()

	if more != nil {
		extra, err := more(changes)
		if err != nil {
			return nil, err
		}
		changes = append(append([]setting.Change(nil), changes...), extra...)
	}
	entries, err := a.Diff(changes)
	if err != nil {
		return nil, err
	}
	res := &Result{Entries: entries}
	pending := 0
	for _, e := range entries {
		if e.Status == setting.StatusPending {
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
	j.Host, j.PlanFile, j.PlanHash, j.Prediction = meta.Host, meta.PlanFile, meta.PlanHash, meta.Prediction
	j.BootID = a.Env.FS.BootID()
	j.NetNS = a.netns()
	j.Session = a.Session
	if j.Session == "" {
		j.Session = ProcessSession()
	}
	j.Entries = entries
	if err := j.save(); err != nil {
		j.discard()
		return nil, fmt.Errorf("journal %s: %w; nothing was changed", j.path, err)
	}
	res.Journal = j

	n := 0
	for i := range j.Entries {
		e := &j.Entries[i]
		if e.Status != setting.StatusPending {
			continue
		}
		if a.BeforeWrite != nil {
			a.BeforeWrite(n, e)
		}
		n++
		h, _ := setting.Lookup(e.Kind)
		werr := h.Write(&a.Env, e, e.Value)
		written := werr == nil
		if written {
			werr = a.verify(h, e)
		}
		switch {
		case werr == nil:
			e.Status = setting.StatusDone
		case !written && errors.Is(werr, kernel.ErrManaged):
			e.Status = setting.StatusSkipped
			e.Note = "the kernel refuses this IRQ's affinity (kernel-managed, or per-CPU): managed queue IRQs follow their queue's CPUs; left as is"
		case !written && (errors.Is(werr, kernel.ErrUnsupported) || errors.Is(werr, kernel.ErrNoSuchTask)):
			e.Status = setting.StatusSkipped
			e.Note = werr.Error()
		case written && errors.Is(werr, kernel.ErrNoSuchTask):
			// The thread exited right after it was placed: nothing to
			// keep, nothing to restore.
			e.Status = setting.StatusGone
			e.Note = werr.Error()
		default:
			// Any other failure — including a read-back that failed after a
			// write that succeeded (the value may be in force) — rolls back.
			// A refused write changed nothing ("failed", not restored); a
			// write that read back wrong did change the file, so it is
			// rolled back with the others.
			e.Status = setting.StatusFailed
			if written {
				e.Status = setting.StatusDone
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
				rbErr = fmt.Errorf("the kernel was restored but journal %s could not record it: %w", j.path, serr)
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
			// changed without a record, then try to record the truth.
			rbErr := a.rollback(j, false)
			res.Entries = j.Entries
			res.count()
			if rbErr != nil {
				j.State = StateRollbackIncomplete
				j.save()
				return res, fmt.Errorf("journal %s: %v; ROLLBACK INCOMPLETE: %v", j.path, err, rbErr)
			}
			j.State = StateRolledBack
			j.Error = fmt.Sprintf("journal write failed: %v", err)
			if serr := j.save(); serr != nil {
				// The kernel is as it was; a journal that still says
				// "applying" would make revert restore values that are
				// already in force, which is harmless.
				return res, fmt.Errorf("journal %s: %v; every change already made was restored, but the journal could not record that (it may still say %q; reverting it is harmless)", j.path, err, StateApplying)
			}
			return res, fmt.Errorf("journal %s: %v; every change already made was restored", j.path, err)
		}
	}
	j.State = StateApplied
	if err := j.save(); err != nil {
		res.Entries = j.Entries
		res.count()
		return res, &JournalNotFinalError{Path: j.path, ID: j.ID, Err: err}
	}
	res.Entries = j.Entries
	res.count()
	return res, nil
}

// JournalNotFinalError: every change was applied and read back, but the
// journal's last save failed, so it still says "applying". Revert accepts
// that state (and restores exactly the entries marked done, plus the first
// pending one, which here is none), so the machine is revertable.
type JournalNotFinalError struct {
	Path, ID string
	Err      error
}

func (e *JournalNotFinalError) Error() string {
	return fmt.Sprintf("every change was applied and read back, but journal %s could not be marked applied (%v); it still says %q, which `irqpilot revert --to %s` accepts", e.Path, e.Err, StateApplying, e.ID)
}

func (e *JournalNotFinalError) Unwrap() error { return e.Err }

func (r *Result) count() {
	r.Changed, r.Unchanged, r.Skipped = 0, 0, 0
	for _, e := range r.Entries {
		switch e.Status {
		case setting.StatusDone:
			r.Changed++
		case setting.StatusUnchanged:
			r.Unchanged++
		case setting.StatusSkipped:
			r.Skipped++
		}
	}
}

// verify reads a written value back and compares it with what the kernel
// should show (after rounding); a kind with something to say after a write
// (an IRQ's effective affinity) notes it.
func (a *Applier) verify(h setting.Handler, e *setting.Change) error {
	got, err := h.Read(&a.Env, e)
	if err != nil {
		return fmt.Errorf("read back: %w", err)
	}
	same, err := h.Same(got, h.Expected(e))
	if err != nil {
		return fmt.Errorf("read back %q: %w", got, err)
	}
	if !same {
		return fmt.Errorf("read back %q after writing %q", got, e.Value)
	}
	if n, ok := h.(setting.Noter); ok {
		e.Note = n.AfterWrite(&a.Env, e)
	}
	return nil
}

// rollback restores, newest first, every entry that was written. After a
// crash (a journal left "applying"), the first pending entry is restored too:
// entries are written in order and the journal is saved after each, so only
// that one can have been in flight when the process died. Other pending
// entries were never attempted and are marked so.
func (a *Applier) rollback(j *Journal, crashed bool) error {
	inFlight := -1
	for i, e := range j.Entries {
		if e.Status == setting.StatusPending {
			if inFlight < 0 && crashed {
				inFlight = i
			} else {
				j.Entries[i].Status = setting.StatusNotAttempted
			}
		}
	}
	var errs []error
	for i := len(j.Entries) - 1; i >= 0; i-- {
		e := &j.Entries[i]
		if e.Status != setting.StatusDone && i != inFlight {
			continue
		}
		if err := a.restore(e); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// restore writes one entry's old value back and sets its status: restored,
// or gone when the thing it changed no longer exists (a thread that exited,
// a device, queue or IRQ that was removed: its file is gone, so there is
// nothing to restore and nothing left changed). Any other failure is
// returned, naming the entry, and leaves the status as it was.
func (a *Applier) restore(e *setting.Change) error {
	h, err := setting.Lookup(e.Kind)
	if err != nil {
		return err
	}
	if err := h.Restore(&a.Env, e); err != nil {
		switch {
		case errors.Is(err, kernel.ErrNoSuchTask):
			e.Status = setting.StatusGone
			e.Note = err.Error()
			return nil
		case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENODEV):
			e.Status = setting.StatusGone
			e.Note = fmt.Sprintf("gone: %s no longer exists (removed since it was applied), nothing to restore", e.Target)
			return nil
		}
		// A failed write usually changed nothing: if the old value is
		// still there, there is nothing to restore.
		if cur, rerr := h.Read(&a.Env, e); rerr == nil {
			if same, _ := h.Same(cur, e.Old); same {
				e.Status = setting.StatusRestored
				return nil
			}
		}
		return fmt.Errorf("%s: restore %q: %w", e.Target, e.Old, err)
	}
	e.Status = setting.StatusRestored
	return nil
}

func (a *Applier) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

// lock takes the state directory's lock (two applies or reverts never
// interleave) and the machine-wide kernel write lock (no managed-IRQ probe
// writes in between).
func (a *Applier) lock() (unlock func(), err error) {
	l, err := AcquireLock(a.StateDir)
	if err != nil {
		return nil, err
	}
	release, err := a.Env.FS.LockWrites(writeLockWait)
	if err != nil {
		l.Release()
		return nil, err
	}
	return func() { release(); l.Release() }, nil
}

// RecordManaged keeps, in the state directory, which IRQs the kernel
// refused (kernel-managed) and which it accepted — from the host model when
// it knows (a probing read), and from what this apply's writes showed — so
// that read-only commands can tell managed IRQs apart later without writing
// anything (see host.RecordManaged). A failure to record is not a failure
// of the apply.
func (a *Applier) RecordManaged(h *host.Host, entries []setting.Change) error {
	if !a.Env.FS.IsLive() {
		return nil
	}
	state := map[int]bool{}
	if h != nil {
		for _, q := range h.IRQs {
			switch q.Managed {
			case host.ManagedYes:
				state[q.Number] = true
			case host.ManagedNo:
				state[q.Number] = false
			}
		}
	}
	for i := range entries {
		e := &entries[i]
		if e.Kind != setting.KindIRQAffinity || e.IRQ == nil {
			continue
		}
		switch {
		case e.Status == setting.StatusDone || e.Status == setting.StatusRestored:
			state[*e.IRQ] = false
		case e.Status == setting.StatusSkipped && strings.Contains(e.Note, "kernel-managed"):
			state[*e.IRQ] = true
		}
	}
	if len(state) == 0 {
		return nil
	}
	var managed, movable []int
	for irq, m := range state {
		if m {
			managed = append(managed, irq)
		} else {
			movable = append(movable, irq)
		}
	}
	sort.Ints(managed)
	sort.Ints(movable)
	return host.RecordManaged(a.Env.FS, a.StateDir, managed, movable)
}
