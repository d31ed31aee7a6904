package policy

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/diagnose"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/load"
	"github.com/irqpilot/irqpilot/internal/plan"
)

// Auto diagnoses, then plans. It changes only what measurements show is
// hurting, and with no evidence of harm it returns an empty plan that says
// why, with the numbers:
//
//  1. Evidence of harm, from the measured load (o.Load): a CPU
//     interrupt-bound while others have headroom, softnet drops or
//     squeezes, a loaded queue IRQ on a remote NUMA node, the application
//     on a saturated IRQ CPU (package diagnose's findings of severity warning
//     or worse); and, from the host alone, IRQs allowed on isolated or
//     nohz_full CPUs (the operator declared those CPUs off limits).
//  2. Candidates: every policy with its parameters (dedicated-core,
//     per-queue, colocate, rps-spread, the topology rule irqpilot used
//     before), RPS masks that leave the saturated CPU out, and the
//     application placed on the CPU RPS frees.
//  3. Each candidate's per-CPU load is predicted with the cost model
//     (model.go); candidates that break a rule (judge: work onto a CPU
//     without headroom, the busiest CPU busier, a CPU it loads above
//     Overload) are rejected, and the best score wins — if it beats doing
//     nothing by MinGain points.
//  4. The choice is decided again with each measured input 10 % higher and
//     lower (auto_robust.go); if that overturns it, it is marginal and the
//     plan is empty. The plan's Why gives the ranking with units, the
//     prediction and how sure it is.
//
// Without a measurement (a snapshot without --after) only the isolation
// rule can apply; otherwise the plan is empty and says it had no load to
// judge. With one, the isolation plan too must fit the measured headroom.
func Auto(h *host.Host, o Options) (*plan.Plan, error) {
	b, err := newBuilder(h, o, "auto")
	if err != nil {
		return nil, err
	}
	empty := func(why string) *plan.Plan {
		p := b.p
		p.Why = "auto: " + why
		return p
	}
	// Isolation: IRQs allowed on CPUs the operator isolated.
	if breach := isolationBreach(h, b); !breach.IsEmpty() {
		o2 := o
		if o2.Housekeeping.IsEmpty() {
			o2.Housekeeping = b.usable
		}
		p, err := DedicatedCore(h, o2)
		if err != nil {
			return nil, err
		}
		p.Policy = "dedicated-core"
		p.Why = fmt.Sprintf("auto chose dedicated-core: IRQs may run on isolated or nohz_full CPUs %s (the kernel command line declares them off limits), so every movable IRQ and all softirq work go to the housekeeping CPUs %s. %s",
			breach, o2.Housekeeping, capitalise(p.Why))
		if o.Load != nil && o.Load.Load != nil {
			// Measured: the housekeeping CPUs must have the headroom for
			// the work, on the measurement and on every disturbed copy.
			pred, stop := isolationHeadroom(h, b, o, p)
			if stop != "" {
				return empty(fmt.Sprintf("IRQs may run on isolated or nohz_full CPUs %s (the kernel command line declares them off limits), but moving them to the housekeeping CPUs %s now %s, so nothing is changed (%s)", breach, o2.Housekeeping, stop, loadSummary(o.Load.Load))), nil
			}
			p.Why += " " + pred
		}
		return p, nil
	}
	if o.Load == nil || o.Load.Load == nil {
		return empty("no load to judge — nothing is changed without a measurement (on the live machine `plan --policy auto` samples for a few seconds; on a snapshot give a second capture with --after)"), nil
	}
	l := o.Load.Load
	harm := Harm(h, l)
	if len(harm) == 0 {
		return empty("no evidence of harm, so nothing to change: " + loadSummary(l) + "; no CPU is interrupt-bound while others wait, no softnet drops or squeezes, no loaded IRQ on a remote node"), nil
	}
	a, err := newAutoRun(h, o, b, l, harm)
	if err != nil {
		return nil, err
	}
	d := a.decide(l)
	flips, tried := a.flips(l, d)
	findings := describeHarm(harm) + " [" + d.ranking() + "]"
	if o.App != "" {
		per := map[int]float64{}
		for _, pid := range d.m.selected {
			for c, v := range d.m.tasks[pid] {
				per[c] += v
			}
		}
		var use []string
		for _, c := range slices.Sorted(maps.Keys(per)) {
			use = append(use, fmt.Sprintf("%.0f%% on CPU%d", per[c], c))
		}
		if len(use) == 0 {
			use = []string{"no busy thread measured"}
		}
		findings += fmt.Sprintf(" [application %s: %s]", o.App, strings.Join(use, ", "))
	}
	sure := certainty(l)
	if d.best == nil {
		why := findings + "; " + d.why + ", so nothing is changed (" + loadSummary(l) + "; " + sure + ")"
		if len(flips) > 0 {
			// A "no change" another sample could overturn is as marginal
			// as a change it could: say so the way the agent reads it.
			p := b.p
			p.Why = fmt.Sprintf("%s the decision flips within ±%.0f %% of the measured load: %s; %s", MarginalWhy, 100*MarginalNoise, why, marginalNote(flips, tried, "no change"))
			return p, nil
		}
		return empty(why), nil
	}
	best := d.best
	cpus := d.shown(best.pred, a.hot)
	if len(flips) > 0 {
		// A choice that another sample of the same load could overturn is
		// not evidence enough to act on.
		p := b.p
		p.Why = fmt.Sprintf("%s %s: %s; the best candidate (%s: %s now → %s after) is not robust: %s, so nothing is changed (%s; %s)",
			MarginalWhy, fmt.Sprintf("the decision flips within ±%.0f %% of the measured load", 100*MarginalNoise),
			findings, best.name, describe(d.base, cpus), describe(best.pred, cpus), marginalNote(flips, tried, best.name), loadSummary(l), sure)
		return p, nil
	}
	p := best.p
	p.Policy = "auto"
	measure := "busiest interrupt-loaded CPU %.0f%% → %.0f%% busy"
	if d.separate {
		measure = "interrupt time taken from application threads %.0f%% → %.0f%% of a CPU (no CPU has headroom to spread onto, so the plan separates interrupt work from application work)"
	}
	warn := ""
	if best.warn != "" {
		warn = " Warning: " + best.warn + "."
	}
	p.Why = fmt.Sprintf("auto chose %s: %s. Predicted from the measurement (%s): %s now → %s after; "+measure+" (%d candidates compared, %d rejected; the choice holds with every measured input %.0f %% higher or lower, %d re-decisions).%s",
		best.name, findings, sure, describe(d.base, cpus), describe(best.pred, cpus), d.baseScore, best.s, len(d.cands), len(d.rejected), 100*MarginalNoise, tried, warn)
	return p, nil
}

