package diagnose

import (
	"fmt"
	"slices"
	"strings"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/load"
)

func irqRemoteNUMA(h *host.Host, l *load.Load) []Finding {
	if h == nil || len(h.Topology.Nodes) < 2 {
		return nil
	}
	var out []Finding
	for i := range h.IRQs {
		q := &h.IRQs[i]
		if !q.Movable() || q.Class == host.ClassTimer {
			continue
		}
		node := h.IRQNode(q)
		if node < 0 {
			continue
		}
		var served cpuset.Set
		rate := 0.0
		if l != nil {
			if r := l.IRQ(q.Number); r != nil {
				served, rate = r.CPUs, r.Rate
			}
		}
		if served.IsEmpty() && q.EffectiveAffinity != nil {
			served = *q.EffectiveAffinity
		}
		if served.IsEmpty() {
			continue
		}
		remote := true
		var nodes []string
		for _, c := range served.CPUs() {
			cn := h.CPUNode(c)
			if cn == node || cn < 0 {
				remote = false
			}
			nodes = append(nodes, fmt.Sprintf("CPU%d node %d", c, cn))
		}
		if !remote {
			continue
		}
		sev := Info
		if rate >= ActiveIRQRate {
			sev = Warning
		}
		out = append(out, Finding{
			ID: IDIRQRemoteNUMA, Severity: sev, CPUs: served.CPUs(),
			Summary: fmt.Sprintf("%s is served on CPU(s) %s of another NUMA node than its device (node %d)", irqLabel(h, q.Number), served, node),
			Evidence: []Evidence{
				ev(irqLabel(h, q.Number)+" device node", float64(node), "node"),
				ev(irqLabel(h, q.Number)+" rate", rate, "/s"),
			},
			Why:    "The device writes packets and completions into memory on its own node; handling them on another node adds cross-node memory traffic to every interrupt (" + strings.Join(nodes, ", ") + ").",
			Device: q.Device, IRQs: []int{q.Number},
		})
	}
	return out
}

// busyApps are the application threads at least AppBusyPct busy on cpu:
// their processes (first seen first), evidence, names and total use.
func busyApps(l *load.Load, cpu int) (pids []int, evs []Evidence, names []string, busy float64) {
	for _, t := range l.Tasks {
		if t.Kernel || t.CPU != cpu || t.Busy < AppBusyPct {
			continue
		}
		if !slices.Contains(pids, t.PID) {
			pids = append(pids, t.PID)
		}
		busy += t.Busy
		evs = append(evs, ev(fmt.Sprintf("thread %d (%s, pid %d) CPU use", t.TID, t.Comm, t.PID), t.Busy, "%"))
		if len(names) < 5 {
			names = append(names, fmt.Sprintf("%s[%d]", t.Comm, t.TID))
		}
	}
	// A thread is counted on the CPU it last ran on, and its ticks are read
	// a little after the sample's clock: their sum can exceed what the CPU
	// has, which is measurement skew, not use.
	return pids, evs, names, min(busy, 100)
}

func appOnIRQCPU(h *host.Host, l *load.Load) []Finding {
	if l == nil || len(l.Tasks) == 0 || len(l.CPUs) < 2 {
		return nil
	}
	hot := -1
	for i := range l.CPUs {
		if l.CostPct(&l.CPUs[i]) >= HotIRQPct && (hot < 0 || l.CostPct(&l.CPUs[i]) > l.CostPct(&l.CPUs[hot])) {
			hot = i
		}
	}
	if hot < 0 {
		return nil
	}
	c := &l.CPUs[hot]
	pids, threads, names, busy := busyApps(l, c.ID)
	if len(threads) == 0 {
		return nil
	}
	sev := Info
	if c.Idle <= BoundIdlePct {
		sev = Warning
	}
	evs := append([]Evidence{
		ev(fmt.Sprintf("CPU%d %%irq+%%soft", c.ID), c.IRQTime(), "%"),
		ev(fmt.Sprintf("CPU%d %%idle", c.ID), c.Idle, "%"),
		ev(fmt.Sprintf("CPU%d interrupt time, %s", c.ID, load.CostDescription(l.CostSource)), l.CostPct(c), "%"),
	}, threads...)
	for _, o := range otherCPUs(h, l, c.ID).CPUs() {
		if hr := HeadroomOf(l, o); hr.Measured {
			evs = append(evs, ev(fmt.Sprintf("CPU%d spare time (up to %.0f%% busy)", o, HeadroomBusyMaxPct), hr.Spare, "%"))
		}
	}
	evs = append(evs, ev(fmt.Sprintf("application threads' use of CPU%d", c.ID), busy, "%"))
	return []Finding{{
		appThreads: threads,
		ID:         IDAppOnIRQCPU, Severity: sev, CPUs: []int{c.ID},
		Summary: fmt.Sprintf("Busy application threads run on CPU%d, the CPU with the most interrupt work (%.1f%%): %s",
			c.ID, c.IRQTime(), strings.Join(names, ", ")),
		Evidence: evs,
		Why:      "Interrupts preempt the application on this CPU and the application delays the softirq work; unless this is deliberate full affinity (Intel IRQ+process affinity study, one worker per queue), both lose.",
		Device:   cpuNIC(h, l, c.ID), PIDs: pids,
	}}
}

