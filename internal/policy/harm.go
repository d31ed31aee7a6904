package policy

import (
	"strings"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/diagnose"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/load"
)

// Harm is the evidence of harm in a measured load that auto acts on, and
// the agent's --adapt trigger: diagnose's findings that show harm
// (interrupt-bound CPU, softnet drops or squeezes, a loaded IRQ on a remote
// node, the application on a saturated IRQ CPU) at severity warning or
// worse; and, when none, diagnose.SaturatedBusy: CPUs saturated mostly by
// interrupt work even though no other CPU is idle, while some CPU is not
// so saturated (an --adapt trigger that never clears would only churn
// settings).
func Harm(h *host.Host, l *load.Load) []diagnose.Finding {
	if l == nil {
		return nil
	}
	return HarmFrom(h, diagnose.Diagnose(h, l), l)
}

// HarmFrom is Harm for a caller that has diagnosed l already (the agent
// does every pass): findings are diagnose.Diagnose's for h and l.
func HarmFrom(h *host.Host, findings []diagnose.Finding, l *load.Load) []diagnose.Finding {
	if l == nil {
		return nil
	}
	harm := harmful(findings)
	if len(harm) == 0 {
		if f := diagnose.SaturatedBusy(h, l); f != nil {
			harm = append(harm, *f)
		}
	}
	return harm
}

// harmIDs are the findings that are evidence of harm when their severity
// is warning or worse.
var harmIDs = map[string]bool{diagnose.IDInterruptBound: true, diagnose.IDSoftnetDrops: true, diagnose.IDSoftnetSqueeze: true,
	diagnose.IDIRQRemoteNUMA: true, diagnose.IDAppOnIRQCPU: true}

func harmful(fs []diagnose.Finding) []diagnose.Finding {
	var out []diagnose.Finding
	for _, f := range fs {
		if harmIDs[f.ID] && f.Severity.AtLeast(diagnose.Warning) {
			out = append(out, f)
		}
	}
	return out
}

func hotCPUs(fs []diagnose.Finding) cpuset.Set {
	var s cpuset.Set
	for _, f := range fs {
		if f.ID == diagnose.IDInterruptBound || f.ID == diagnose.IDSoftnetDrops || f.ID == diagnose.IDSoftnetSqueeze || f.ID == diagnose.IDAppOnIRQCPU {
			s = s.Add(f.CPUs...)
		}
	}
	return s
}

func describeHarm(fs []diagnose.Finding) string {
	var parts []string
	for _, f := range fs {
		parts = append(parts, f.Summary)
	}
	return strings.Join(parts, "; ")
}

// MarginalNoise is the relative disturbance of a measured input that a
// decision must survive to be acted on: a decision that would change
// when any input it rests on moves by this fraction is "marginal"
// (auto_robust.go).
const MarginalNoise = 0.10
