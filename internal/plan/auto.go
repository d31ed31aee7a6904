package plan

import (
	"fmt"
	"sort"
	"strings"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/load"
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
//     (model.go); candidates that overload a CPU are rejected, and the one
//     with the lowest predicted busiest interrupt-loaded CPU wins — if it
//     beats doing nothing by MinGain points. The plan's Why gives the
//     prediction.
//
// Without a measurement (a snapshot without --after) only the isolation
// rule can apply; otherwise the plan is empty and says it had no load to
// judge.
func Auto(h *host.Host, o Options) (*Plan, error) {
	b, err := newBuilder(h, o, "auto")
	if err != nil {
		return nil, err
	}
	empty := func(why string) *Plan {
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
	ts, err := b.targets()
	if err != nil {
		return nil, err
	}
	var steered []string
	for _, t := range ts {
		steered = append(steered, t.nic.Name)
	}
	m := newModel(h, l, steered)
	m.selected = selectedPIDs(o)
	base := m.Predict(&Plan{})
	hot := hotCPUs(harm)
	// With headroom somewhere, a plan is judged by its busiest
	// interrupt-loaded CPU (spread the work); with every CPU busy, by how
	// much interrupt work shares CPUs with application work (separate it).
	separate := !hasHeadroom(l, b.usable)
	score := func(p Prediction) float64 {
		if separate {
			return contention(p)
		}
		return spreadScore(p, hot)
	}
	baseScore := score(base)

	type cand struct {
		name string
		p    *Plan
		pred Prediction
		s    float64
	}
	var cands []cand
	add := func(name string, p *Plan, err error) {
		if err != nil || p == nil || Check(p) != nil {
			return
		}
		if len(o.Devices) > 0 {
			ScopeToDevices(p, h, o.Devices, o.MachineWide)
		}
		pred := m.Predict(p)
		if _, mx := pred.Max(); !separate && mx > Overload && mx > maxBusy(base) {
			return // would saturate a CPU the measurement did not
		}
		for _, v := range pred.IRQ {
			if v > Overload {
				return // interrupt work alone would saturate a CPU
			}
		}
		cands = append(cands, cand{name, p, pred, score(pred)})
	}
	for _, pol := range []struct {
		name string
		f    Policy
	}{{"rps-spread", RPSSpread}, {"per-queue", PerQueue}, {"colocate", Colocate}, {"dedicated-core", DedicatedCore}} {
		p, err := pol.f(h, o)
		add(pol.name, p, err)
	}
	if p, err := topologyChoice(h, o); err == nil {
		add("topology rule ("+p.Policy+")", p, nil)
	}
	// RPS away from each hot CPU, with the application on the freed CPU.
	for _, c := range hot.CPUs() {
		away := b.usable.Difference(cpuset.Of(c))
		if away.IsEmpty() {
			continue
		}
		for _, t := range ts {
			if !t.steer {
				continue
			}
			p := rpsPlan(b, t, away, fmt.Sprintf("RPS keeps protocol work off CPU %d, which the measurement shows interrupt-bound", c))
			add(fmt.Sprintf("RPS for %s on CPUs %s", t.nic.Name, away), p, nil)
			if app, ok := appEntry(o, m); ok && p != nil {
				q := rpsPlan(b, t, away, fmt.Sprintf("RPS keeps protocol work off CPU %d, which the measurement shows interrupt-bound", c))
				app.CPUs = cpuset.Of(c)
				app.Reason = fmt.Sprintf("the application takes CPU %d, which RPS frees from protocol work, next to where its packets arrive", c)
				q.Apps = append(q.Apps, app)
				add(fmt.Sprintf("RPS for %s on CPUs %s, application on CPU %d", t.nic.Name, away, c), q, nil)
			}
		}
	}
	napiThreadedCandidates(b, ts, l, hot, add) // threaded NAPI placed off the saturated CPU (auto_napi.go)
	sort.SliceStable(cands, func(i, j int) bool { return cands[i].s < cands[j].s })
	findings := describeHarm(harm)
	var ranked []string
	for i, c := range cands {
		if i == 4 {
			break
		}
		ranked = append(ranked, fmt.Sprintf("%s %.0f", c.name, c.s))
	}
	findings += fmt.Sprintf(" [no change %.0f; best candidates: %s]", baseScore, strings.Join(ranked, ", "))
	if o.App != "" {
		per := map[int]float64{}
		for _, pid := range m.selected {
			for c, v := range m.tasks[pid] {
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
	need := MinGain
	if separate && !saturatedCPUs(l).IsEmpty() {
		// A CPU saturated mostly by interrupt work and no idle CPU
		// anywhere — harm beyond doubt; a change that takes MinGain/2
		// points of interrupt work off application CPUs is worth making.
		// (Other harm on a busy machine — drops, a remote node — needs
		// the full margin.)
		need = MinGain / 2
	}
	if len(cands) == 0 || baseScore-cands[0].s < need {
		why := "no candidate is predicted to help enough"
		if len(cands) > 0 {
			why = fmt.Sprintf("the best candidate (%s) is predicted to improve the score only from %.0f to %.0f, less than the %.0f points worth a change", cands[0].name, baseScore, cands[0].s, need)
		}
		return empty(findings + "; " + why + ", so nothing is changed (" + loadSummary(l) + ")"), nil
	}
	best := cands[0]
	p := best.p
	p.Policy = "auto"
	cpus := hot.CPUs()
	measure := "busiest interrupt-loaded CPU %.0f%% → %.0f%% busy"
	if separate {
		measure = "interrupt work sharing CPUs with application work %.0f → %.0f points (every CPU is busy, so the plan separates them rather than spreads)"
	}
	p.Why = fmt.Sprintf("auto chose %s: %s. Predicted from the measurement (interrupt time %s): %s now → %s after; "+measure+" (%d candidates compared).",
		best.name, findings, load.CostDescription(l.CostSource), describe(base, cpus), describe(best.pred, cpus), baseScore, best.s, len(cands))
	return p, nil
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

// hasHeadroom: some usable CPU was at least OthersIdlePct idle.
func hasHeadroom(l *load.Load, usable cpuset.Set) bool {
	for _, c := range l.CPUs {
		if usable.Contains(c.ID) && !c.NoTicks && c.Idle >= load.OthersIdlePct {
			return true
		}
	}
	return false
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
	for c, busy := range p.Busy {
		irq := p.IRQ[c]
		sum += min(irq, busy-irq) * saturation(busy)
		if busy > 100 {
			sum += (busy - 100) * OverloadWeight
		}
	}
	return sum
}

// saturation is 0 for a CPU at most 80 % busy, 1 from Overload (95 %) up,
// linear between: how much of its interrupt work is taken from its threads.
func saturation(busy float64) float64 {
	const free = 80.0
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
func rpsPlan(b *builder, t *target, cpus cpuset.Set, why string) *Plan {
	p := &Plan{Version: Version, Policy: "auto", Host: b.h.Hostname}
	qs := len(t.nic.RxQueues)
	if qs == 0 {
		return nil
	}
	entries := floorPow2(min(32768, maxSockFlowEntries))
	p.RPSSockFlowEntries = &SockFlowEntry{Value: entries, Reason: "RFS steers each flow to the CPU of the thread that reads it"}
	cnt := flowCnt(entries, qs)
	for _, rq := range t.nic.RxQueues {
		c := cpus
		n := cnt
		p.RxQueues = append(p.RxQueues, RxQueueEntry{Device: t.nic.Name, Queue: ptr(rq.Index), RPSCPUs: &c, RPSFlowCnt: &n, Reason: why})
	}
	return p
}

// selectedPIDs are the processes o.App stands for: N of "pid:N", else
// what the caller resolved (Options.AppPIDs).
func selectedPIDs(o Options) []int {
	if e, err := ParseAppSelector(o.App); err == nil && e.PID != 0 {
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
func appEntry(o Options, m *model) (AppEntry, bool) {
	if o.App == "" {
		return AppEntry{}, false
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
		return AppEntry{}, false
	}
	e, err := ParseAppSelector(o.App)
	if err != nil {
		return AppEntry{}, false
	}
	e.All = e.Comm != "" && len(m.selected) > 1 // the caller accepted several (plan --all)
	return e, true
}

// isolationBreach is the isolated/nohz_full CPUs some movable IRQ may run
// on (its affinity reaches them) — but only when some IRQ is movable at
// all and usable CPUs exist to move it to.
func isolationBreach(h *host.Host, b *builder) cpuset.Set {
	iso := b.banned.Intersect(b.v.online)
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
