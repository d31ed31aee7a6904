package main

import (
	"fmt"
	"strings"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/diagnose"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/load"
	"github.com/irqpilot/irqpilot/internal/plan"
	"github.com/irqpilot/irqpilot/internal/policy"
)

// doctor's fixes, rendered for people: a finding's remedy is a plan made
// by policy.Remedy (the model and rules plan and auto use), and the
// commands are that plan's entries written as the kernel files they set.
// Findings no placement addresses (a sysctl, irqbalance, coalescing) get
// their advice here: the only place irqpilot writes shell text for them.

// doctorFinding is a finding with its fix (docs/json.md, "doctor --json").
type doctorFinding struct {
	diagnose.Finding
	// Fix is the remedy for people: the plan's change, its commands and
	// how to apply it verified, or what to do instead.
	Fix    string        `json:"fix"`
	Remedy *doctorRemedy `json:"remedy"`
}

// doctorRemedy is the plan that addresses a finding, with its prediction,
// or why there is none.
type doctorRemedy struct {
	// Plan is the remedy (nil when there is none): what `irqpilot plan
	// --remedy REF` writes for the same measurement.
	Plan *plan.Plan `json:"plan,omitempty"`
	// Prediction is the plan's per-CPU prediction (policy.Predict).
	Prediction *plan.Prediction `json:"prediction,omitempty"`
	// Commands are the plan's changes as shell commands.
	Commands []string `json:"commands,omitempty"`
	// Why explains the plan, or why there is none.
	Why string `json:"why"`
}

// withRemedy gives f its remedy and the text of its fix. In a network
// namespace other than the initial one (netns names it) the remedy leaves
// out what cannot take effect there, as `plan --remedy` does, so that the
// commands doctor prints are the plan's.
func withRemedy(h *host.Host, l *load.Load, f diagnose.Finding, netns string) doctorFinding {
	p, why := policy.Remedy(h, l, f, policy.Options{})
	if p != nil && netns != "" {
		plan.ScopeToNetNS(p, netns)
	}
	r := &doctorRemedy{Plan: p, Why: why}
	out := doctorFinding{Finding: f, Remedy: r}
	if p == nil {
		out.Fix = strings.TrimSpace(advice(h, l, f) + " " + noPlanWhy(f, why))
		return out
	}
	r.Prediction = p.Prediction
	r.Commands = planCommands(p)
	var quoted []string
	for _, c := range r.Commands {
		quoted = append(quoted, "`"+c+"`")
	}
	fix := p.Why
	if len(quoted) > 0 {
		fix += " Commands: " + strings.Join(quoted, ", ") + "."
	}
	fix += fmt.Sprintf(" Or as a plan, applied and then checked against this prediction: `irqpilot plan --remedy %s -o fix.yaml && irqpilot apply --verify fix.yaml`.", f.Ref)
	switch {
	case f.ID == diagnose.IDNICOneCPU && f.Severity == diagnose.Info:
		fix = "Nothing to do if this is a deliberate dedicated-core layout; otherwise: " + fix
	case len(p.Apps) > 0:
		fix += " Leave the application where it is if one worker per queue shares its queue's core on purpose (`--policy colocate`)."
	}
	out.Fix = fix
	return out
}

// noPlanWhy is Remedy's why for a finding without a plan, unless it only
// says that no placement addresses it (the advice says what does).
func noPlanWhy(f diagnose.Finding, why string) string {
	if why == "no placement change addresses it" {
		return ""
	}
	if f.ID == diagnose.IDFewQueuesNoRPS && f.Device != "" {
		why += fmt.Sprintf(" (`ethtool -L %s combined N`)", f.Device)
	}
	return why
}

