package diagnose

import (
	"fmt"
	"sort"
	"strings"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/load"
)

// nicQueueIRQs returns the NIC's queue IRQs (by the rx/tx queue lists, then
// by the IRQ table's device+queue).
func nicQueueIRQs(h *host.Host, n *host.NIC) []int {
	seen := map[int]bool{}
	var out []int
	add := func(p *int) {
		if p != nil && !seen[*p] {
			seen[*p] = true
			out = append(out, *p)
		}
	}
	for i := range n.RxQueues {
		add(n.RxQueues[i].IRQ)
	}
	for i := range n.TxQueues {
		add(n.TxQueues[i].IRQ)
	}
	for i := range h.IRQs {
		if q := &h.IRQs[i]; q.Device == n.Name && q.Queue != nil && !seen[q.Number] {
			seen[q.Number] = true
			out = append(out, q.Number)
		}
	}
	sort.Ints(out)
	return out
}

func rpsOn(n *host.NIC) bool {
	for _, q := range n.RxQueues {
		if q.RPSCPUs != nil && !q.RPSCPUs.IsEmpty() {
			return true
		}
	}
	return false
}

func nicIRQsOneCPU(h *host.Host, l *load.Load) []Finding {
	if h == nil || l == nil || onlineCount(h, l) < 2 {
		return nil
	}
	var out []Finding
	for i := range h.NICs {
		n := &h.NICs[i]
		irqs := nicQueueIRQs(h, n)
		if len(irqs) < 2 {
			continue
		}
		var landed cpuset.Set
		var total float64
		var evs []Evidence
		for _, q := range irqs {
			r := l.IRQ(q)
			if r == nil {
				continue
			}
			total += r.Rate
			landed = landed.Union(r.CPUs)
			evs = append(evs, ev(irqLabel(h, q)+" rate", r.Rate, "/s"))
		}
		if total < ActiveIRQRate || landed.Len() != 1 {
			continue
		}
		cpu := landed.Min()
		// Evidence of harm: that CPU is busy with interrupt work. A NIC
		// whose queues all land on one lightly loaded CPU costs nothing.
		busy := cpuIRQTime(l, cpu)
		if busy < BoundIRQPct {
			continue
		}
		evs = append(evs, ev(fmt.Sprintf("CPU%d %%irq+%%soft", cpu), busy, "%"))
		f := Finding{
			ID: IDNICOneCPU, Severity: Warning, CPUs: []int{cpu},
			Summary:  fmt.Sprintf("All %d queue IRQs of %s landed on CPU%d (%.0f interrupts/s)", len(irqs), n.Name, cpu, total),
			Evidence: append(evs, ev(n.Name+" queue IRQs", float64(len(irqs)), "irqs")),
			Why:      "The NIC spreads packets over several queues so that several CPUs can take them; with every queue's IRQ on one CPU that CPU does all the work.",
			Device:   n.Name, IRQs: nicIRQsOn(h, l, n, cpu),
		}
		if rpsOn(n) {
			f.Severity = Info
			f.Summary += "; RPS is on, as in the dedicated-core layout (ClustrixDB core-0 write-up)"
		}
		out = append(out, f)
	}
	return out
}

