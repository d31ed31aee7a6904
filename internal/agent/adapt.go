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
	// load breaks the headroom rules, policy.Violation: not applied), "failed".
	Result   string   `json:"result"`
	Reason   string   `json:"reason"`
	Policy   string   `json:"policy,omitempty"`
	Why      string   `json:"why,omitempty"`
	Journals []string `json:"journals,omitempty"`
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
	if len(window) == 0 || len(baseline) == 0 {
		return false, "nothing measured"
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
	if held*2 > len(w) {
		return false, fmt.Sprintf("%s still holds in %d of %d intervals", trigger, held, len(w))
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
			return false, "new finding " + id
		}
	}
	if after >= before {
		return false, fmt.Sprintf("%s did not fall (%.1f%% → %.1f%%)", what, before, after)
	}
	if dropsAfter > dropsBefore*1.05+1 {
		return false, fmt.Sprintf("softnet drops rose (%.0f/s → %.0f/s)", dropsBefore, dropsAfter)
	}
	mb, okb := meanMetric(baseline)
	ma, oka := meanMetric(w)
	if okb && oka {
		worse := ma > mb*1.05
		if higherIsBetter {
			worse = ma < mb*0.95
		}
		if worse {
			return false, fmt.Sprintf("user metric worse (%.4g → %.4g)", mb, ma)
		}
	}
	return true, fmt.Sprintf("%s gone; %s %.1f%% → %.1f%%; drops %.0f/s → %.0f/s", trigger, what, before, after, dropsBefore, dropsAfter)
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
	if m, err := ag.userMetric(); err == nil {
		ob.Metric = &m
	} else if err != errNoMetric {
		ag.log.Warn("user metric", "error", err)
	}
	now := time.Now()
	if s.cur != nil {
		s.window = append(s.window, ob)
		if len(s.window) < s.o.Window {
			return
		}
		keep, reason := Verdict(s.cur.Finding, s.baseline, s.window, s.o.HigherIsBetter)
		s.cur.Journals = slices.Clone(s.journals)
		if keep {
			s.cur.Result, s.cur.Reason = "kept", reason
			ag.prevPlan = nil
			ag.log.Info("adaptation kept", "finding", s.cur.Finding, "why", reason)
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
			if ag.m != nil {
				ag.m.AdaptationsReverted.Inc()
			}
			ag.log.Warn("adaptation reverted", "finding", s.cur.Finding, "why", reason)
		}
		ag.adaptations[len(ag.adaptations)-1] = *s.cur
		s.cur, s.window, s.baseline, s.journals = nil, nil, nil, nil
		s.streak = map[string]int{}
		return
	}
	hit, held := s.trigger(now, ob)
	if held != "" {
		ag.log.Debug("adapt: holding", "why", held)
	}
	if hit == "" {
		return
	}
	h := ag.hostModel.Load()
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
	a.Result, a.Reason = "verifying", fmt.Sprintf("%s held for %d intervals", hit, s.o.Persist)
	s.cur = &a
	s.baseline = slices.Clone(s.history)
	s.window, s.journals = nil, nil
	s.last = now
	s.changes = append(s.changes, now)
	if ag.prevPlan == nil {
		ag.prevPlan = ag.pl
	}
	ag.pl = p
	ag.needResolve = true
	ag.established = map[string]bool{}
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