// advice is the fix of a finding no placement addresses.
func advice(h *host.Host, l *load.Load, f diagnose.Finding) string {
	switch f.ID {
	case diagnose.IDIrqbalanceManual:
		return "Stop it (`systemctl disable --now irqbalance`), or keep it off the CPUs you manage (plan `irqbalance: ban`)."
	case diagnose.IDManagedIRQs:
		return "Nothing to do; irqpilot leaves them alone. To keep them off isolated CPUs, boot with isolcpus=managed_irq,<cpus>."
	case diagnose.IDSoftnetDrops:
		return "Raise the backlog: `sysctl -w net.core.netdev_max_backlog=4096` (default 1000), and spread the receive work (RPS) so no single backlog overflows, " + spareCPUs(h, l) + "."
	case diagnose.IDSoftnetSqueeze:
		return "Raise the budget: `sysctl -w net.core.netdev_budget=600 net.core.netdev_budget_usecs=4000` (defaults 300 and 2000), or spread receive work over more CPUs (RPS, more queues), " + spareCPUs(h, l) + "."
	case diagnose.IDRPSIPIOverhead:
		return "Narrow rps_cpus to the CPUs sharing the NIC's cache/NUMA node (`irqpilot plan --policy rps-spread` picks the node's CPUs) or, with enough hardware queues, turn RPS off and place queue IRQs (`--policy per-queue`) " + spareCPUs(h, l) + "; measure with `irqpilot bench`."
	case diagnose.IDNAPIBudget:
		for _, e := range f.Evidence {
			if strings.Contains(e.Name, "(napi/") {
				return "Give NAPI more room per run (`sysctl -w net.core.netdev_budget=600 net.core.netdev_budget_usecs=4000`), or spread it (more queues, RPS) " + spareCPUs(h, l) + "."
			}
		}
		return "Run NAPI in its own threads (plan `napi: [{device: DEV, threaded: true, cpus: …}]`, or `irqpilot plan --policy latency --app-cpus …`), " + spareCPUs(h, l) + ": a NAPI thread is scheduled like any thread instead of giving up after netdev_budget; or raise net.core.netdev_budget(_usecs)."
	case diagnose.IDIRQStormDeferral:
		return fmt.Sprintf("`irqpilot plan --policy efficiency --device %s` (napi_defer_hard_irqs 2, gro_flush_timeout 20 µs), or tighten coalescing (`ethtool -C %s rx-usecs …`).", f.Device, f.Device)
	}
	return ""
}

// spareCPUs names the CPUs that could take receive work: "onto CPUs with
// spare time only (now 1-3)", or that none could.
func spareCPUs(h *host.Host, l *load.Load) string {
	var all cpuset.Set
	if h != nil && !h.Topology.Online.IsEmpty() {
		all = h.Topology.Online
	} else {
		for _, c := range l.CPUs {
			all = all.Add(c.ID)
		}
	}
	if s := diagnose.WithHeadroom(l, all, 0); !s.IsEmpty() {
		return fmt.Sprintf("onto CPUs with spare time only (now %s)", s)
	}
	return fmt.Sprintf("but no CPU has spare time now (all above %.0f%% busy): more CPUs or less load help, moving work does not", diagnose.HeadroomBusyMaxPct)
}

// planCommands are p's changes as the shell commands that make them by
// hand: the kernel files of IRQ affinity, RPS and NAPI, the RFS sysctl,
// taskset for processes. A plan entry without one (irqbalance, a selector
// that is not a PID) is left to `irqpilot apply`.
func planCommands(p *plan.Plan) []string {
	var out []string
	if p.Irqbalance != nil && p.Irqbalance.Mode == plan.IrqbalanceStop {
		out = append(out, "systemctl stop irqbalance")
	}
	for _, e := range p.IRQs {
		if e.IRQ != nil {
			out = append(out, fmt.Sprintf("echo %s > /proc/irq/%d/smp_affinity_list", e.CPUs, *e.IRQ))
		}
	}
	if p.RPSSockFlowEntries != nil {
		out = append(out, fmt.Sprintf("sysctl -w net.core.rps_sock_flow_entries=%d", p.RPSSockFlowEntries.Value))
	}
	for _, e := range p.RxQueues {
		q := "rx-N"
		if e.Queue != nil {
			q = fmt.Sprintf("rx-%d", *e.Queue)
		}
		if e.RPSCPUs != nil {
			out = append(out, fmt.Sprintf("echo %s > /sys/class/net/%s/queues/%s/rps_cpus", e.RPSCPUs.Mask(0), e.Device, q))
		}
		if e.RPSFlowCnt != nil {
			out = append(out, fmt.Sprintf("echo %d > /sys/class/net/%s/queues/%s/rps_flow_cnt", *e.RPSFlowCnt, e.Device, q))
		}
	}
	for _, e := range p.NAPI {
		if e.ID != nil {
			continue
		}
		if e.Threaded != nil {
			v := 0
			if *e.Threaded {
				v = 1
			}
			out = append(out, fmt.Sprintf("echo %d > /sys/class/net/%s/threaded", v, e.Device))
		}
		if e.CPUs != nil {
			out = append(out, fmt.Sprintf("for p in $(pgrep '^napi/%s-'); do taskset -pc %s $p; done", e.Device, e.CPUs))
		}
	}
	for _, a := range p.Apps {
		if a.PID != 0 {
			out = append(out, fmt.Sprintf("taskset -apc %s %d", a.CPUs, a.PID))
		}
	}
	return out
}
