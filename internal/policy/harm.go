package policy

import (
	"fmt"

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