// isolationHeadroom predicts the isolation plan p on the measured load:
// it returns the prediction for the why, or why p must wait — it would
// move work onto a CPU without headroom (judgeHeadroom), on the
// measurement or on a copy disturbed by MarginalNoise. (The other
// rules judge load balance, which is not what isolation is for.)
func isolationHeadroom(h *host.Host, b *builder, o Options, p *plan.Plan) (pred, stop string) {
	l := o.Load.Load
	ts, err := b.targets()
	if err != nil {
		return "", err.Error()
	}
	var steered []string
	for _, t := range ts {
		steered = append(steered, t.nic.Name)
	}
	check := func(l *load.Load) (Prediction, Prediction, string) {
		m := newModel(h, l, steered)
		m.selected = selectedPIDs(o)
		base, after := m.Predict(&plan.Plan{}), m.Predict(p)
		return base, after, judgeHeadroom(l, base, after)
	}
	base, after, why := check(l)
	if why != "" {
		return "", why
	}
	ps := perturbations(l)
	for _, d := range ps {
		if _, _, why := check(d.l); why != "" {
			return "", fmt.Sprintf("is marginal: with %s, it %s", d.what, why)
		}
	}
	var moved cpuset.Set
	for c, v := range after.Busy {
		if v-base.Busy[c] > moveEpsilon {
			moved = moved.Add(c)
		}
	}
	cpus := moved.CPUs()
	if len(cpus) > 8 {
		cpus = cpus[:8]
	}
	if len(cpus) == 0 {
		return fmt.Sprintf("Predicted from the measurement (%s): no CPU takes measurable work.", certainty(l)), ""
	}
	return fmt.Sprintf("Predicted from the measurement (%s): %s now → %s after; every CPU taking work has the headroom for it, also with each measured input %.0f %% higher or lower (%d re-checks).",
		certainty(l), describe(base, cpus), describe(after, cpus), 100*MarginalNoise, len(ps)), ""
}

