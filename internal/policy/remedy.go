package policy

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/diagnose"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/load"
	"github.com/irqpilot/irqpilot/internal/plan"
)

// RemedyPolicy is the Policy of a plan Remedy makes.
const RemedyPolicy = "remedy"

// Remedy is the change that addresses finding f on the measured load l, as
// a plan made with auto's parts: candidates shaped for the finding (the
// NIC's queue IRQs spread, RPS, the busiest IRQ moved, an IRQ moved to its
// device's node, NAPI threads placed, the traffic's consumer moved), each
// predicted by the cost model (model.go) and judged by auto's rules
// (judge: work only onto CPUs with the measured headroom, no CPU saturated
// by it, the busiest CPU never busier); the best that lowers the finding's
// CPUs' load wins, and the plan carries its prediction (Predict). The
// rules a remedy keeps:
//
//   - work moves only onto CPUs with measured spare time (diagnose's
//     headroom); where no CPU has it, there is no plan and why says what
//     would help instead;
//   - an application is moved only when it is an identified consumer of
//     the traffic (it serves a listening socket, load.SetConsumers, on the
//     device concerned): a busy thread beside the interrupts may just as
//     well be the load generator.
//
// why explains the plan (it is the plan's Why) or, with no plan, why not.
// o scopes the plan as for the policies (usable CPUs: not isolated, not
// nohz_full); its Devices and Load are not used.
func Remedy(h *host.Host, l *load.Load, f diagnose.Finding, o Options) (p *plan.Plan, why string) {
	if l == nil {
		return nil, "no measurement: a remedy moves work only onto CPUs measured to have the time for it"
	}
	o.Devices, o.Load = nil, nil
	if f.Device != "" && h.NIC(f.Device) != nil {
		o.Devices = []string{f.Device}
	}
	b, err := newBuilder(h, o, RemedyPolicy)
	if err != nil {
		return nil, err.Error()
	}
	r := &remedy{h: h, l: l, f: f, b: b, hot: cpuset.Of(f.CPUs...)}
	r.others = b.usable.Difference(r.hot)
	switch f.ID {
	case diagnose.IDInterruptBound:
		r.interruptBound()
	case diagnose.IDNICOneCPU:
		r.queueSpread()
		r.help = "What would help instead: more CPUs, or fewer interrupts (coalescing, interrupt deferral)."
	case diagnose.IDFewQueuesNoRPS:
		r.rpsOver(r.hot, fmt.Sprintf("%s's receive work", f.Device), r.cpuSoft())
		r.help = "RPS would only add inter-processor interrupts. What would help instead: more hardware queues (the NIC's channel count) or more CPUs."
	case diagnose.IDIRQRemoteNUMA:
		r.numaLocal()
	case diagnose.IDAppOnIRQCPU:
	case diagnose.IDNAPIThreadShared:
		r.napiThreads()
		r.help = "What would help instead: more CPUs, or less receive work per packet (interrupt deferral, GRO)."
	default:
		return nil, "no placement change addresses it"
	}
	bases := r.choose()
	if f.ID == diagnose.IDInterruptBound || f.ID == diagnose.IDAppOnIRQCPU {
		bases = r.withApps(bases)
	}
	if len(bases) == 0 {
		return nil, strings.Join(slices.DeleteFunc([]string{r.whyNot(), strings.Join(r.stays, " ")}, func(s string) bool { return s == "" }), " ")
	}
	best := bases[0]
	p = best.p
	p.Version, p.Policy, p.Host = plan.Version, RemedyPolicy, h.Hostname
	p.Why = fmt.Sprintf("remedy for %s: %s. Predicted from the measurement (%s): %s now → %s after.",
		f.Ref, best.name, certainty(l), describe(best.base, best.shown), describe(best.pred, best.shown))
	if len(r.stays) > 0 {
		p.Why += " " + strings.Join(r.stays, " ")
	}
	if len(p.IRQs) > 0 && h.Irqbalance.Running {
		p.Irqbalance = &plan.IrqbalanceEntry{Mode: plan.IrqbalanceStop, Reason: "irqbalance is running and would move the pinned IRQs back"}
	}
	p.Prediction = Predict(h, l, p, nil)
	if err := plan.Check(p); err != nil {
		return nil, fmt.Sprintf("the remedy's plan is invalid (a bug): %v", err)
	}
	return p, p.Why
}