func fewQueuesNoRPS(h *host.Host, l *load.Load) []Finding {
	if h == nil {
		return nil
	}
	ncpu := 0
	if l != nil {
		ncpu = onlineCount(h, l)
	} else {
		ncpu = h.Topology.Online.Len()
	}
	var out []Finding
	for i := range h.NICs {
		n := &h.NICs[i]
		if n.Virtual || len(n.RxQueues) == 0 || len(n.RxQueues) >= ncpu || rpsOn(n) {
			continue
		}
		known := false
		for _, q := range n.RxQueues {
			known = known || q.RPSCPUs != nil
		}
		if !known {
			continue // RPS state unreadable: say nothing
		}
		var rate float64
		var cpus cpuset.Set
		if l != nil {
			for _, q := range nicQueueIRQs(h, n) {
				if r := l.IRQ(q); r != nil {
					rate += r.Rate
					cpus = cpus.Union(r.CPUs)
				}
			}
		}
		// Evidence of harm: the CPUs taking the queue IRQs are busy with
		// interrupt work. Without a measurement, or with idle queue CPUs,
		// fewer queues than CPUs is not a problem (an idle VM).
		var busy float64
		for _, c := range cpus.CPUs() {
			busy = max(busy, cpuIRQTime(l, c))
		}
		if l == nil || rate < ActiveIRQRate || busy < BoundIRQPct {
			continue
		}
		sev := Warning
		if busy >= CriticalIRQPct {
			sev = Critical
		}
		out = append(out, Finding{
			ID: IDFewQueuesNoRPS, Severity: sev, CPUs: nilIfEmpty(cpus.CPUs()),
			Summary: fmt.Sprintf("%s has %d rx queue(s) for %d CPUs and RPS is off", n.Name, len(n.RxQueues), ncpu),
			Evidence: []Evidence{
				ev(n.Name+" rx queues", float64(len(n.RxQueues)), "queues"),
				ev("online CPUs", float64(ncpu), "cpus"),
				ev(n.Name+" queue IRQ rate", rate, "/s"),
				ev("busiest queue-IRQ CPU %irq+%soft", busy, "%"),
			},
			Why:    "Without RPS, each packet's protocol processing runs on the CPU that took the queue's interrupt, so at most as many CPUs as queues work on receive (RPS/RFS on a single-queue NIC: one queue, CPU0 52.8% softirq).",
			Device: n.Name, IRQs: nicQueueIRQs(h, n),
		})
	}
	return out
}

// nicIRQsOn are n's queue IRQs that fired on cpu, busiest first.
func nicIRQsOn(h *host.Host, l *load.Load, n *host.NIC, cpu int) []int {
	var out []int
	for _, q := range nicQueueIRQs(h, n) {
		if r := l.IRQ(q); r != nil && r.PerCPU[cpu] >= ActiveIRQRate {
			out = append(out, q)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return l.IRQ(out[i]).PerCPU[cpu] > l.IRQ(out[j]).PerCPU[cpu] })
	return out
}

func nilIfEmpty(s []int) []int {
	if len(s) == 0 {
		return []int{}
	}
	return s
}

func rpsIPIOverhead(h *host.Host, l *load.Load) []Finding {
	if h == nil || l == nil || len(l.Softnet) == 0 {
		return nil
	}
	var nics []string
	for i := range h.NICs {
		if rpsOn(&h.NICs[i]) {
			nics = append(nics, h.NICs[i].Name)
		}
	}
	if len(nics) == 0 {
		return nil
	}
	var ipi, processed float64
	var cpus []int
	for _, s := range l.Softnet {
		ipi += s.ReceivedRPS
		processed += s.Processed
		if s.ReceivedRPS > 0 {
			cpus = append(cpus, s.CPU)
		}
	}
	if ipi < RPSIPIRate || processed == 0 || ipi/processed < RPSIPIPerPkt {
		return nil
	}
	var cal float64
	for _, c := range l.CPUs {
		cal += c.FunctionCall
	}
	f := Finding{
		ID: IDRPSIPIOverhead, Severity: Warning, CPUs: cpus,
		Summary: fmt.Sprintf("RPS on %s wakes other CPUs %.0f times/s for %.0f packets/s (%.2f IPIs per packet)",
			strings.Join(nics, ", "), ipi, processed, ipi/processed),
		Evidence: []Evidence{
			ev("RPS IPIs received (softnet received_rps)", ipi, "/s"),
			ev("packets processed (softnet processed)", processed, "/s"),
			ev("IPIs per packet", ipi/processed, ""),
			ev("function-call IPIs (CAL) all CPUs", cal, "/s"),
		},
		Why: "Each RPS hand-off costs an inter-processor interrupt and a cache miss on the target CPU; when batches are small the IPIs cost more than the spread saves (ClustrixDB core-0 write-up: on bare metal RPS only tied irqbalance).",
	}
	for _, s := range l.Softnet {
		if s.ReceivedRPS > 0 {
			f.Evidence = append(f.Evidence, ev(fmt.Sprintf("CPU%d received_rps", s.CPU), s.ReceivedRPS, "/s"))
		}
	}
	return []Finding{f}
}
