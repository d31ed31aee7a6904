package load

import (
	"fmt"
	"sort"
	"strings"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/host"
)

// Fixes name the device and the exact command: a person on call pastes
// them. These helpers find the device behind a CPU's interrupt work and the
// CPUs to move work to.

// cpuDevices are the devices whose IRQs fired on cpu, busiest first.
func cpuDevices(h *host.Host, l *Load, cpu int) []string {
	if h == nil || l == nil {
		return nil
	}
	rate := map[string]float64{}
	for _, q := range l.IRQs {
		r := q.PerCPU[cpu]
		if r < ActiveIRQRate {
			continue
		}
		if hq := h.IRQ(q.IRQ); hq != nil && hq.Device != "" {
			rate[hq.Device] += r
		}
	}
	var out []string
	for d := range rate {
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool {
		if rate[out[i]] != rate[out[j]] {
			return rate[out[i]] > rate[out[j]]
		}
		return out[i] < out[j]
	})
	return out
}

// isNIC reports whether name is one of h's network devices.
func isNIC(h *host.Host, name string) bool { return h != nil && h.NIC(name) != nil }

// otherCPUs are the online CPUs except cpu.
func otherCPUs(h *host.Host, l *Load, cpu int) cpuset.Set {
	var s cpuset.Set
	if h != nil && !h.Topology.Online.IsEmpty() {
		s = h.Topology.Online
	} else if l != nil {
		for _, c := range l.CPUs {
			s = s.Add(c.ID)
		}
	}
	return s.Difference(cpuset.Of(cpu))
}

// planApply is the command that plans policy for dev and applies it.
func planApply(policy, dev string) string {
	return fmt.Sprintf("`irqpilot plan --policy %s --device %s -o %s-%s.yaml && irqpilot apply %s-%s.yaml`", policy, dev, policy, dev, policy, dev)
}

// interruptBoundFix is the one recommendation for an interrupt-bound CPU:
// by the device whose IRQs land there (or, with none seen, the only NIC),
// onto the other CPUs that have the headroom for it, with the prediction;
// then the application on that CPU, when it is the traffic's consumer and
// there is room left for it.
func interruptBoundFix(h *host.Host, l *Load, c *CPULoad, irqs []string) (string, []Move) {
	b := newBudget(l)
	others := otherCPUs(h, l, c.ID)
	var nic string
	for _, d := range cpuDevices(h, l, c.ID) {
		if isNIC(h, d) {
			nic = d
			break
		}
	}
	if nic == "" && h != nil && len(h.NICs) == 1 {
		nic = h.NICs[0].Name
	}
	cost := l.CostPct(c)
	help := " What would help instead: more CPUs, or less traffic per CPU; spread receive work (RPS, more queues) only onto CPUs that have spare time."
	var fix string
	switch {
	case c.SoftIRQ >= c.IRQ && c.NetRx >= c.Block && nic != "":
		n := h.NIC(nic)
		queueIRQs := nicIRQsOn(h, l, n, c.ID)
		if len(queueIRQs) > 1 {
			// Queue IRQs over this CPU and CPUs with room: each CPU
			// keeps one queue's share of the interrupt work.
			set, ps := b.spreadAtMost(others, cost, true, len(queueIRQs)-1)
			if set.IsEmpty() {
				fix = b.noRoom(others, fmt.Sprintf("CPU%d's interrupt work", c.ID), cost) + help
				break
			}
			b.record(nic+" queue IRQs", 0, c.ID, ps)
			targets := append([]int{c.ID}, set.CPUs()...)
			var cmds []string
			for k, q := range queueIRQs {
				cmds = append(cmds, fmt.Sprintf("`echo %d > /proc/irq/%d/smp_affinity_list`", targets[k%len(targets)], q))
			}
			fix = fmt.Sprintf("Spread %s's queue IRQs over CPU%d and CPUs %s, which have the time (%s): %s",
				nic, c.ID, set, predictions(ps), strings.Join(cmds, ", "))
			if set.Equal(others) {
				fix += fmt.Sprintf(" (or plan it: %s)", planApply("per-queue", nic))
			}
			// The alternative, judged on its own: RPS moves the protocol
			// part (softirq) off this CPU entirely.
			alt := newBudget(l)
			if rs, rps := alt.spread(others, c.SoftIRQ, false); !rs.IsEmpty() {
				b.record(nic+" receive work (RPS, instead of the IRQ moves)", 0, c.ID, rps)
				fix += fmt.Sprintf("; or keep the IRQs and spread the protocol work with RPS onto CPUs %s (%s): `echo %s > /sys/class/net/%s/queues/rx-N/rps_cpus` for each queue", rs, predictions(rps), rs.Mask(0), nic)
			}
			fix += "."
		} else {
			// RPS moves the protocol part (softirq) to the targets; the
			// queue's interrupt and poll stay here.
			set, ps := b.spread(others, c.SoftIRQ, false)
			if set.IsEmpty() {
				fix = b.noRoom(others, fmt.Sprintf("CPU%d's receive work", c.ID), c.SoftIRQ) + help
				break
			}
			b.record(nic+" receive work (RPS)", 0, c.ID, ps)
			fix = fmt.Sprintf("Spread %s's receive work with RPS/RFS onto CPUs %s, which have the time (%s): `echo %s > /sys/class/net/%s/queues/rx-0/rps_cpus`",
				nic, set, predictions(ps), set.Mask(0), nic)
			if set.Equal(others) {
				fix += fmt.Sprintf(" (or plan it: %s)", planApply("rps-spread", nic))
			}
			fix += "."
		}
	case c.SoftIRQ >= c.IRQ && c.NetRx >= c.Block:
		set, ps := b.spread(others, c.SoftIRQ, false)
		if set.IsEmpty() {
			fix = b.noRoom(others, fmt.Sprintf("CPU%d's receive work", c.ID), c.SoftIRQ) + help
			break
		}
		b.record("receive work (RPS)", 0, c.ID, ps)
		fix = fmt.Sprintf("Spread receive processing onto CPUs %s, which have the time (%s): enable RPS/RFS on the receiving NIC's rx queues with `echo %s > /sys/class/net/NIC/queues/rx-N/rps_cpus` (`irqpilot inventory` lists the NICs).", set, predictions(ps), set.Mask(0))
	default:
		// The busiest IRQ moves whole: its share of the interrupt time
		// (by its share of the interrupts here) goes to one CPU.
		share := cost
		if len(irqs) > 0 && c.Interrupts > 0 {
			var n int
			fmt.Sscan(irqs[0], &n)
			if r := l.IRQ(n); r != nil {
				share = min(cost, cost*r.PerCPU[c.ID]/c.Interrupts)
			}
		}
		set, ps := b.eachFits(others, share)
		if set.IsEmpty() {
			what := fmt.Sprintf("CPU%d's busiest IRQ", c.ID)
			if len(irqs) > 0 {
				what = "IRQ " + irqs[0]
			}
			fix = b.noRoom(others, what, share) + " What would help instead: more CPUs, or fewer interrupts (coalescing, interrupt deferral)."
			break
		}
		what := fmt.Sprintf("CPU%d's busiest IRQ", c.ID)
		if len(irqs) > 0 {
			what = "irq " + irqs[0]
		}
		b.record(what, 0, c.ID, ps)
		fix = fmt.Sprintf("Move some of the IRQs off CPU%d onto CPUs %s, which have the time (%s)", c.ID, set, predictions(ps))
		if len(irqs) > 0 {
			fix += fmt.Sprintf(": `echo %s > /proc/irq/%s/smp_affinity_list`", set, irqs[0])
		} else {
			fix += fmt.Sprintf(": `echo %s > /proc/irq/N/smp_affinity_list` for the busiest IRQ `irqpilot top` shows on CPU%d", set, c.ID)
		}
		fix += "."
	}
	if len(irqs) > 0 {
		fix += " Busiest IRQs here: " + strings.Join(irqs, ", ") + "."
	}
	if pids, _, _, _ := busyApps(l, c.ID); len(pids) > 0 {
		sentences, _ := appMoves(h, l, b, c.ID, pids)
		fix += " Then the application on CPU" + fmt.Sprint(c.ID) + ": " + strings.Join(sentences, " ")
	}
	return fix, b.moves
}

