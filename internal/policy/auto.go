package policy

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/load"
	"github.com/irqpilot/irqpilot/internal/plan"
	"github.com/irqpilot/irqpilot/internal/setting"
)

// Auto diagnoses, then plans. It changes only what measurements show is
// hurting, and with no evidence of harm it returns an empty plan that says
// why, with the numbers:
//
//  1. Evidence of harm, from the measured load (o.Load): a CPU
//     interrupt-bound while others have headroom, softnet drops or
//     squeezes, a loaded queue IRQ on a remote NUMA node, the application
//     on a saturated IRQ CPU (package load's findings of severity warning
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
		for _, c := range sortedCPUs(per) {
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
			why += "; " + marginalNote(flips, tried, "no change")
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
			MarginalWhy, fmt.Sprintf("the decision flips within ±%.0f %% of the measured load", 100*load.MarginalNoise),
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
		best.name, findings, sure, describe(d.base, cpus), describe(best.pred, cpus), d.baseScore, best.s, len(d.cands), len(d.rejected), 100*load.MarginalNoise, tried, warn)
	return p, nil
}

// isolationHeadroom predicts the isolation plan p on the measured load:
// it returns the prediction for the why, or why p must wait — it would
// move work onto a CPU without headroom (judgeHeadroom), on the
// measurement or on a copy disturbed by load.MarginalNoise. (The other
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
		certainty(l), describe(base, cpus), describe(after, cpus), 100*load.MarginalNoise, len(ps)), ""
}

// MarginalWhy starts the why of an empty auto plan whose best candidate
// does not survive load.MarginalNoise on some measured input: the agent
// reports such a plan as marginal and changes nothing.
const MarginalWhy = "auto: marginal —"

// IsMarginal reports whether p is auto's answer that the decision is
// marginal (see MarginalWhy).
func IsMarginal(p *plan.Plan) bool { return p != nil && strings.HasPrefix(p.Why, MarginalWhy) }

// autoRun holds what one auto decision rests on besides the measured
// numbers: the host, the options, the devices to steer, the CPUs the
// evidence of harm names, and the candidates that do not depend on the
// load (the policies and the topology rule). decide can then be repeated
// on a disturbed copy of the load (flips) at the cost of the model alone.
type autoRun struct {
	h       *host.Host
	o       Options
	b       *builder
	ts      []*target
	steered []string
	hot     cpuset.Set
	// sat: the hot CPUs the measurement shows saturated.
	sat   cpuset.Set
	fixed []namedPlan
}

func newAutoRun(h *host.Host, o Options, b *builder, l *load.Load, harm []load.Finding) (*autoRun, error) {
	ts, err := b.targets()
	if err != nil {
		return nil, err
	}
	a := &autoRun{h: h, o: o, b: b, ts: ts, hot: hotCPUs(harm)}
	a.sat = saturatedHot(b, l, a.hot)
	for _, t := range ts {
		a.steered = append(a.steered, t.nic.Name)
	}
	for _, pol := range []struct {
		name string
		f    Policy
	}{{"rps-spread", RPSSpread}, {"per-queue", PerQueue}, {"colocate", Colocate}, {"dedicated-core", DedicatedCore}} {
		if p, err := pol.f(h, o); err == nil {
			a.keep(&a.fixed, pol.name, p)
		}
	}
	if p, err := topologyChoice(h, o); err == nil {
		a.keep(&a.fixed, "topology rule ("+p.Policy+")", p)
	}
	return a, nil
}

// keep appends p to list as a candidate when it checks, scoped to the
// devices auto was told to steer.
func (a *autoRun) keep(list *[]namedPlan, name string, p *plan.Plan) {
	if p == nil || plan.Check(p) != nil {
		return
	}
	if len(a.o.Devices) > 0 {
		plan.ScopeToDevices(p, a.h, a.o.Devices, a.o.MachineWide)
	}
	*list = append(*list, namedPlan{name, p})
}

