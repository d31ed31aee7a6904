package policy

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/diagnose"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/load"
	"github.com/irqpilot/irqpilot/internal/plan"
)

// The rules a plan's predicted load must pass (judge), the scores auto
// ranks candidates by (contention, spreadScore), and Violation: the same
// rules applied to a plan someone else made.

// moveEpsilon is the predicted gain, in percent of a CPU, below which a
// CPU is not taking work (the model's rounding).
const moveEpsilon = 0.05

// judge applies the rules every candidate must pass, on the measured load
// l, the prediction of no change and the candidate's:
//
//  1. Headroom (diagnose.Headroom): every CPU predicted to take work must have
//     the measured spare time for it — busy after at most
//     diagnose.HeadroomBusyMaxPct.
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
	for _, c := range slices.Sorted(maps.Keys(pred.Busy)) {
		gain := pred.Busy[c] - base.Busy[c]
		if gain <= moveEpsilon {
			continue
		}
		hr := diagnose.HeadroomOf(l, c)
		if after, ok := hr.Fits(gain); !ok {
			if !hr.Measured {
				return fmt.Sprintf("moves %.1f%% of a CPU onto CPU %d, whose load was not measured", gain, c)
			}
			return fmt.Sprintf("moves %.1f%% of a CPU onto CPU %d (%s), %.0f%% busy after, above the %.0f%% a CPU may be filled to", gain, c, hr, after, diagnose.HeadroomBusyMaxPct)
		}
	}
	return ""
}

// judgeLoad is rules 2-4 of judge.
func judgeLoad(base, pred Prediction) (warn, reject string) {
	for _, c := range slices.Sorted(maps.Keys(pred.IRQ)) {
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
	for _, c := range slices.Sorted(maps.Keys(pred.Busy)) {
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
	for _, c := range slices.Sorted(maps.Keys(p.Busy)) {
		busy, irq := p.Busy[c], p.IRQ[c]
		sum += min(irq, busy-irq) * saturation(busy)
		if busy > 100 {
			sum += (busy - 100) * OverloadWeight
		}
	}
	return sum
}

// saturation is 0 for a CPU at most diagnose.HeadroomBusyMaxPct (80 %) busy, 1 from Overload (95 %) up,
// linear between: how much of its interrupt work is taken from its threads.
func saturation(busy float64) float64 {
	const free = diagnose.HeadroomBusyMaxPct
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
	// An IRQ entry by number changes its device too.
	for _, e := range p.IRQs {
		if e.IRQ != nil {
			if q := h.IRQ(*e.IRQ); q != nil && q.Class == host.ClassNetwork {
				note(q.Device)
			}
		}
	}
	eachEntryDevice(p, note)
	if len(outside) > 0 {
		return fmt.Sprintf("it changes %s, outside the devices the model predicts (%s): cannot judge its load", strings.Join(outside, ", "), strings.Join(steered, ", "))
	}
	m := newModel(h, l, steered)
	m.selected = selectedPIDs(o)
	_, why := judge(l, m.Predict(&plan.Plan{}), m.Predict(p))
	return why
}