// MarginalWhy starts the why of an empty auto plan whose best candidate
// does not survive MarginalNoise on some measured input: the agent
// reports such a plan as marginal and changes nothing.
const MarginalWhy = "auto: marginal —"

// IsMarginal reports whether p is auto's answer that the decision is
// marginal (see MarginalWhy).
func IsMarginal(p *plan.Plan) bool { return p != nil && strings.HasPrefix(p.Why, MarginalWhy) }

// autoCand is a candidate that passed the rules, with its prediction and
// score (lower is better; the unit depends on autoDecision.separate).
type autoCand struct {
	name string
	p    *plan.Plan
	pred Prediction
	s    float64
	// warn: predicted above Overload, accepted only because doing nothing
	// is predicted worse.
	warn string
}

// autoDecision is what decide concluded from one load.
type autoDecision struct {
	m         *model
	separate  bool
	base      Prediction
	baseScore float64
	cands     []autoCand // accepted, best first
	rejected  []namedWhy
	need      float64
	best      *autoCand // nil: no change
	why       string    // when best is nil
}

type namedWhy struct{ name, why string }

// spreadSpare is the spare time (percent of a CPU, diagnose.Headroom) that
// lets a CPU take spread interrupt work: with none such among the usable
// CPUs, auto judges plans by how they separate interrupt work from
// application work instead (every CPU is busy).
const spreadSpare = 10.0

// decide predicts every candidate on l, rejects those the rules forbid
// (judge), ranks the rest and picks the best if it beats doing nothing by
// the margin.
func (a *autoRun) decide(l *load.Load) *autoDecision {
	d := a.prepare(l)
	try := func(c namedPlan) {
		pred := d.m.Predict(c.p)
		warn, reject := judge(l, d.base, pred)
		if reject != "" {
			d.rejected = append(d.rejected, namedWhy{c.name, reject})
			return
		}
		d.cands = append(d.cands, autoCand{c.name, c.p, pred, d.score(pred, a.hot), warn})
	}
	for _, c := range a.fixed {
		try(c)
	}
	for _, c := range a.loadCandidates(l, d.m) {
		try(c)
	}
	sort.SliceStable(d.cands, func(i, j int) bool { return d.cands[i].s < d.cands[j].s })
	switch {
	case len(d.cands) == 0 && len(d.rejected) > 0:
		r := d.rejected[0]
		d.why = fmt.Sprintf("every candidate breaks a rule (%d rejected; first, %s: %s)", len(d.rejected), r.name, r.why)
	case len(d.cands) == 0:
		d.why = "no candidate applies"
	case d.baseScore-d.cands[0].s < d.need:
		d.why = fmt.Sprintf("the best candidate (%s) is predicted to improve %s only from %s to %s, less than the %.0f points worth a change",
			d.cands[0].name, d.scoreName(), d.scoreText(d.baseScore), d.scoreText(d.cands[0].s), d.need)
	default:
		d.best = &d.cands[0]
	}
	return d
}

func (d *autoDecision) score(p Prediction, hot cpuset.Set) float64 {
	if d.separate {
		return contention(p)
	}
	return spreadScore(p, hot)
}

