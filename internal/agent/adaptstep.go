package agent

import (
	"fmt"
	"slices"
	"time"

	"github.com/irqpilot/irqpilot/internal/policy"
	"github.com/irqpilot/irqpilot/internal/setting"
	"github.com/irqpilot/irqpilot/internal/verify"
)

// adaptStep runs the state machine once per pass (ag.mu held).
func (ag *Agent) adaptStep() {
	s := ag.adapt
	if ag.lastLoad == nil {
		return
	}
	ob := observation(ag.lastLoad, policy.HarmFrom(ag.hostModel.Load(), ag.findings, ag.lastLoad)) // observe diagnosed lastLoad this pass
	ob.load = ag.lastLoad
	if m, err := ag.userMetric(); err == nil {
		ob.Metric = &m
	} else if err != errNoMetric {
		ag.log.Warn("user metric", "error", err)
	}
	now := time.Now()
	h := ag.hostModel.Load()
	if s.cur != nil {
		s.window = append(s.window, ob)
		// The first interval after the change may still hold moves
		// pending; every later one is settled and judged on its own: a
		// worse verdict on worseRun of them in a row (and on them
		// together) undoes the adaptation at once.
		if n := len(s.window); n > 1 {
			if r := s.judge(h, s.window[n-1:]); r.Verdict == verify.Worse {
				s.worse++
			} else {
				s.worse = 0
			}
			if s.worse >= worseRun {
				if r := s.judge(h, s.window[n-worseRun:]); r.Verdict == verify.Worse {
					r.Early = true
					ag.endAdaptation(now, false, fmt.Sprintf("undone at once: the change verified worse on %d settled intervals in a row", worseRun), r)
					return
				}
			}
		}
		if len(s.window) < s.o.Window {
			return
		}
		// The window's settled second half, judged as one measurement.
		r := s.judge(h, s.window[len(s.window)/2:])
		keep, reason, rule := verdictRule(s.cur.Finding, s.baseline, s.window, s.o.HigherIsBetter, false)
		switch r.Verdict {
		case verify.Worse:
			keep, reason = false, "the change verified worse over the settled intervals"
		case verify.Confirmed:
			// The finding's thresholds may still be crossed when the
			// predicted relief came true; a hot CPU that did not cool,
			// though, is no measured gain, confirmed or not.
			if !keep && rule == ruleStillHolds {
				// Kept unless a rule the model does not answer fails.
				if k, why, _ := verdictRule(s.cur.Finding, s.baseline, s.window, s.o.HigherIsBetter, true); k {
					keep, reason = true, "the prediction came true, though "+reason
				} else {
					reason = why
				}
			}
		}
		ag.endAdaptation(now, keep, reason, r)
		return
	}
	hit, held := s.trigger(now, ob)
	if held != "" {
		ag.log.Debug("adapt: holding", "why", held)
	}
	if hit == "" {
		return
	}
	p, err := ag.o.Planner(h, ag.lastLoad)
	a := Adaptation{Time: now, Finding: hit}
	if err != nil {
		a.Result, a.Reason = "failed", "planner: "+err.Error()
		ag.adaptations = appendRecent(ag.adaptations, a)
		s.streak = map[string]int{}
		s.last = now
		ag.log.Error("adapt: planner failed", "finding", hit, "error", err)
		return
	}
	a.Policy, a.Why = p.Policy, p.Why
	if policy.IsMarginal(p) {
		// A decision another interval of the same load could overturn is
		// no reason to change the machine: nothing is applied, and the
		// trigger must persist again before the next try.
		a.Result, a.Reason = "marginal", fmt.Sprintf("the planner's choice does not survive ±%.0f %% of the measured load; nothing is changed", 100*policy.MarginalNoise)
		ag.adaptations = appendRecent(ag.adaptations, a)
		s.streak = map[string]int{}
		s.last = now
		ag.log.Info("adapt: marginal, nothing changed", "finding", hit, "why", p.Why)
		return
	}
	// Whatever the planner, a plan whose predicted load breaks the
	// headroom rules is not applied (auto's own plans never do).
	o := policy.Options{Devices: ag.o.Devices, App: ag.o.App,
		IncludeDefaultRoute: ag.o.PolicyOptions.IncludeDefaultRoute, MachineWide: ag.o.PolicyOptions.MachineWide}
	if ag.sampler != nil && ag.sampler.TaskPIDs != nil {
		o.AppPIDs = ag.sampler.TaskPIDs()
	}
	if why := policy.Violation(h, ag.lastLoad, p, o); why != "" {
		a.Result, a.Reason = "refused", "the plan's predicted load breaks the headroom rules: "+why
		ag.adaptations = appendRecent(ag.adaptations, a)
		s.streak = map[string]int{}
		s.last = now
		ag.log.Warn("adapt: plan refused", "finding", hit, "why", a.Reason)
		return
	}
	changes, _, _, err := resolve(ag.o.FS, h, p)
	if err == nil {
		var entries []setting.Change
		if entries, err = ag.ap.Diff(changes); err == nil && !slices.ContainsFunc(entries, func(e setting.Change) bool { return e.Status == setting.StatusPending }) {
			a.Result, a.Reason = "no-change", "the planner's plan is already in force"
			if len(changes) == 0 {
				a.Reason = "the planner changes nothing"
			}
			ag.adaptations = appendRecent(ag.adaptations, a)
			s.streak = map[string]int{}
			s.last = now
			ag.log.Info("adapt: nothing to change", logAttrs("finding", hit, "policy", p.Policy)...)
			return
		}
	}
	if err != nil {
		a.Result, a.Reason = "failed", err.Error()
		ag.adaptations = appendRecent(ag.adaptations, a)
		s.streak = map[string]int{}
		s.last = now
		return
	}
	// The measurement before the change: the intervals the evidence held.
	before, beforeOK := measureObs(h, s.history)
	key := planKey(p)
	if beforeOK {
		b, changed := s.blockedFor(key, before)
		if b != nil {
			// The same plan made things worse on this load: not again
			// until the load changes. Said once; then only in the debug log.
			s.streak = map[string]int{}
			s.last = now
			why := fmt.Sprintf("the same plan verified worse at %s on a load within tolerance of this one (%s); not retried until the traffic moves by more than %.0f %% or a CPU's busy time by more than %.0f points",
				b.when.Format(time.RFC3339), b.reason, 100*verify.DefaultTrafficTolerance, verify.DefaultTolerance)
			if b.told {
				ag.log.Debug("adapt: plan not retried", "finding", hit, "why", why)
				return
			}
			b.told = true
			a.Result, a.Reason = "not-retried", why
			ag.adaptations = appendRecent(ag.adaptations, a)
			ag.log.Warn("adapt: plan not retried", logAttrs("finding", hit, "policy", p.Policy, "why", why)...)
			return
		}
		if changed != "" {
			ag.log.Info("adapt: retrying a plan that verified worse: the load changed", "finding", hit, "change", changed)
		}
	}
	a.Result, a.Reason = "verifying", fmt.Sprintf("%s held for %d intervals", hit, s.o.Persist)
	s.cur = &a
	s.baseline = slices.Clone(s.history)
	s.window, s.journals = nil, nil
	s.pred, s.note = adaptPrediction(h, ag.lastLoad, p, before, o.AppPIDs)
	s.before, s.beforeOK, s.planKey, s.worse = before, beforeOK, key, 0
	s.last = now
	s.changes = append(s.changes, now)
	if ag.prevPlan == nil {
		ag.prevPlan = ag.pl
	}
	ag.pl = p
	ag.needResolve = true
	ag.established = map[string]bool{}
	ag.heldForCPU = map[string]bool{}
	ag.adaptations = appendRecent(ag.adaptations, a)
	if ag.m != nil {
		ag.m.AdaptationsApplied.Inc()
	}
	ag.log.Info("adapt: applying", logAttrs("finding", hit, "policy", p.Policy, "why", p.Why)...)
	ag.resolveLocked()
	if err := ag.enforce("adapt"); err != nil {
		ag.log.Error("adapt: apply failed", "error", err)
	}
}

