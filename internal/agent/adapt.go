package agent

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/diagnose"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/load"
	"github.com/irqpilot/irqpilot/internal/plan"
	"github.com/irqpilot/irqpilot/internal/policy"
	"github.com/irqpilot/irqpilot/internal/setting"
	"github.com/irqpilot/irqpilot/internal/verify"
)

// Planner computes the plan to try when a finding with evidence of harm
// persists. It is pure: the host as it is and the load just measured.
type Planner func(h *host.Host, l *load.Load) (*plan.Plan, error)

// appResolver returns what the selector app (a plan selector: comm:,
// pid:, unit:, cgroup:) names now on fs — the application may have
// restarted since the last interval.
func appResolver(fs *kernel.FS, app string) (func() ([]int, error), error) {
	e, err := plan.ParseAppSelector(app)
	if err != nil {
		return nil, err
	}
	e.All = true // each process the selector names is the application
	sel := e.Processes()
	return func() ([]int, error) { return setting.SelectProcesses(fs, sel) }, nil
}

// autoPlanner is the default Planner: the auto policy with the whole
// measurement, told the devices it may steer (--device;
// default every physical NIC) and the application (--app, resolved each
// time it plans; nil resolve: none): auto may then place the application
// beside where RPS frees a CPU. An application not running plans as
// without one.
//
// base carries the scope flags the agent was given (--include-default-route,
// --machine-wide), so that an adaptation plans over the same scope as the
// plan it adapts.
func autoPlanner(base policy.Options, devices []string, app string, resolve func() ([]int, error)) Planner {
	return func(h *host.Host, l *load.Load) (*plan.Plan, error) {
		o := policy.Options{Load: policy.Measured(l), Devices: devices,
			IncludeDefaultRoute: base.IncludeDefaultRoute, MachineWide: base.MachineWide}
		if resolve != nil {
			pids, err := resolve()
			if err != nil {
				return nil, fmt.Errorf("--app %s: %w", app, err)
			}
			o.App, o.AppPIDs = app, pids
		}
		return policy.Make("auto", h, o)
	}
}

// The adaptation trigger is the planner's own evidence of harm (policy.Harm):
// the findings auto acts on, and a CPU saturated mostly by interrupt work
// while every CPU is busy. Observations record only those.

// AdaptOptions tune --adapt.
type AdaptOptions struct {
	// Persist: intervals evidence of harm must hold before acting (3).
	Persist int
	// Window: intervals over which an adaptation is verified (5).
	Window int
	// MinDwell between two changes (5m); MaxPerHour changes (4).
	MinDwell   time.Duration
	MaxPerHour int
	// MetricCommand prints one number; MetricQuery is a Prometheus instant
	// query URL (http://host:9090/api/v1/query?query=…) returning one
	// sample. Lower is better unless HigherIsBetter.
	MetricCommand  string
	MetricQuery    string
	HigherIsBetter bool
}

func (o *AdaptOptions) defaults() {
	if o.Persist <= 0 {
		o.Persist = 3
	}
	if o.Window <= 0 {
		o.Window = 5
	}
	if o.MinDwell <= 0 {
		o.MinDwell = 5 * time.Minute
	}
	if o.MaxPerHour <= 0 {
		o.MaxPerHour = 4
	}
}

// Adaptation is one plan the agent tried.
type Adaptation struct {
	Time    time.Time `json:"time"`
	Finding string    `json:"finding"`
	// Result: "verifying", "kept", "reverted", "no-change" (the planner's
	// plan was already in force, or changes nothing), "marginal" (the
	// planner's choice does not survive ±10 % of the measured load, see
	// policy.IsMarginal: nothing is changed), "refused" (the plan's predicted
	// load breaks the headroom rules, policy.Violation: not applied),
	// "not-retried" (the same plan verified worse on a load within
	// tolerance of this one: not applied), "failed".
	Result   string   `json:"result"`
	Reason   string   `json:"reason"`
	Policy   string   `json:"policy,omitempty"`
	Why      string   `json:"why,omitempty"`
	Journals []string `json:"journals,omitempty"`
	// Verdict is the verification's verdict once judged (adaptverify.go):
	// confirmed, missed, worse or inconclusive; "" while verifying or when
	// nothing was applied.
	Verdict      string        `json:"verdict,omitempty"`
	Verification *Verification `json:"verification,omitempty"`
}

