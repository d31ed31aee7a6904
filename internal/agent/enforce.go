package agent

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/irqpilot/irqpilot/internal/apply"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/setting"
)

// hostRefresh: the host model (and the resolved changes) are re-read at
// least this often even without an event. Events re-read it at once: a
// link event, CPUs going online or offline, the set of IRQs in
// /proc/interrupts changing (a driver reset re-requesting vectors), a
// setting that can no longer be read.
const hostRefresh = 2 * time.Minute

// Repair is one drift the agent found and undid.
type Repair struct {
	Time    time.Time `json:"time"`
	Setting string    `json:"setting"` // kind: "rps-cpus", "irq-affinity"
	Target  string    `json:"target"`
	Device  string    `json:"device,omitempty"`
	// Old is what the agent had in force, Drifted what it found, Restored
	// what it read back after writing.
	// The *CPUs fields are those values as cpulists when the kernel's
	// form is a hex mask (rps-cpus, xps-cpus); filled in by Status.
	Old          string  `json:"old"`
	OldCPUs      *string `json:"old_cpus,omitempty"`
	Drifted      string  `json:"drifted"`
	DriftedCPUs  *string `json:"drifted_cpus,omitempty"`
	Restored     string  `json:"restored"`
	RestoredCPUs *string `json:"restored_cpus,omitempty"`
	// Culprit says who changed it, when the agent can tell.
	Culprit string `json:"culprit,omitempty"`
	Journal string `json:"journal,omitempty"`
}

// Frozen is a setting the agent stopped enforcing because something kept
// changing it back.
type Frozen struct {
	Setting string    `json:"setting"`
	Target  string    `json:"target"`
	Device  string    `json:"device,omitempty"`
	Since   time.Time `json:"since"`
	Repairs int       `json:"repairs"`
	Culprit string    `json:"culprit,omitempty"`
	Reason  string    `json:"reason"`

	// retry: a setting parked because its write kept failing is tried
	// again from then on (zero: frozen for ping-pong, until a reload).
	retry time.Time
}

// writeFailures is a pass whose writes failed for some settings; the
// others were written (entry by entry).
type writeFailures struct{ errs []error }

func (w *writeFailures) Error() string {
	return errors.Join(w.errs...).Error()
}

// pass is one enforcement pass: refresh the model when needed, sample load
// (findings, adaptation), diff what the plan owns and repair drift.
func (ag *Agent) pass(why string) {
	start := time.Now()
	ag.mu.Lock()
	defer ag.mu.Unlock()
	defer ag.publishStatusLocked() // before the unlock: what queries get during the next pass
	ag.passes++
	ag.lastPass = start
	if !ag.linkEvents {
		// Without link events a renamed device, or one moved to another
		// namespace, goes unnoticed by a held file (it follows the
		// object, not the path): open every file afresh each pass.
		ag.files.Release()
	}
	if ag.m != nil {
		ag.m.Passes.Inc()
	}
	if set, err := ag.files.OnlineCPUs(); err == nil && set.String() != ag.online {
		on := set.String()
		if ag.online != "" {
			ag.log.Info("CPUs online changed", "was", ag.online, "now", on)
		}
		ag.online = on
		ag.needResolve = true
	}
	if h := ag.hostModel.Load(); h == nil || ag.needResolve || ag.changes == nil && ag.pl != nil || time.Since(ag.lastResolve) > hostRefresh {
		ag.resolveLocked()
	}
	ag.observe()
	err := ag.enforce(why)
	var wf *writeFailures
	if err != nil && !errors.As(err, &wf) {
		// A read that failed (a device or IRQ that vanished): re-read the
		// host and try once more. (Writes that failed were tried entry by
		// entry already; the host is re-read next pass.)
		ag.resolveLocked()
		err = ag.enforce(why)
	}
	if err != nil {
		ag.lastErr = err.Error()
		ag.log.Error("enforcement pass failed", "error", err)
		if ag.m != nil {
			ag.m.PassErrors.Inc()
		}
	} else {
		ag.lastErr = ag.devs.resolveErr // "" when the plan resolved
	}
	if ag.o.Adapt {
		ag.adaptStep()
	}
	ag.updateGauges()
	if ag.o.Alive != nil {
		ag.o.Alive()
	}
}