// nicIRQsOn are n's queue IRQs that fired on cpu, busiest first.
func nicIRQsOn(h *host.Host, l *Load, n *host.NIC, cpu int) []int {
	var out []int
	for _, q := range nicQueueIRQs(h, n) {
		if r := l.IRQ(q); r != nil && r.PerCPU[cpu] >= ActiveIRQRate {
			out = append(out, q)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return l.IRQ(out[i]).PerCPU[cpu] > l.IRQ(out[j]).PerCPU[cpu] })
	return out
}

// reconcile turns findings that would advise opposite things into one
// recommendation. An application on an interrupt-bound CPU is one problem:
// moving every IRQ onto "the IRQ CPU" (dedicated-core) would make that CPU
// worse, so the advice is to spread its interrupt work first and then move
// the application (when it is the traffic's consumer and room is left) —
// stated once, on the interrupt-bound finding, whose fix already holds it.
func reconcile(fs []Finding) []Finding {
	apps := map[int]Finding{}
	for _, f := range fs {
		if f.ID == IDAppOnIRQCPU && len(f.CPUs) == 1 {
			apps[f.CPUs[0]] = f
		}
	}
	merged := map[int]bool{}
	out := make([]Finding, 0, len(fs))
	for _, f := range fs {
		if f.ID == IDInterruptBound && len(f.CPUs) == 1 {
			if a, ok := apps[f.CPUs[0]]; ok {
				f.Summary += "; busy application threads run there too (" + appNames(a) + ")"
				f.Evidence = append(f.Evidence, a.appThreads...)
				merged[f.CPUs[0]] = true
			}
		}
		out = append(out, f)
	}
	final := out[:0]
	for _, f := range out {
		if f.ID == IDAppOnIRQCPU && len(f.CPUs) == 1 && merged[f.CPUs[0]] {
			continue
		}
		final = append(final, f)
	}
	return final
}

// appNames is the thread list of an app-on-irq-cpu summary.
func appNames(f Finding) string {
	if _, after, ok := strings.Cut(f.Summary, "): "); ok {
		return after
	}
	return "see app-on-irq-cpu"
}