// Observation is what one interval showed, for verification.
type Observation struct {
	// Findings are the ids of the evidence of harm (policy.Harm).
	Findings map[string]bool
	// Busiest is the highest hardirq+softirq percentage of any CPU.
	Busiest float64
	// IRQ is each CPU's hardirq+softirq percentage, and FindingCPUs the
	// CPUs each finding names: an adaptation is judged on the CPUs its
	// trigger named (work moved off a hot CPU onto one with headroom is
	// the point, though the busiest CPU's interrupt time may not fall).
	IRQ         map[int]float64
	FindingCPUs map[string][]int
	// Drops are softnet drops per second, all CPUs.
	Drops float64
	// Metric is the user metric (nil: none or unreadable).
	Metric *float64
	// load is the interval's load, for the verification against the
	// prediction (nil: not kept).
	load *load.Load
}

func observation(l *load.Load, fs []diagnose.Finding) Observation {
	o := Observation{Findings: map[string]bool{}, IRQ: map[int]float64{}, FindingCPUs: map[string][]int{}}
	for _, f := range fs {
		o.Findings[f.ID] = true
		o.FindingCPUs[f.ID] = append(o.FindingCPUs[f.ID], f.CPUs...)
	}
	if l != nil {
		for _, c := range l.CPUs {
			o.Busiest = max(o.Busiest, c.IRQTime())
			o.IRQ[c.ID] = c.IRQTime()
		}
		for _, s := range l.Softnet {
			o.Drops += s.Dropped
		}
	}
	return o
}

type adaptState struct {
	o        AdaptOptions
	streak   map[string]int
	history  []Observation // the last Persist observations before acting
	changes  []time.Time   // adaptations applied, for the hourly budget
	last     time.Time
	cur      *Adaptation // being verified
	baseline []Observation
	window   []Observation
	journals []string
	// The current adaptation's verification (adaptverify.go): its
	// prediction, the measurement before it (beforeOK: one was made), where
	// the prediction came from, its plan's fingerprint and how many settled
	// intervals in a row were worse.
	pred     *plan.Prediction
	before   verify.Measurement
	beforeOK bool
	note     string
	planKey  string
	worse    int
	// blocked are plans that verified worse, with their load.
	blocked []blockedPlan
}

func newAdaptState(o AdaptOptions) *adaptState {
	o.defaults()
	return &adaptState{o: o, streak: map[string]int{}}
}

func (s *adaptState) reset() {
	s.streak = map[string]int{}
	s.history = nil
	s.cur = nil
	s.window, s.baseline, s.journals = nil, nil, nil
	s.endVerification()
}

// endVerification forgets the current adaptation's verification state.
func (s *adaptState) endVerification() {
	s.pred, s.before, s.beforeOK, s.note, s.planKey, s.worse = nil, verify.Measurement{}, false, "", "", 0
}

func (s *adaptState) noteJournal(id string) {
	if s.cur != nil {
		s.journals = append(s.journals, id)
	}
}

// trigger returns the evidence of harm that has persisted long enough, if
// dwell time and budget allow acting now.
func (s *adaptState) trigger(now time.Time, ob Observation) (string, string) {
	s.history = append(s.history, ob)
	if len(s.history) > s.o.Persist {
		s.history = s.history[len(s.history)-s.o.Persist:]
	}
	for id := range s.streak {
		if !ob.Findings[id] {
			delete(s.streak, id)
		}
	}
	var hit string
	for _, id := range slices.Sorted(maps.Keys(ob.Findings)) {
		if !ob.Findings[id] {
			continue
		}
		s.streak[id]++
		if s.streak[id] >= s.o.Persist && hit == "" {
			hit = id
		}
	}
	if hit == "" {
		return "", ""
	}
	if !s.last.IsZero() && now.Sub(s.last) < s.o.MinDwell {
		return "", fmt.Sprintf("%s persists but the last change was %s ago (minimum dwell %s)", hit, now.Sub(s.last).Round(time.Second), s.o.MinDwell)
	}
	s.changes = slices.DeleteFunc(s.changes, func(t time.Time) bool { return now.Sub(t) > time.Hour })
	if len(s.changes) >= s.o.MaxPerHour {
		return "", fmt.Sprintf("%s persists but %d changes were made in the last hour (budget %d)", hit, len(s.changes), s.o.MaxPerHour)
	}
	return hit, ""
}

