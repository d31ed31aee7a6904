package policy

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/irqpilot/irqpilot/internal/diagnose"
	"github.com/irqpilot/irqpilot/internal/load"
	"github.com/irqpilot/irqpilot/internal/plan"
)

// Robust decisions. A measurement is a few seconds of a load that varies:
// a choice that another sample of the same load could overturn is not
// evidence. auto therefore decides again on disturbed copies of the
// measurement — every input the decision rests on scaled up and down by
// MarginalNoise (10 %), one at a time, deterministically:
//
//   - each measured CPU's busy time (every part of it, idle taking the
//     difference, never above 100 % less iowait);
//   - each CPU's interrupt time (hardirq and softirq; idle takes the
//     difference, and when there is none the CPU's threads lose it);
//   - each process's measured thread time.
//
// The evidence of harm (which CPUs are hot) is kept from the measurement:
// it is diagnose's findings, judged against their own thresholds, and the
// agent asks it to persist over several intervals before acting. If any
// disturbed copy overturns the decision (see flips), it is marginal: auto
// changes nothing and says which input and numbers overturn it.

// perturbed is one disturbed copy of a load and what was disturbed.
type perturbed struct {
	what string
	l    *load.Load
}

// perturbations are the disturbed copies of l, in a fixed order (CPUs
// ascending, busy then interrupt time, up then down; then processes by
// PID). An input that is 0 has nothing to scale and is left out.
func perturbations(l *load.Load) []perturbed {
	return perturbationsOf(l, func(int) bool { return true }, func(int) bool { return true })
}

// perturbationsOf are the perturbations of the CPUs and processes that
// cpu and pid accept.
func perturbationsOf(l *load.Load, cpu, accept func(int) bool) []perturbed {
	var out []perturbed
	factors := []float64{1 + MarginalNoise, 1 - MarginalNoise}
	word := func(f float64) string {
		if f > 1 {
			return "higher"
		}
		return "lower"
	}
	for i := range l.CPUs {
		c := l.CPUs[i]
		if c.NoTicks || !cpu(c.ID) {
			continue
		}
		for _, f := range factors {
			if c.Busy() > 0 {
				n := scaleBusy(c, f)
				out = append(out, perturbed{fmt.Sprintf("CPU %d busy %.0f %% %s (%.1f%% → %.1f%%)", c.ID, 100*MarginalNoise, word(f), c.Busy(), n.Busy()), withCPU(l, i, n)})
			}
		}
		for _, f := range factors {
			if irq := l.CostPct(&c); irq > 0 {
				n := scaleIRQ(c, f)
				out = append(out, perturbed{fmt.Sprintf("CPU %d interrupt time %.0f %% %s (%.1f%% → %.1f%%)", c.ID, 100*MarginalNoise, word(f), irq, l.CostPct(&n)), withCPU(l, i, n)})
			}
		}
	}
	busy := map[int]float64{}
	comm := map[int]string{}
	for _, t := range l.Tasks {
		busy[t.PID] += t.Busy
		if comm[t.PID] == "" || t.PID == t.TID {
			comm[t.PID] = t.Comm
		}
	}
	for _, pid := range slices.Sorted(maps.Keys(busy)) {
		if busy[pid] <= 0 || !accept(pid) {
			continue
		}
		for _, f := range factors {
			cp := *l
			cp.Tasks = slices.Clone(l.Tasks)
			for i := range cp.Tasks {
				if cp.Tasks[i].PID == pid {
					cp.Tasks[i].Busy *= f
				}
			}
			out = append(out, perturbed{fmt.Sprintf("process %d (%s) busy %.0f %% %s (%.1f%% → %.1f%% of a CPU)", pid, comm[pid], 100*MarginalNoise, word(f), busy[pid], busy[pid]*f), &cp})
		}
	}
	return out
}

// withCPU is a shallow copy of l with CPU i replaced by c.
func withCPU(l *load.Load, i int, c load.CPULoad) *load.Load {
	cp := *l
	cp.CPUs = slices.Clone(l.CPUs)
	cp.CPUs[i] = c
	return &cp
}

// scaleBusy scales every part of c's busy time by f, up to all of the
// CPU's time less iowait; idle is the rest.
func scaleBusy(c load.CPULoad, f float64) load.CPULoad {
	room := 100 - c.IOWait
	busy := c.Busy()
	if busy <= 0 {
		return c
	}
	target := min(busy*f, room)
	k := target / busy
	c.User, c.Nice, c.System, c.Steal, c.Guest, c.GuestNice = c.User*k, c.Nice*k, c.System*k, c.Steal*k, c.Guest*k, c.GuestNice*k
	c.IRQ, c.SoftIRQ = c.IRQ*k, c.SoftIRQ*k
	c.HardirqTime *= k
	c.SoftirqTime = scaledMap(c.SoftirqTime, k)
	c.Idle = room - target
	return c
}

