package policy

import (
	"fmt"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/diagnose"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/load"
	"github.com/irqpilot/irqpilot/internal/plan"
	"github.com/irqpilot/irqpilot/internal/setting"
)

// auto's candidates: the policies and the topology rule, which do not
// depend on the load, and those built from the measurement (RPS away from
// a hot CPU, the application beside it, threaded NAPI in auto_napi.go).

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

func newAutoRun(h *host.Host, o Options, b *builder, l *load.Load, harm []diagnose.Finding) (*autoRun, error) {
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
		if spare := diagnose.WithHeadroom(l, away, 0); !spare.IsEmpty() && !spare.Equal(away) {
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