// prepare is the part of a decision that does not depend on the
// candidates: the model of l, the prediction of doing nothing, how plans
// are scored and the margin a change must beat.
func (a *autoRun) prepare(l *load.Load) *autoDecision {
	m := newModel(a.h, l, a.steered)
	m.selected = selectedPIDs(a.o)
	d := &autoDecision{m: m, base: m.Predict(&plan.Plan{})}
	d.separate = diagnose.WithHeadroom(l, a.b.usable, spreadSpare).IsEmpty()
	d.baseScore = d.score(d.base, a.hot)
	d.need = MinGain
	if d.separate && !diagnose.SaturatedCPUs(l).IsEmpty() {
		// A CPU saturated mostly by interrupt work and no idle CPU
		// anywhere — harm beyond doubt; a change that takes MinGain/2
		// points of interrupt work off application CPUs is worth making.
		// (Other harm on a busy machine — drops, a remote node — needs
		// the full margin.)
		d.need = MinGain / 2
	}
	return d
}

// scoreName and scoreText say what the score measures, with its unit.
func (d *autoDecision) scoreName() string {
	if d.separate {
		return "the interrupt time taken from application threads"
	}
	return "the busiest interrupt-loaded CPU's busy time"
}

func (d *autoDecision) scoreText(s float64) string {
	if d.separate {
		return fmt.Sprintf("%.0f%% of a CPU", s)
	}
	return fmt.Sprintf("%.0f%% busy", s)
}

// ranking is the comparison in one line, every number with its unit.
func (d *autoDecision) ranking() string {
	one := func(name string, s float64, p Prediction) string {
		bc, bb := p.Max()
		ic, ib := maxOf(p.IRQ)
		return fmt.Sprintf("%s: %s (busiest CPU%d %.0f%% busy, CPU%d %.0f%% in interrupts)", name, d.scoreText(s), bc, bb, ic, ib)
	}
	out := fmt.Sprintf("ranked by %s, predicted — %s", d.scoreName(), one("no change", d.baseScore, d.base))
	for i, c := range d.cands {
		if i == 4 {
			break
		}
		out += "; " + one(c.name, c.s, c.pred)
	}
	if n := len(d.rejected); n > 0 {
		out += fmt.Sprintf("; rejected %d, e.g. %s: %s", n, d.rejected[0].name, d.rejected[0].why)
	}
	return out
}

// shown are the CPUs a why describes: the hot ones and those the plan
// changes by a point or more.
func (d *autoDecision) shown(pred Prediction, hot cpuset.Set) []int {
	s := hot
	for c, v := range pred.Busy {
		if diff := v - d.base.Busy[c]; diff >= 1 || diff <= -1 {
			s = s.Add(c)
		}
	}
	cpus := s.CPUs()
	if len(cpus) > 8 {
		cpus = cpus[:8]
	}
	return cpus
}

// certainty says how sure the prediction is: what the interrupt times it
// starts from are.
func certainty(l *load.Load) string {
	if l.CostSource == load.CostBPF {
		return "interrupt time measured per IRQ and softirq by the eBPF collector"
	}
	return "interrupt time estimated from interrupt counts, without the eBPF collector's measurement, so the prediction is rougher"
}

func maxOf(m map[int]float64) (int, float64) {
	cpu, best := -1, -1.0
	for _, c := range slices.Sorted(maps.Keys(m)) {
		if m[c] > best {
			cpu, best = c, m[c]
		}
	}
	return cpu, best
}

// loadSummary is the measurement in one line: the busiest CPUs' split.
func loadSummary(l *load.Load) string {
	cpus := append([]load.CPULoad(nil), l.CPUs...)
	sort.Slice(cpus, func(i, j int) bool { return cpus[i].Busy() > cpus[j].Busy() })
	var parts []string
	for i, c := range cpus {
		if i == 3 {
			break
		}
		parts = append(parts, fmt.Sprintf("CPU%d %.0f%% busy (%.0f%% irq+softirq, %.0f%% idle)", c.ID, c.Busy(), c.IRQTime(), c.Idle))
	}
	var drops, squeeze float64
	for _, s := range l.Softnet {
		drops += s.Dropped
		squeeze += s.TimeSqueeze
	}
	return fmt.Sprintf("over %.1f s: %s; softnet %.0f drops/s, %.0f squeezes/s", l.Interval.Seconds(), strings.Join(parts, ", "), drops, squeeze)
}

func capitalise(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
