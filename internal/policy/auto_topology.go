package policy

import (
	"fmt"
	"strings"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/plan"
)

// lowIRQShare is the hardirq+softirq share of one CPU below which a single
// queue's receive work is left on its IRQ CPU instead of being spread (seed
// 004's CPU0 ran at 52.8 % softirq before RPS; seed 002's small instances
// kept the stack on the IRQ core).
const lowIRQShare = 0.25

// topologyChoice is the topology rule irqpilot's auto used before it
// decided from evidence; the evidence-driven Auto keeps it as one candidate
// among others (it is never applied without a predicted gain). The rules,
// in order:
//
//  1. Isolated or nohz_full CPUs present: dedicated-core with every usable
//     (non-isolated) CPU as housekeeping — IRQs and softirq work never go to
//     isolated CPUs (the policies exclude them anyway; here nothing else
//     would be safe to spread over).
//  2. A single usable CPU: dedicated-core on it (nothing to spread).
//  3. No network interface with queues: nothing to change.
//  4. The busiest NIC (most queues) has no movable queue IRQ (all
//     kernel-managed, or a virtual device): rps-spread, the only steering
//     left (seed 004).
//  5. One queue: rps-spread (seed 004: one CPU takes every interrupt and
//     its softirq work), unless the current load shows that CPU lightly
//     loaded (< 25 % in irq+softirq), then per-queue, which keeps the stack
//     on the IRQ CPU and the application off it (seed 002, 4 CPUs).
//  6. At least as many queues as physical cores on the NIC's node: colocate —
//     RSS already spreads over every core, so cross-CPU steering only adds
//     IPIs; keep each queue's work on its core (seed 001).
//  7. Otherwise (fewer queues than cores): per-queue (seed 002).
func topologyChoice(h *host.Host, o Options) (*plan.Plan, error) {
	b, ts, err := start(h, o, "auto", (*builder).targets)
	if err != nil {
		return nil, err
	}
	run := func(name, why string, o Options) (*plan.Plan, error) {
		var pol Policy
		switch name {
		case "dedicated-core":
			pol = DedicatedCore
		case "per-queue":
			pol = PerQueue
		case "colocate":
			pol = Colocate
		default:
			pol = RPSSpread
		}
		p, err := pol(h, o)
		if err != nil {
			return nil, err
		}
		inner := p.Why
		if inner != "" {
			inner = strings.ToUpper(inner[:1]) + inner[1:]
		}
		p.Why = "auto chose " + name + ": " + why + ". " + inner
		return p, nil
	}

	isolated := b.banned.Intersect(b.v.Online)
	if !isolated.IsEmpty() {
		o2 := o
		if o2.Housekeeping.IsEmpty() {
			o2.Housekeeping = b.usable
		}
		return run("dedicated-core", fmt.Sprintf("CPUs %s are isolated or nohz_full, so every movable IRQ and all softirq work stay on the housekeeping CPUs %s", isolated, o2.Housekeeping), o2)
	}
	if b.usable.Len() == 1 {
		return run("dedicated-core", fmt.Sprintf("only CPU %s is usable; there is nothing to spread over", b.usable), o)
	}

	var primary *target
	for _, t := range ts {
		if t.nic.Kind == "vlan" {
			continue
		}
		if primary == nil || t.queueCount() > primary.queueCount() ||
			(t.queueCount() == primary.queueCount() && t.movable() && !primary.movable()) {
			primary = t
		}
	}
	if primary == nil || primary.queueCount() == 0 {
		p := b.p
		p.Why = "auto: no network interface with queues to steer; nothing to change"
		p.Irqbalance = &plan.IrqbalanceEntry{Mode: plan.IrqbalanceLeave, Reason: "no IRQ is placed"}
		return p, nil
	}
	P, local := b.nodeCPUs(primary.nic)
	Q := primary.queueCount()
	cores := b.cores(P)
	where := fmt.Sprintf("%d usable CPUs on %d cores NUMA-local to %s (%s)", P.Len(), cores, primary.nic.Name, P)
	if !local {
		where = fmt.Sprintf("%d usable CPUs on %d cores (%s's node unknown)", P.Len(), cores, primary.nic.Name)
	}
	desc := fmt.Sprintf("%s has %d queue(s); %s", primary.nic.Name, Q, where)

	noQueues := len(primary.nic.RxQueues) == 0 // known only from its IRQs: nothing to steer
	if !primary.movable() {
		if noQueues {
			p := b.p
			p.Why = "auto: " + desc + "; its queue IRQs cannot be moved and its rx queues are unknown, so there is nothing to change"
			p.Irqbalance = &plan.IrqbalanceEntry{Mode: plan.IrqbalanceLeave, Reason: "no IRQ is placed"}
			return p, nil
		}
		kind := "its queue IRQs are kernel-managed"
		if len(primary.queues) == 0 {
			kind = "it has no queue IRQs (virtual device)"
		}
		return run("rps-spread", desc+"; "+kind+", so only software steering can spread the work", o)
	}
	if Q == 1 {
		if noQueues {
			return run("per-queue", desc+"; its rx queues are unknown (no sysfs queues), so only IRQ placement is possible", o)
		}
		if share, ok := irqCPUShare(o.Load, primary); ok && share < lowIRQShare {
			return run("per-queue", fmt.Sprintf("%s; its IRQ CPU spends only %.0f %% in irq+softirq, so the stack stays there and the application moves off it", desc, share*100), o)
		}
		return run("rps-spread", desc+"; one CPU takes every interrupt and its softirq work, so spread the protocol work with RPS/RFS", o)
	}
	if Q >= cores {
		return run("colocate", desc+"; there are at least as many queues as cores, so RSS already spreads the work and each queue's work stays on its own core", o)
	}
	return run("per-queue", desc+"; fewer queues than cores, so pin the queue IRQs on a few cores, spread the softirq work with RPS and give the application the rest", o)
}

// irqCPUShare is the highest irq+softirq share among the CPUs that
// currently serve t's queue IRQs (their effective affinity, else affinity).
func irqCPUShare(l *MeasuredLoad, t *target) (float64, bool) {
	if l == nil || len(l.IRQShare) == 0 {
		return 0, false
	}
	cpus := cpuset.Set{}
	for _, qs := range t.irqs {
		for _, q := range qs {
			switch {
			case q.EffectiveAffinity != nil:
				cpus = cpus.Union(*q.EffectiveAffinity)
			case q.Affinity != nil:
				cpus = cpus.Union(*q.Affinity)
			}
		}
	}
	best, ok := 0.0, false
	for _, c := range cpus.CPUs() {
		if v, has := l.IRQShare[c]; has {
			best, ok = max(best, v), true
		}
	}
	return best, ok
}
