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
// by the device whose IRQs land there (or, with none seen, the only NIC).
func interruptBoundFix(h *host.Host, l *Load, c *CPULoad, irqs []string) string {
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
	var fix string
	switch {
	case c.SoftIRQ >= c.IRQ && c.NetRx >= c.Block && nic != "":
		n := h.NIC(nic)
		if len(n.RxQueues) > 1 {
			fix = fmt.Sprintf("Spread %s's receive work: give each of its %d queues' IRQs its own core with %s; or keep the IRQs and spread the protocol work with RPS: %s.",
				nic, len(n.RxQueues), planApply("per-queue", nic), planApply("rps-spread", nic))
		} else {
			fix = fmt.Sprintf("Spread %s's receive work over CPUs %s with RPS/RFS: %s (by hand: `echo %s > /sys/class/net/%s/queues/rx-0/rps_cpus`).",
				nic, others, planApply("rps-spread", nic), others.Mask(0), nic)
		}
	case c.SoftIRQ >= c.IRQ && c.NetRx >= c.Block:
		fix = fmt.Sprintf("Spread receive processing over CPUs %s: enable RPS/RFS on the receiving NIC (`irqpilot plan --policy rps-spread --device NIC`; `irqpilot inventory` lists the NICs).", others)
	default:
		fix = fmt.Sprintf("Move some of the IRQs off CPU%d onto CPUs %s", c.ID, others)
		if len(irqs) > 0 {
			fix += fmt.Sprintf(": `echo %s > /proc/irq/%s/smp_affinity_list`", others, irqs[0])
		} else {
			fix += fmt.Sprintf(": `echo %s > /proc/irq/N/smp_affinity_list` for the IRQs `irqpilot top` shows on CPU%d", others, c.ID)
		}
		if nic != "" {
			fix += ", or " + planApply("per-queue", nic)
		}
		fix += "."
	}
	if len(irqs) > 0 {
		fix += " Busiest IRQs here: " + strings.Join(irqs, ", ") + "."
	}
	return fix
}

// reconcile turns findings that would advise opposite things into one
// recommendation. An application on an interrupt-bound CPU is one problem:
// moving every IRQ onto "the IRQ CPU" (dedicated-core) would make that CPU
// worse, so the advice is to spread its interrupt work first and then keep
// the application off it — stated once, on the interrupt-bound finding.
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
				f.Fix += fmt.Sprintf(" Then keep the application off CPU%d: %s.", f.CPUs[0], a.appMove)
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