// endAdaptation keeps or reverts the adaptation being verified, with its
// verification; a worse verdict also remembers the plan (not retried on
// this load).
func (ag *Agent) endAdaptation(now time.Time, keep bool, reason string, v Verification) {
	s := ag.adapt
	s.cur.Journals = slices.Clone(s.journals)
	s.cur.Verdict, s.cur.Verification = string(v.Verdict), &v
	attrs := []any{"finding", s.cur.Finding, "why", reason, "verdict", string(v.Verdict), "intervals", v.Intervals}
	if len(v.CPUs) > 0 {
		attrs = append(attrs, "busy_error_pct", v.MeanBusyError, "irq_error_pct", v.MeanIRQError)
	}
	attrs = append(attrs, "verification", v.Reason)
	if keep {
		s.cur.Result, s.cur.Reason = "kept", reason
		ag.prevPlan = nil
		ag.log.Info("adaptation kept", attrs...)
	} else {
		s.cur.Result, s.cur.Reason = "reverted", reason
		if err := ag.revertJournals(s.journals); err != nil {
			s.cur.Reason += "; revert: " + err.Error()
		}
		ag.journals = slices.DeleteFunc(ag.journals, func(id string) bool { return slices.Contains(s.journals, id) })
		if ag.prevPlan != nil {
			ag.pl, ag.prevPlan = ag.prevPlan, nil
		}
		ag.needResolve = true
		ag.established = map[string]bool{}
		ag.heldForCPU = map[string]bool{}
		if ag.m != nil {
			ag.m.AdaptationsReverted.Inc()
		}
		msg := "adaptation reverted"
		if v.Early {
			msg = "adaptation reverted at once: the change verified worse"
		}
		ag.log.Warn(msg, attrs...)
		if v.Verdict == verify.Worse {
			s.block(now, v.Reason)
		}
	}
	if ag.m != nil {
		ag.m.Adaptations.WithLabelValues(string(v.Verdict)).Inc()
		if len(v.CPUs) > 0 {
			ag.m.PredictionError.WithLabelValues("busy").Set(v.MeanBusyError)
			ag.m.PredictionError.WithLabelValues("irq").Set(v.MeanIRQError)
		}
	}
	// The adaptation is the newest entry unless others were recorded
	// since (none are while one is verified); find it by identity.
	for i := len(ag.adaptations) - 1; i >= 0; i-- {
		if ag.adaptations[i].Time.Equal(s.cur.Time) && ag.adaptations[i].Result == "verifying" {
			ag.adaptations[i] = *s.cur
			break
		}
	}
	s.cur, s.window, s.baseline, s.journals = nil, nil, nil, nil
	s.endVerification()
	s.streak = map[string]int{}
}