// scaleIRQ scales c's interrupt time by f; idle takes the difference, and
// when idle runs out the CPU's other work loses the rest (softirq and
// hardirq run before any thread).
func scaleIRQ(c load.CPULoad, f float64) load.CPULoad {
	delta := (c.IRQ + c.SoftIRQ) * (f - 1)
	c.IRQ, c.SoftIRQ = c.IRQ*f, c.SoftIRQ*f
	c.HardirqTime *= f
	c.SoftirqTime = scaledMap(c.SoftirqTime, f)
	c.Idle -= delta
	if c.Idle < 0 {
		short := -c.Idle
		c.Idle = 0
		if other := c.User + c.Nice + c.System + c.Steal + c.Guest + c.GuestNice; other > 0 {
			k := max(0, other-short) / other
			c.User, c.Nice, c.System, c.Steal, c.Guest, c.GuestNice = c.User*k, c.Nice*k, c.System*k, c.Steal*k, c.Guest*k, c.GuestNice*k
		}
	}
	return c
}

func scaledMap(m map[string]float64, k float64) map[string]float64 {
	if m == nil {
		return nil
	}
	out := make(map[string]float64, len(m))
	for n, v := range m {
		out[n] = v * k
	}
	return out
}

// relevant are the CPUs whose disturbance can overturn d: the hot CPUs;
// those the chosen plan changes; those near a threshold the decision
// compares against — interrupt time near spreadScore's 5 % cut, busy time
// near the spreadSpare cut between spreading and separating, interrupt
// work near diagnose.SaturatedCPUs' cut that lowers the margin. A CPU the plan does
// not change contributes the same to the prediction with and without the
// plan (judge compares only what changes), so it cannot overturn it. For
// a decision to change nothing (where every candidate would have to be
// re-predicted) the same holds without the changed CPUs: the evidence's
// CPUs and the thresholds are what another sample would move.
func (a *autoRun) relevant(l *load.Load, d *autoDecision) func(int) bool {
	var s = a.hot
	if d.best != nil {
		for c, v := range d.best.pred.Busy {
			if diff := v - d.base.Busy[c]; diff > moveEpsilon || diff < -moveEpsilon || d.best.pred.IRQ[c] != d.base.IRQ[c] {
				s = s.Add(c)
			}
		}
	}
	noise := 1 + MarginalNoise
	for i := range l.CPUs {
		c := &l.CPUs[i]
		irq, busy := l.CostPct(c), c.Busy()
		near := func(v, cut float64) bool { return v >= cut/noise && v <= cut*noise }
		if irq >= 5/noise || near(diagnose.HeadroomBusyMaxPct-busy, spreadSpare) || (near(irq, diagnose.CriticalIRQPct) || irq >= diagnose.CriticalIRQPct) && c.Idle <= diagnose.BoundIdlePct*noise {
			s = s.Add(c.ID)
		}
	}
	return s.Contains
}

// flip is a disturbed load on which the decision does not hold, and what
// would happen instead.
type flip struct {
	what, instead string
}

// flips decides again on every disturbed copy of l and returns those on
// which d does not hold, and how many copies were tried. A decision to
// change nothing holds while no candidate becomes worth making; a decision
// for a candidate holds while that candidate still passes every rule
// (judge) and still beats doing nothing by the margin — another candidate
// overtaking it by a little is no reason to doubt it.
func (a *autoRun) flips(l *load.Load, d *autoDecision) ([]flip, int) {
	ps := perturbationsOf(l, a.relevant(l, d), func(pid int) bool { return slices.Contains(d.m.selected, pid) })
	var out []flip
	for _, p := range ps {
		if d.best == nil {
			if pd := a.decide(p.l); pd.best != nil {
				out = append(out, flip{p.what, "auto would choose " + pd.best.name})
			}
			continue
		}
		if why := a.holds(p.l, d.best.p); why != "" {
			out = append(out, flip{p.what, why})
		}
	}
	return out, len(ps)
}

// holds returns "" when plan p passes the rules on l and beats doing
// nothing by the margin, else what becomes of it.
func (a *autoRun) holds(l *load.Load, p *plan.Plan) string {
	d := a.prepare(l)
	pred := d.m.Predict(p)
	if _, reject := judge(l, d.base, pred); reject != "" {
		return "it would be rejected: " + reject
	}
	if s := d.score(pred, a.hot); d.baseScore-s < d.need {
		return fmt.Sprintf("it would improve %s only from %s to %s", d.scoreName(), d.scoreText(d.baseScore), d.scoreText(s))
	}
	return ""
}

// marginalNote says which disturbances overturn the choice chose.
func marginalNote(fs []flip, tried int, chose string) string {
	var parts []string
	for i, f := range fs {
		if i == 3 {
			break
		}
		parts = append(parts, fmt.Sprintf("with %s, %s", f.what, f.instead))
	}
	s := fmt.Sprintf("the decision (%s) is marginal: %s", chose, strings.Join(parts, "; "))
	if len(fs) > 3 {
		s += fmt.Sprintf("; and %d more", len(fs)-3)
	}
	return s + fmt.Sprintf(" (%d of %d disturbed copies of the measurement overturn it)", len(fs), tried)
}