func (ag *Agent) updateGauges() {
	if ag.m == nil {
		return
	}
	ag.m.Enforced.Set(float64(len(ag.changes) - len(ag.frozen)))
	ag.m.Frozen.Set(float64(len(ag.frozen)))
	ag.m.Waiting.Set(float64(len(ag.waiting)))
}

// enforce diffs the plan's settings against the machine and writes what
// differs: settings seen in force before are drift (repaired, counted,
// ping-pong checked), the others are applied.
func (ag *Agent) enforce(why string) error {
	// A setting back from waiting for its CPU: only this pass's repair of
	// it is the kernel's doing; later drift is anyone's.
	defer func() {
		for k, held := range ag.heldForCPU {
			if !held {
				delete(ag.heldForCPU, k)
			}
		}
	}()
	if ag.devicesChanged() {
		ag.resolveLocked()
	}
	active := ag.changes
	if len(ag.frozen) > 0 {
		active = make([]setting.Change, 0, len(ag.changes))
		for i := range ag.changes {
			k := setting.Key(&ag.changes[i])
			if f := ag.frozen[k]; f != nil && !f.retry.IsZero() && time.Now().After(f.retry) {
				delete(ag.frozen, k) // parked long enough: try it again
				ag.writeFails[k] = ag.o.PingPongLimit - 1
			}
			if ag.frozen[k] == nil {
				active = append(active, ag.changes[i])
			}
		}
	}
	if len(active) == 0 {
		return nil
	}
	// Every setting is read from the machine; validation and comparison
	// are redone only for what changed since the last pass.
	entries, err := ag.ap.DiffWith(active, &ag.diffMemo)
	if err != nil {
		return err
	}
	now := time.Now()
	var write []setting.Change
	drift := map[string]setting.Change{} // key → diffed entry (Old = drifted value)
	var culprit string
	culpritRead := false
	for i := range entries {
		e := &entries[i]
		k := setting.Key(e)
		switch e.Status {
		case setting.StatusUnchanged:
			ag.established[k] = true
			continue
		case setting.StatusPending:
		default:
			continue
		}
		if ag.established[k] {
			if !culpritRead {
				culprit, culpritRead = ag.culprit(), true
			}
			// repairTimes holds the repairs that were made (written and
			// read back): a write that failed or was blocked (the state
			// directory's lock held) repaired nothing and counts nothing.
			times := slices.DeleteFunc(ag.repairTimes[k], func(t time.Time) bool { return now.Sub(t) > ag.o.PingPongWindow })
			ag.repairTimes[k] = times
			if len(times) >= ag.o.PingPongLimit {
				f := &Frozen{Setting: string(e.Kind), Target: e.Target, Device: e.Device, Since: now, Repairs: len(times),
					Culprit: culpritFor(e, culprit),
					// The count is of repairs, as the log line and
					// irqpilot_drift_repairs_total count them: this
					// change back is seen, not repaired.
					Reason: fmt.Sprintf("repaired %d times within %s and changed back again: something else manages it; no longer enforced (fix the other tool, then reload with SIGHUP)",
						len(times), ag.o.PingPongWindow)}
				ag.frozen[k] = f
				ag.log.Warn("ping-pong: setting frozen", logAttrs("setting", e.Kind, "target", e.Target, "device", e.Device,
					"value", shown(e.Kind, e.Old), "wanted", shown(e.Kind, e.Value), "repairs", f.Repairs, "culprit", f.Culprit)...)
				continue
			}
			drift[k] = *e
		}
		write = append(write, active[i]) // DiffWith keeps the order of its input
	}
	if len(write) == 0 {
		return nil
	}
	meta := apply.Meta{Host: ag.hostName(), PlanFile: ag.source(), PlanHash: ag.planHash}
	res, err := ag.ap.Apply(write, meta)
	ag.record(res, why, now, drift, culprit)
	if err == nil || !failedEntry(res) {
		ag.noteWrites(write, res, err, now)
		return err
	}
	if len(write) == 1 {
		ag.noteWrites(write, res, err, now)
		return &writeFailures{errs: []error{err}}
	}
	// One write failed and the whole batch was rolled back: write entry
	// by entry, so that one setting that cannot be written does not stop
	// the repair of every other.
	var fails writeFailures
	for i := range write {
		res, err := ag.ap.Apply(write[i:i+1], meta)
		ag.record(res, why, now, drift, culprit)
		ag.noteWrites(write[i:i+1], res, err, now)
		if err != nil {
			fails.errs = append(fails.errs, err)
		}
	}
	if len(fails.errs) == 0 {
		return nil
	}
	return &fails
}