// remedy is one Remedy in the making.
type remedy struct {
	h      *host.Host
	l      *load.Load
	f      diagnose.Finding
	b      *builder
	hot    cpuset.Set // the finding's CPUs
	others cpuset.Set // the usable CPUs work may move to
	cands  []namedPlan
	// noRoom: what had to move, when no CPU had the time for it.
	noRoom string
	// rejected: the first candidate the rules refused, and why.
	rejected []namedWhy
	help     string   // what would help instead of a move
	stays    []string // why a process named by the finding is not moved
}

// judged is a candidate with its predictions.
type judged struct {
	name        string
	p           *plan.Plan
	base, pred  Prediction
	shown       []int
	score, gain float64
}

// roomy are the CPUs of set with measured spare time, most spare first.
func (r *remedy) roomy(set cpuset.Set) []int {
	var out []int
	for _, c := range set.CPUs() {
		if hr := diagnose.HeadroomOf(r.l, c); hr.Measured && hr.Spare > 0 {
			out = append(out, c)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		return diagnose.HeadroomOf(r.l, out[i]).Spare > diagnose.HeadroomOf(r.l, out[j]).Spare
	})
	return out
}

// noRoomFor is the sentence for work that fits on none of targets: the
// CPUs it could go to and how busy they are.
func (r *remedy) noRoomFor(targets cpuset.Set, what string, pct float64) string {
	var hs []string
	for _, c := range targets.CPUs() {
		hs = append(hs, diagnose.HeadroomOf(r.l, c).String())
	}
	if len(hs) == 0 {
		return fmt.Sprintf("No other CPU can take %s (%.0f%% of a CPU).", what, pct)
	}
	return fmt.Sprintf("No other CPU has the spare time for %s (%.0f%% of a CPU; %s; a CPU takes work only up to %.0f%% busy), so moving it would only move the wait.",
		what, pct, strings.Join(hs, ", "), diagnose.HeadroomBusyMaxPct)
}

// cpuSoft is the softirq time of the finding's CPUs.
func (r *remedy) cpuSoft() float64 {
	var s float64
	for _, c := range r.hot.CPUs() {
		if cl := r.l.CPU(c); cl != nil {
			s += cl.SoftIRQ
		}
	}
	return s
}

// judge predicts p with the model Predict uses and applies auto's rules;
// reject is "" when p passes.
func (r *remedy) judge(name string, p *plan.Plan) (judged, string) {
	m := newModel(r.h, r.l, steeredDevices(p))
	j := judged{name: name, p: p, base: m.Predict(&plan.Plan{}), pred: m.Predict(p)}
	if _, reject := judge(r.l, j.base, j.pred); reject != "" {
		return j, reject
	}
	j.score = spreadScore(j.pred, r.hot)
	j.gain = spreadScore(j.base, r.hot) - j.score
	s := r.hot
	for c, v := range j.pred.Busy {
		if d := v - j.base.Busy[c]; d >= 1 || d <= -1 {
			s = s.Add(c)
		}
	}
	j.shown = s.CPUs()
	if len(j.shown) > 8 {
		j.shown = j.shown[:8]
	}
	return j, ""
}

// choose judges the candidates and returns those that pass, best first:
// for a remote IRQ in the order tried (locality is the point, not load),
// else by how far they lower the finding's busiest CPU (spreadScore); a
// candidate that does not lower it is refused.
func (r *remedy) choose() []judged {
	var out []judged
	for _, c := range r.cands {
		j, reject := r.judge(c.name, c.p)
		if reject == "" && r.f.ID != diagnose.IDIRQRemoteNUMA && j.gain <= moveEpsilon {
			reject = fmt.Sprintf("is not predicted to lower CPU %s's load", r.hot)
		}
		if reject != "" {
			r.rejected = append(r.rejected, namedWhy{c.name, reject})
			continue
		}
		out = append(out, j)
	}
	if r.f.ID != diagnose.IDIRQRemoteNUMA {
		sort.SliceStable(out, func(i, k int) bool { return out[i].score < out[k].score-moveEpsilon })
	}
	return out
}

// whyNot is why there is no plan: no room, or the rules refused every
// candidate, and what would help instead.
func (r *remedy) whyNot() string {
	var parts []string
	switch {
	case r.noRoom != "":
		parts = append(parts, r.noRoom)
	case len(r.rejected) > 0:
		x := r.rejected[0]
		parts = append(parts, fmt.Sprintf("Every change tried breaks a rule of the model's (%d tried; first, %s: %s).", len(r.rejected), x.name, x.why))
	}
	if r.help != "" {
		parts = append(parts, r.help)
	}
	return strings.Join(parts, " ")
}