// Verdict decides whether to keep an adaptation: the triggering finding
// gone, no new harmful finding, the interrupt time of the CPUs the trigger
// named lower (of the busiest CPU when it named none or no per-CPU times
// were kept), drops not higher and the user metric not worse, comparing
// the window after the change with the baseline before it.
func Verdict(trigger string, baseline, window []Observation, higherIsBetter bool) (keep bool, reason string) {
	keep, reason, _ = verdictRule(trigger, baseline, window, higherIsBetter, false)
	return keep, reason
}

// The rules of Verdict, as verdictRule names the one that did not keep an
// adaptation.
const (
	ruleNothing    = "nothing-measured"
	ruleStillHolds = "still-holds"
	ruleNew        = "new-finding"
	ruleDidNotFall = "did-not-fall"
	ruleDrops      = "drops"
	ruleMetric     = "user-metric"
)

// verdictRule is Verdict, naming the rule that did not keep (rule "" when
// kept). confirmed skips the rule a confirmed prediction answers (the
// trigger still holding: the model predicted the relief that was
// measured, though the finding's thresholds may still be crossed) and
// applies the others: the hot CPUs' interrupt time must still fall, and
// drops, new findings and the user metric judge what the model does not
// predict.
func verdictRule(trigger string, baseline, window []Observation, higherIsBetter, confirmed bool) (keep bool, reason, rule string) {
	if len(window) == 0 || len(baseline) == 0 {
		return false, "nothing measured", ruleNothing
	}
	// Judge the settled second half of the window.
	w := window[len(window)/2:]
	var hot []int
	for _, o := range baseline {
		for _, c := range o.FindingCPUs[trigger] {
			if !slices.Contains(hot, c) {
				hot = append(hot, c)
			}
		}
	}
	slices.Sort(hot)
	what := "busiest CPU's interrupt time"
	measure := func(o Observation) float64 { return o.Busiest }
	if len(hot) > 0 && len(baseline[0].IRQ) > 0 {
		what = fmt.Sprintf("interrupt time of CPU %s (the finding's)", cpuset.Of(hot...))
		measure = func(o Observation) float64 {
			m := 0.0
			for _, c := range hot {
				m = max(m, o.IRQ[c])
			}
			return m
		}
	}
	before, after := mean(baseline, measure), mean(w, measure)
	dropsBefore, dropsAfter := mean(baseline, func(o Observation) float64 { return o.Drops }), mean(w, func(o Observation) float64 { return o.Drops })
	held := 0
	for _, o := range w {
		if o.Findings[trigger] {
			held++
		}
	}
	if held*2 > len(w) && !confirmed {
		return false, fmt.Sprintf("%s still holds in %d of %d intervals", trigger, held, len(w)), ruleStillHolds
	}
	ids := map[string]bool{}
	for _, o := range w {
		maps.Copy(ids, o.Findings)
	}
	for _, id := range slices.Sorted(maps.Keys(ids)) {
		if id == trigger {
			continue
		}
		was := slices.ContainsFunc(baseline, func(o Observation) bool { return o.Findings[id] })
		n := 0
		for _, o := range w {
			if o.Findings[id] {
				n++
			}
		}
		if !was && n*2 > len(w) {
			return false, "new finding " + id, ruleNew
		}
	}
	if after >= before {
		return false, fmt.Sprintf("%s did not fall (%.1f%% → %.1f%%)", what, before, after), ruleDidNotFall
	}
	if dropsAfter > dropsBefore*1.05+1 {
		return false, fmt.Sprintf("softnet drops rose (%.0f/s → %.0f/s)", dropsBefore, dropsAfter), ruleDrops
	}
	mb, okb := meanMetric(baseline)
	ma, oka := meanMetric(w)
	if okb && oka {
		worse := ma > mb*1.05
		if higherIsBetter {
			worse = ma < mb*0.95
		}
		if worse {
			return false, fmt.Sprintf("user metric worse (%.4g → %.4g)", mb, ma), ruleMetric
		}
	}
	return true, fmt.Sprintf("%s gone; %s %.1f%% → %.1f%%; drops %.0f/s → %.0f/s", trigger, what, before, after, dropsBefore, dropsAfter), ""
}

func mean(os []Observation, f func(Observation) float64) float64 {
	var t float64
	for _, o := range os {
		t += f(o)
	}
	return t / float64(len(os))
}

func meanMetric(os []Observation) (float64, bool) {
	var t float64
	n := 0
	for _, o := range os {
		if o.Metric != nil {
			t += *o.Metric
			n++
		}
	}
	if n == 0 {
		return 0, false
	}
	return t / float64(n), true
}

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