// loadCandidates are the candidates built from the measurement: RPS away
// from each hot CPU — onto every other usable CPU, and onto those of them
// with headroom — with and without the application on the freed CPU, and
// threaded NAPI placed off the saturated CPU (auto_napi.go).
func (a *autoRun) loadCandidates(l *load.Load, m *model) []namedPlan {
	var out []namedPlan
	for _, c := range a.hot.CPUs() {
		away := a.b.usable.Difference(cpuset.Of(c))
		sets := []cpuset.Set{away}
		if spare := l.WithHeadroom(away, 0); !spare.IsEmpty() && !spare.Equal(away) {
			sets = append(sets, spare)
		}
		for _, to := range sets {
			if to.IsEmpty() {
				continue
			}
			for _, t := range a.ts {
				if !t.steer {
					continue
				}
				why := fmt.Sprintf("RPS keeps protocol work off CPU %d, which the measurement shows interrupt-bound", c)
				p := rpsPlan(a.b, t, to, why)
				a.keep(&out, fmt.Sprintf("RPS for %s on CPUs %s", t.nic.Name, to), p)
				if app, ok := appEntry(a.o, m); ok && p != nil {
					q := rpsPlan(a.b, t, to, why)
					app.CPUs = cpuset.Of(c)
					app.Reason = fmt.Sprintf("the application takes CPU %d, which RPS frees from protocol work, next to where its packets arrive", c)
					q.Apps = append(q.Apps, app)
					a.keep(&out, fmt.Sprintf("RPS for %s on CPUs %s, application on CPU %d", t.nic.Name, to, c), q)
				}
			}
		}
	}
	for _, c := range napiThreadedPlansOff(a.b, a.ts, l, a.sat) {
		a.keep(&out, c.name, c.p)
	}
	return out
}

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

