package agent

import (
	"errors"
	"time"

	"github.com/irqpilot/irqpilot/internal/apply"
	"github.com/irqpilot/irqpilot/internal/plan"
)

// Reload re-reads the plan file (or re-makes the policy's plan); a plan
// that does not parse or resolve is rejected and the old one kept.
func (ag *Agent) Reload() error {
	done := make(chan error, 1)
	ag.reloadReq <- done
	return <-done
}

func (ag *Agent) reload() error {
	h, err := ag.readHost()
	if err == nil {
		var p *plan.Plan
		var hash string
		if p, hash, err = ag.loadPlan(h); err == nil {
			if _, _, _, err = resolve(ag.o.FS, h, p); err == nil {
				ag.mu.Lock()
				ag.pl, ag.planHash, ag.prevPlan = p, hash, nil
				ag.frozen = map[string]*Frozen{}
				ag.repairTimes = map[string][]time.Time{}
				ag.writeFails = map[string]int{}
				// A new plan's values are applied, not repaired.
				ag.established = map[string]bool{}
				ag.heldForCPU = map[string]bool{}
				ag.needResolve = true
				ag.mu.Unlock()
				ag.adapt.reset()
				ag.log.Info("plan reloaded", "plan", ag.source())
				ag.noteReload(nil)
				ag.pass("reload")
				return nil
			}
		}
	}
	ag.log.Error("plan reload rejected; keeping the plan in force", "plan", ag.source(), "error", err)
	ag.noteReload(err)
	return err
}

// noteReload records a reload's result for status and the metrics.
func (ag *Agent) noteReload(err error) {
	r := &ReloadResult{Time: time.Now(), Rejected: err != nil}
	if err != nil {
		r.Error = err.Error()
	}
	ag.mu.Lock()
	ag.lastReload = r
	ag.mu.Unlock()
	if ag.m == nil {
		return
	}
	if err != nil {
		ag.m.Reloads.WithLabelValues("rejected").Inc()
		ag.m.ReloadRejected.Set(1)
	} else {
		ag.m.Reloads.WithLabelValues("applied").Inc()
		ag.m.ReloadRejected.Set(0)
	}
}

// recover rolls back a journal a crashed run left "applying" in this boot
// (exactly what it had written), so the first pass starts from a known
// state.
func (ag *Agent) recover() {
	all, err := apply.History(ag.o.StateDir)
	if err != nil {
		ag.log.Warn("journal history", "error", err)
	}
	boot := ag.o.FS.BootID()
	for _, j := range all {
		if j.State != apply.StateApplying || (j.BootID != "" && boot != "" && j.BootID != boot) {
			continue
		}
		if _, err := ag.ap.Revert(j.ID, false); err != nil {
			ag.log.Error("recover: could not roll back an interrupted apply", "journal", j.ID, "error", err)
			continue
		}
		ag.log.Warn("recovered: rolled back the apply a previous run left unfinished", "journal", j.ID)
	}
}

// stop leaves the applied state, or reverts this run's journals newest
// first (--revert-on-exit).
func (ag *Agent) stop() {
	if !ag.o.RevertOnExit {
		if len(ag.journals) == 0 {
			ag.log.Info("agent stopping; it changed nothing")
			return
		}
		session := ag.ap.Session
		if session == "" {
			session = apply.ProcessSession()
		}
		ag.log.Info("agent stopping; the applied settings stay in force", "journals", len(ag.journals),
			"undo", apply.RevertCommand(ag.o.StateDir, ag.ap.NetNS(), "--session="+session))
		return
	}
	ag.revertJournals(ag.journals)
	ag.journals = nil
	ag.log.Info("agent stopped; reverted every change it made")
}

func (ag *Agent) revertJournals(ids []string) error {
	var errs []error
	for i := len(ids) - 1; i >= 0; i-- {
		if _, err := ag.ap.Revert(ids[i], false); err != nil {
			errs = append(errs, err)
			ag.log.Error("revert", "journal", ids[i], "error", err)
		} else {
			ag.log.Info("reverted", "journal", ids[i])
		}
	}
	return errors.Join(errs...)
}
