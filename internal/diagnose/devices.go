package diagnose

import (
	"sort"
	"strings"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/load"
)

// Findings name the device behind a CPU's interrupt work, so that a
// remedy can steer it; these helpers find it.

// cpuDevices are the devices whose IRQs fired on cpu, busiest first.
func cpuDevices(h *host.Host, l *load.Load, cpu int) []string {
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
func otherCPUs(h *host.Host, l *load.Load, cpu int) cpuset.Set {
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

// cpuNIC is the network device whose IRQs land on cpu (the busiest), or,
// with none seen there, the host's only NIC; "" when neither.
func cpuNIC(h *host.Host, l *load.Load, cpu int) string {
	for _, d := range cpuDevices(h, l, cpu) {
		if isNIC(h, d) {
			return d
		}
	}
	if h != nil && len(h.NICs) == 1 {
		return h.NICs[0].Name
	}
	return ""
}

// reconcile turns findings that would lead to opposite remedies into one.
// An application on an interrupt-bound CPU is one problem: moving every IRQ
// onto "the IRQ CPU" (dedicated-core) would make that CPU worse, so the
// remedy spreads its interrupt work first and then moves the application
// (when it is the traffic's consumer and room is left) — stated once, on
// the interrupt-bound finding, which names the application's processes.
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