// spreadSpare is the spare time (percent of a CPU, load.Headroom) that
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
	d.separate = l.WithHeadroom(a.b.usable, spreadSpare).IsEmpty()
	d.baseScore = d.score(d.base, a.hot)
	d.need = MinGain
	if d.separate && !saturatedCPUs(l).IsEmpty() {
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

// moveEpsilon is the predicted gain, in percent of a CPU, below which a
// CPU is not taking work (the model's rounding).
const moveEpsilon = 0.05

// judge applies the rules every candidate must pass, on the measured load
// l, the prediction of no change and the candidate's:
//
//  1. Headroom (load.Headroom): every CPU predicted to take work must have
//     the measured spare time for it — busy after at most
//     load.HeadroomBusyMaxPct.
//  2. No CPU the candidate adds interrupt work to predicted to spend more
//     than Overload in interrupts.
//  3. The busiest CPU is never predicted busier than with no change.
//  4. No CPU the candidate changes predicted above Overload (saturated) —
//     unless doing nothing is predicted worse there (the CPU is saturated
//     now and the candidate lowers it): then the candidate stays, with a
//     warning. A saturated CPU the candidate does not touch is not its
//     doing and does not count.
func judge(l *load.Load, base, pred Prediction) (warn, reject string) {
	if why := judgeHeadroom(l, base, pred); why != "" {
		return "", why
	}
	return judgeLoad(base, pred)
}

// judgeHeadroom is rule 1 of judge: "" when every CPU predicted to take
// work has the measured headroom for it.
func judgeHeadroom(l *load.Load, base, pred Prediction) string {
	for _, c := range sortedCPUs(pred.Busy) {
		gain := pred.Busy[c] - base.Busy[c]
		if gain <= moveEpsilon {
			continue
		}
		hr := l.Headroom(c)
		if after, ok := hr.Fits(gain); !ok {
			if !hr.Measured {
				return fmt.Sprintf("moves %.1f%% of a CPU onto CPU %d, whose load was not measured", gain, c)
			}
			return fmt.Sprintf("moves %.1f%% of a CPU onto CPU %d (%s), %.0f%% busy after, above the %.0f%% a CPU may be filled to", gain, c, hr, after, load.HeadroomBusyMaxPct)
		}
	}
	return ""
}

// judgeLoad is rules 2-4 of judge.
func judgeLoad(base, pred Prediction) (warn, reject string) {
	for _, c := range sortedCPUs(pred.IRQ) {
		if pred.IRQ[c] > Overload && pred.IRQ[c] > base.IRQ[c]+moveEpsilon {
			return "", fmt.Sprintf("interrupt work alone predicted to saturate CPU %d (%.0f%%)", c, pred.IRQ[c])
		}
	}
	bc, bmx := base.Max()
	pc, pmx := pred.Max()
	if pmx > bmx+moveEpsilon {
		return "", fmt.Sprintf("raises the busiest CPU from CPU%d %.0f%% to CPU%d %.0f%% busy", bc, bmx, pc, pmx)
	}
	// Saturated after the change: a CPU the candidate loads is rejected;
	// one it relieves, but not enough, stays with a warning (doing nothing
	// is predicted worse there); one it does not touch is not its doing.
	for _, c := range sortedCPUs(pred.Busy) {
		v, was := pred.Busy[c], base.Busy[c]
		switch {
		case v <= Overload:
		case v > was+moveEpsilon:
			return "", fmt.Sprintf("predicts CPU%d %.0f%% busy (now %.0f%%), above the %.0f%% at which a CPU counts as saturated", c, v, was, Overload)
		case v < was-moveEpsilon && warn == "":
			warn = fmt.Sprintf("CPU%d is still predicted %.0f%% busy, above the %.0f%% at which a CPU counts as saturated; the change is kept because doing nothing is predicted worse (CPU%d %.0f%% busy)", c, v, Overload, c, was)
		}
	}
	return warn, ""
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
	for _, c := range sortedCPUs(m) {
		if m[c] > best {
			cpu, best = c, m[c]
		}
	}
	return cpu, best
}

// harmIDs are the findings that are evidence of harm when their severity
// is warning or worse.
var harmIDs = map[string]bool{load.IDInterruptBound: true, load.IDSoftnetDrops: true, load.IDSoftnetSqueeze: true,
	load.IDIRQRemoteNUMA: true, load.IDAppOnIRQCPU: true}

func harmful(fs []load.Finding) []load.Finding {
	var out []load.Finding
	for _, f := range fs {
		if harmIDs[f.ID] && f.Severity.AtLeast(load.Warning) {
			out = append(out, f)
		}
	}
	return out
}

func hotCPUs(fs []load.Finding) cpuset.Set {
	var s cpuset.Set
	for _, f := range fs {
		if f.ID == load.IDInterruptBound || f.ID == load.IDSoftnetDrops || f.ID == load.IDSoftnetSqueeze || f.ID == load.IDAppOnIRQCPU {
			s = s.Add(f.CPUs...)
		}
	}
	return s
}

func describeHarm(fs []load.Finding) string {
	var parts []string
	for _, f := range fs {
		parts = append(parts, f.Summary)
	}
	return strings.Join(parts, "; ")
}

// saturatedCPUs are the CPUs at most BoundIdlePct idle with at least
// CriticalIRQPct in interrupts.
func saturatedCPUs(l *load.Load) cpuset.Set {
	var s cpuset.Set
	for i := range l.CPUs {
		// Interrupt time as load's own interrupt-bound rule judges it
		// (measured with the eBPF collector, else from /proc/stat).
		if c := &l.CPUs[i]; !c.NoTicks && c.Idle <= load.BoundIdlePct && l.CostPct(c) >= load.CriticalIRQPct {
			s = s.Add(c.ID)
		}
	}
	return s
}

// OverloadWeight is what a point of predicted application overload (two
// busy threads sharing one CPU) costs against a point of interrupt work
// sharing a CPU with application work. Application threads that read as
// fast as data arrives fill whatever CPU they get, so their measured time
// overstates their need: on the seed-004 scenario here, the consumer moved
// beside the sender (a predicted 140 % on CPU 0) with RPS taking the
// softirq to CPU 1 gave 1.29x the throughput (docs/benchmarks.md).
const OverloadWeight = 0.25

// contention is how much interrupt work takes CPU time from application
// work: per CPU the smaller of the two, counted in full on a CPU predicted
// saturated and not at all on one with a fifth or more idle (softirq runs
// before any thread, so it starves the threads beside it only when the CPU
// has no time to spare; the CPU's other work — measured or not — waits
// instead), summed, plus OverloadWeight of any predicted application
// overload. Counting contention on CPUs with idle time made auto keep
// seed 004's saturated CPU 0 when the sink's CPU showed work it could not
// attribute (CI, a race-built helper): RPS plus the consumer beside the
// sender, 1.29x here, scored no better than no change.
func contention(p Prediction) float64 {
	var sum float64
	for _, c := range sortedCPUs(p.Busy) {
		busy, irq := p.Busy[c], p.IRQ[c]
		sum += min(irq, busy-irq) * saturation(busy)
		if busy > 100 {
			sum += (busy - 100) * OverloadWeight
		}
	}
	return sum
}

// saturation is 0 for a CPU at most load.HeadroomBusyMaxPct (80 %) busy, 1 from Overload (95 %) up,
// linear between: how much of its interrupt work is taken from its threads.
func saturation(busy float64) float64 {
	const free = load.HeadroomBusyMaxPct
	switch {
	case busy <= free:
		return 0
	case busy >= Overload:
		return 1
	}
	return (busy - free) / (Overload - free)
}

// spreadScore is the predicted busy percent of the busiest CPU among the
// hot CPUs and every CPU with interrupt work: what the plan is judged by
// when some CPU has time to spare.
func spreadScore(p Prediction, hot cpuset.Set) float64 {
	best := 0.0
	for c, b := range p.Busy {
		if hot.Contains(c) || p.IRQ[c] >= 5 {
			best = max(best, b)
		}
	}
	return best
}

func maxBusy(p Prediction) float64 { _, m := p.Max(); return m }

// rpsPlan steers every rx queue of t onto cpus (with RFS).
func rpsPlan(b *builder, t *target, cpus cpuset.Set, why string) *plan.Plan {
	p := &plan.Plan{Version: plan.Version, Policy: "auto", Host: b.h.Hostname}
	qs := len(t.nic.RxQueues)
	if qs == 0 {
		return nil
	}
	entries := floorPow2(min(32768, setting.MaxSockFlowEntries))
	p.RPSSockFlowEntries = &plan.SockFlowEntry{Value: entries, Reason: "RFS steers each flow to the CPU of the thread that reads it"}
	cnt := flowCnt(entries, qs)
	for _, rq := range t.nic.RxQueues {
		c := cpus
		n := cnt
		p.RxQueues = append(p.RxQueues, plan.RxQueueEntry{Device: t.nic.Name, Queue: ptr(rq.Index), RPSCPUs: &c, RPSFlowCnt: &n, Reason: why})
	}
	return p
}

// selectedPIDs are the processes o.App stands for: N of "pid:N", else
// what the caller resolved (Options.AppPIDs).
func selectedPIDs(o Options) []int {
	if e, err := plan.ParseAppSelector(o.App); err == nil && e.PID != 0 {
		return []int{e.PID}
	}
	return o.AppPIDs
}

// oneCPU is the most measured CPU use (percent) that counts as one CPU's
// worth of application work (per-task times and the interval are sampled
// a little apart, so a saturated thread can read slightly above 100).
const oneCPU = 105.0

// appEntry is the application entry for o.App (its selector, so a plan
// kept by the agent still finds the application after a restart), when
// the measurement saw its threads busy, together within one CPU.
func appEntry(o Options, m *model) (plan.AppEntry, bool) {
	if o.App == "" {
		return plan.AppEntry{}, false
	}
	total := 0.0
	for _, pid := range m.selected {
		for _, v := range m.tasks[pid] {
			total += v
		}
	}
	// Nothing measured, or more than one CPU's worth: the candidate moves
	// the whole application onto one CPU, so it must fit there (a comm:
	// or unit: selector may stand for many busy workers). One thread that
	// fills its CPU — a consumer reading as fast as data arrives, 96–100 %
	// busy — is one CPU's worth, not more: the margin is for sampling skew.
	if total == 0 || total > oneCPU {
		return plan.AppEntry{}, false
	}
	e, err := plan.ParseAppSelector(o.App)
	if err != nil {
		return plan.AppEntry{}, false
	}
	e.All = e.Comm != "" && len(m.selected) > 1 // the caller accepted several (plan --all)
	return e, true
}

// isolationBreach is the isolated/nohz_full CPUs some movable IRQ may run
// on (its affinity reaches them) — but only when some IRQ is movable at
// all and usable CPUs exist to move it to.
func isolationBreach(h *host.Host, b *builder) cpuset.Set {
	iso := b.banned.Intersect(b.v.Online)
	if iso.IsEmpty() {
		return cpuset.Set{}
	}
	var out cpuset.Set
	for _, q := range h.IRQs {
		if !q.Movable() || q.Affinity == nil {
			continue
		}
		out = out.Union(q.Affinity.Intersect(iso))
	}
	return out
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

// Violation predicts plan p on the measured load l with auto's model and
// returns the rule of auto's it breaks ("" when none): work moved onto a
// CPU without headroom, interrupt work alone saturating a CPU, the
// busiest CPU predicted busier, or a CPU it loads predicted saturated.
// o names the devices steered and the application, as for Auto (with
// AppPIDs for a selector without a PID). The agent checks every plan a
// planner gives it with this before applying it.
func Violation(h *host.Host, l *load.Load, p *plan.Plan, o Options) string {
	if l == nil || p == nil {
		return ""
	}
	b, err := newBuilder(h, o, "auto")
	if err != nil {
		return err.Error()
	}
	ts, err := b.targets()
	if err != nil {
		return err.Error()
	}
	var steered []string
	in := map[string]bool{}
	for _, t := range ts {
		steered = append(steered, t.nic.Name)
		in[t.nic.Name] = true
	}
	// The model predicts only the steered devices' work: a plan that
	// changes another device cannot be judged, so it is refused rather
	// than counted as moving nothing.
	var outside []string
	note := func(dev string) {
		if dev != "" && !in[dev] && !slices.Contains(outside, dev) {
			outside = append(outside, dev)
		}
	}
	for _, e := range p.IRQs {
		if e.IRQ != nil {
			if q := h.IRQ(*e.IRQ); q != nil && q.Class == host.ClassNetwork {
				note(q.Device)
			}
		}
		note(e.Device)
	}
	for _, e := range p.RxQueues {
		note(e.Device)
	}
	for _, e := range p.TxQueues {
		note(e.Device)
	}
	for _, e := range p.NAPI {
		note(e.Device)
	}
	if len(outside) > 0 {
		return fmt.Sprintf("it changes %s, outside the devices the model predicts (%s): cannot judge its load", strings.Join(outside, ", "), strings.Join(steered, ", "))
	}
	m := newModel(h, l, steered)
	m.selected = selectedPIDs(o)
	_, why := judge(l, m.Predict(&plan.Plan{}), m.Predict(p))
	return why
}
