package diagnose

import (
	"fmt"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/load"
)

// SaturatedCPUs are the measured CPUs at most BoundIdlePct idle with at
// least CriticalIRQPct in interrupts (load.CostPct: measured with the eBPF
// collector, else from /proc/stat).
func SaturatedCPUs(l *load.Load) cpuset.Set {
	var s cpuset.Set
	if l == nil {
		return s
	}
	for i := range l.CPUs {
		if c := &l.CPUs[i]; !c.NoTicks && c.Idle <= BoundIdlePct && l.CostPct(c) >= CriticalIRQPct {
			s = s.Add(c.ID)
		}
	}
	return s
}

// SaturatedBusy is interrupt-bound-cpu at critical severity for a machine
// whose CPUs are all busy, which Diagnose's rule leaves out (it wants the
// other CPUs waiting): CPUs saturated mostly by interrupt work while no
// other CPU is idle (seed 004 on two CPUs: the sender and its softirq
// share CPU 0, the consumer fills CPU 1 — spreading cannot help there,
// separating interrupt work from application work can). Only while some
// measured CPU is not so saturated: a host whose every CPU is saturated by
// interrupt work is out of CPU for its traffic, and no placement separates
// anything. nil when the rule does not hold.
func SaturatedBusy(h *host.Host, l *load.Load) *Finding {
	saturated := SaturatedCPUs(l)
	if saturated.IsEmpty() {
		return nil
	}
	measured := 0
	for _, c := range l.CPUs {
		if !c.NoTicks {
			measured++
		}
	}
	if saturated.Len() >= measured {
		return nil
	}
	f := Finding{ID: IDInterruptBound, Severity: Critical, CPUs: saturated.CPUs(),
		Summary: fmt.Sprintf("CPU %s saturated (≤ %.0f%% idle) and mostly by interrupt work (≥ %.0f%%), while every CPU is busy", saturated, BoundIdlePct, CriticalIRQPct),
		Why:     "Everything these CPUs' interrupts deliver waits for them, and their softirq work takes time from the threads that share them.",
	}
	for _, c := range saturated.CPUs() {
		cl := l.CPU(c)
		f.Evidence = append(f.Evidence,
			ev(fmt.Sprintf("CPU%d %%idle", c), cl.Idle, "%"),
			ev(fmt.Sprintf("CPU%d interrupt time, %s", c, load.CostDescription(l.CostSource)), l.CostPct(cl), "%"))
	}
	f.Device = cpuNIC(h, l, saturated.Min())
	f.PIDs, _, _, _ = busyApps(l, saturated.Min())
	f.Ref = ref(f)
	return &f
}
