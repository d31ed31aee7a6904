package policy

import (
	"fmt"
	"strings"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/load"
)

// Harm is the evidence of harm in a measured load that auto acts on, and
// the agent's --adapt trigger: package load's findings that show harm
// (interrupt-bound CPU, softnet drops or squeezes, a loaded IRQ on a remote
// node, the application on a saturated IRQ CPU) at severity warning or
// worse; and, when none, a CPU saturated mostly by interrupt work even
// though no other CPU is idle (seed 004 on two CPUs: the sender and its
// softirq share CPU 0, the consumer fills CPU 1 — spreading cannot help
// there, separating interrupt work from application work can), reported
// as interrupt-bound-cpu at critical severity — but only while some CPU
// is not so saturated: a host whose every CPU is saturated by interrupt
// work is out of CPU for its traffic, no placement can separate anything,
// and an --adapt trigger that never clears would only churn settings.
func Harm(h *host.Host, l *load.Load) []load.Finding {
	if l == nil {
		return nil
	}
	return HarmFrom(load.Diagnose(h, l), l)
}

// HarmFrom is Harm for a caller that has diagnosed l already (the agent
// does every pass): findings are load.Diagnose's for l.
func HarmFrom(findings []load.Finding, l *load.Load) []load.Finding {
	if l == nil {
		return nil
	}
	harm := harmful(findings)
	saturated := saturatedCPUs(l)
	measured := 0
	for _, c := range l.CPUs {
		if !c.NoTicks {
			measured++
		}
	}
	if len(harm) == 0 && !saturated.IsEmpty() && saturated.Len() < measured {
		harm = append(harm, load.Finding{ID: load.IDInterruptBound, Severity: load.Critical, CPUs: saturated.CPUs(),
			Summary: fmt.Sprintf("CPU %s saturated (≤ %.0f%% idle) and mostly by interrupt work (≥ %.0f%%), while every CPU is busy", saturated, load.BoundIdlePct, load.CriticalIRQPct)})
	}
	return harm
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