// failedEntry reports whether an entry of res failed to be written (not a
// refusal before any write, such as the state directory's lock held).
func failedEntry(res *apply.Result) bool {
	if res == nil {
		return false
	}
	for i := range res.Entries {
		if res.Entries[i].Status == setting.StatusFailed {
			return true
		}
	}
	return false
}

// noteWrites counts, per setting, the passes in a row whose write of it
// failed; at PingPongLimit the setting is parked: no longer written, with
// its reason in status, the frozen gauge and one log line, and tried
// again after hostRefresh (or at a reload). A write that succeeds clears
// the count.
func (ag *Agent) noteWrites(write []setting.Change, res *apply.Result, err error, now time.Time) {
	if res == nil {
		return
	}
	for i := range res.Entries {
		e := &res.Entries[i]
		k := setting.Key(e)
		if e.Status != setting.StatusFailed {
			if e.Status == setting.StatusDone {
				delete(ag.writeFails, k)
			}
			continue
		}
		ag.needResolve = true // a device that went away is noticed next pass
		ag.writeFails[k]++
		if ag.writeFails[k] < ag.o.PingPongLimit {
			continue
		}
		delete(ag.writeFails, k)
		reason := e.Note
		if reason == "" && err != nil {
			reason = err.Error()
		}
		f := &Frozen{Setting: string(e.Kind), Target: e.Target, Device: e.Device, Since: now, retry: now.Add(hostRefresh),
			Reason: fmt.Sprintf("write failed %d passes in a row (%s); parked, the other settings stay enforced; tried again after %s or at a reload (SIGHUP)",
				ag.o.PingPongLimit, reason, hostRefresh)}
		ag.frozen[k] = f
		ag.log.Warn("setting parked: its write keeps failing", logAttrs("setting", e.Kind, "target", e.Target, "device", e.Device,
			"wanted", shown(e.Kind, e.Value), "failures", ag.o.PingPongLimit, "error", reason, "retry_after", hostRefresh)...)
	}
}

func appendRecent[T any](s []T, v T) []T {
	s = append(s, v)
	if len(s) > maxRecent {
		s = slices.Delete(s, 0, len(s)-maxRecent)
	}
	return s
}

func (ag *Agent) hostName() string {
	if h := ag.hostModel.Load(); h != nil {
		return h.Hostname
	}
	return ""
}

// culprit names a process known to rewrite interrupt placement, read fresh
// (irqbalance started after the agent counts).
func (ag *Agent) culprit() string {
	ib := host.ReadIrqbalance(ag.o.FS)
	if !ib.Running {
		return ""
	}
	if !ib.BannedCPUs.IsEmpty() {
		return fmt.Sprintf("irqbalance (pid %d, banned CPUs %s) is running", ib.PID, ib.BannedCPUs)
	}
	return fmt.Sprintf("irqbalance (pid %d) is running and not banned from any CPU", ib.PID)
}

// culpritFor: irqbalance rewrites IRQ affinities only.
func culpritFor(e *setting.Change, c string) string {
	if e.Kind == setting.KindIRQAffinity {
		return c
	}
	return ""
}