func irqbalanceWithManual(h *host.Host, l *load.Load) []Finding {
	if h == nil || !h.Irqbalance.Running {
		return nil
	}
	var manual []string
	for i := range h.NICs {
		if rpsOn(&h.NICs[i]) {
			manual = append(manual, "RPS on "+h.NICs[i].Name)
		}
	}
	if h.RPSSockFlowEntries != nil && *h.RPSSockFlowEntries > 0 {
		manual = append(manual, fmt.Sprintf("rps_sock_flow_entries=%d", *h.RPSSockFlowEntries))
	}
	if len(manual) == 0 {
		return nil
	}
	return []Finding{{
		ID: IDIrqbalanceManual, Severity: Warning, CPUs: []int{},
		Summary:  fmt.Sprintf("irqbalance (pid %d) is running alongside manual steering: %s", h.Irqbalance.PID, strings.Join(manual, "; ")),
		Evidence: []Evidence{ev("irqbalance pid", float64(h.Irqbalance.PID), "pid"), ev("manual settings", float64(len(manual)), "settings")},
		Why:      "irqbalance moves IRQs every 10 s by its own rules; hand-placed IRQs and steering designed around a fixed placement drift apart from it (the ClustrixDB core-0 write-up and AWS Graviton memcached tuning stop irqbalance first).",
	}}
}

func managedIRQs(h *host.Host, l *load.Load) []Finding {
	if h == nil {
		return nil
	}
	var irqs []string
	var cpus cpuset.Set
	for i := range h.IRQs {
		q := &h.IRQs[i]
		if q.Managed != host.ManagedYes {
			continue
		}
		irqs = append(irqs, irqLabel(h, q.Number))
		if q.EffectiveAffinity != nil {
			cpus = cpus.Union(*q.EffectiveAffinity)
		}
	}
	if len(irqs) == 0 {
		return nil
	}
	return []Finding{{
		ID: IDManagedIRQs, Severity: Info, CPUs: nilIfEmpty(cpus.CPUs()),
		Summary:  fmt.Sprintf("%d kernel-managed IRQ(s): %s", len(irqs), strings.Join(irqs, ", ")),
		Evidence: []Evidence{ev("managed IRQs", float64(len(irqs)), "irqs")},
		Why:      "The driver asked the kernel to spread these queue vectors over the CPUs (one per CPU group); the kernel refuses affinity writes to them (EPERM/EIO). They need no moving: each queue's interrupt already arrives on the CPUs that submit to it.",
	}}
}

func softnetDrops(h *host.Host, l *load.Load) []Finding {
	if l == nil {
		return nil
	}
	var cpus []int
	var evs []Evidence
	var total float64
	for _, s := range l.Softnet {
		if d := s.Dropped + s.FlowLimit; d > 0 {
			cpus = append(cpus, s.CPU)
			total += d
			evs = append(evs, ev(fmt.Sprintf("CPU%d dropped", s.CPU), s.Dropped, "/s"))
			if s.FlowLimit > 0 {
				evs = append(evs, ev(fmt.Sprintf("CPU%d flow_limit drops", s.CPU), s.FlowLimit, "/s"))
			}
		}
	}
	if len(cpus) == 0 {
		return nil
	}
	return []Finding{{
		ID: IDSoftnetDrops, Severity: Warning, CPUs: cpus,
		Summary:  fmt.Sprintf("The kernel dropped %.0f packets/s because per-CPU backlogs were full", total),
		Evidence: evs,
		Why:      "Packets handed to a CPU's backlog (RPS, veth, loopback, non-NAPI drivers) are dropped when the backlog holds net.core.netdev_max_backlog packets; the sender sees loss.",
	}}
}

func softnetSqueeze(h *host.Host, l *load.Load) []Finding {
	if l == nil {
		return nil
	}
	var cpus []int
	var evs []Evidence
	for _, s := range l.Softnet {
		netrx := 0.0
		if c := l.CPU(s.CPU); c != nil {
			netrx = c.NetRx
		}
		if s.TimeSqueeze >= SqueezeRate && (netrx == 0 || s.TimeSqueeze/netrx >= SqueezeRatio) {
			cpus = append(cpus, s.CPU)
			evs = append(evs, ev(fmt.Sprintf("CPU%d time_squeeze", s.CPU), s.TimeSqueeze, "/s"),
				ev(fmt.Sprintf("CPU%d NET_RX softirqs", s.CPU), netrx, "/s"))
		}
	}
	if len(cpus) == 0 {
		return nil
	}
	return []Finding{{
		ID: IDSoftnetSqueeze, Severity: Warning, CPUs: cpus,
		Summary:  fmt.Sprintf("Receive processing on CPU(s) %s ran out of budget with packets still waiting", cpuset.Of(cpus...)),
		Evidence: evs,
		Why:      "net_rx_action stops after net.core.netdev_budget packets or netdev_budget_usecs; the rest waits for ksoftirqd, adding latency and risking ring overflows.",
	}}
}
