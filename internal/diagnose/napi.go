package diagnose

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/load"
)

// NAPI findings: each needs NAPI facts in the host model (inventory's
// napi[], kernel 6.9+) and measured harm; without either they stay silent.
const (
	IDNAPIBudget       = "napi-budget-exhausted"
	IDIRQStormDeferral = "irq-storm-deferrable"
	IDNAPIThreadShared = "napi-thread-on-consumer-cpu"
)

// Thresholds of the NAPI rules.
const (
	// irq-storm-deferrable: one NIC queue IRQ firing at least StormIRQRate
	// times a second on a CPU spending at least HotIRQPct in interrupt
	// context, with deferral off on the NIC's NAPI instances.
	StormIRQRate = 20000.0
	// napi-thread-on-consumer-cpu: a NAPI kernel thread and an application
	// thread each at least AppBusyPct busy on one CPU left with at most
	// BoundIdlePct idle.
)

// napiDevices maps each NIC with NAPI instances to them.
func napiDevices(h *host.Host) map[string][]host.NAPI {
	if h == nil || len(h.NAPI) == 0 {
		return nil
	}
	out := map[string][]host.NAPI{}
	for _, n := range h.NAPI {
		out[n.Device] = append(out[n.Device], n)
	}
	return out
}

// napiIRQs are the IRQs serving NIC dev's NAPI instances: the ones netlink
// names, else the NIC's queue IRQs.
func napiIRQs(h *host.Host, dev string, napis []host.NAPI) []int {
	seen := map[int]bool{}
	var out []int
	for _, n := range napis {
		if n.IRQ != nil && !seen[*n.IRQ] {
			seen[*n.IRQ] = true
			out = append(out, *n.IRQ)
		}
	}
	if len(out) == 0 {
		if nic := h.NIC(dev); nic != nil {
			out = nicQueueIRQs(h, nic)
		}
	}
	sort.Ints(out)
	return out
}

func isNAPIThread(t load.TaskLoad) bool { return t.Kernel && strings.HasPrefix(t.Comm, "napi/") }

// napiBudget: time_squeeze rising on a CPU where NAPI instances are polled
// (their IRQs land there, or a NAPI thread ran there): the polls run out of
// netdev_budget with packets left.
func napiBudget(h *host.Host, l *load.Load) []Finding {
	devs := napiDevices(h)
	if l == nil || len(devs) == 0 {
		return nil
	}
	var out []Finding
	for _, s := range l.Softnet {
		if s.TimeSqueeze < SqueezeRate {
			continue
		}
		netrx := 0.0
		if c := l.CPU(s.CPU); c != nil {
			netrx = c.NetRx
		}
		if netrx > 0 && s.TimeSqueeze/netrx < SqueezeRatio {
			continue
		}
		evs := []Evidence{ev(fmt.Sprintf("CPU%d time_squeeze", s.CPU), s.TimeSqueeze, "/s"), ev(fmt.Sprintf("CPU%d NET_RX softirqs", s.CPU), netrx, "/s")}
		var polled []string
		for _, dev := range slices.Sorted(maps.Keys(devs)) {
			for _, n := range napiIRQs(h, dev, devs[dev]) {
				if r := l.IRQ(n); r != nil && r.PerCPU[s.CPU] >= ActiveIRQRate {
					evs = append(evs, ev(fmt.Sprintf("%s on CPU%d", irqLabel(h, n), s.CPU), r.PerCPU[s.CPU], "/s"))
					polled = append(polled, dev)
					break
				}
			}
		}
		for _, t := range l.Tasks {
			if isNAPIThread(t) && t.CPU == s.CPU {
				evs = append(evs, ev(fmt.Sprintf("thread %d (%s) CPU use", t.TID, t.Comm), t.Busy, "%"))
				polled = append(polled, napiThreadDevice(h, t.Comm))
			}
		}
		if len(polled) == 0 {
			continue
		}
		out = append(out, Finding{
			ID: IDNAPIBudget, Severity: Warning, CPUs: []int{s.CPU},
			Summary:  fmt.Sprintf("NAPI polling on CPU%d (%s) runs out of budget with packets left (%.0f squeezes/s)", s.CPU, strings.Join(polled, ", "), s.TimeSqueeze),
			Evidence: evs,
			Why:      "Each NET_RX run polls NAPI instances until netdev_budget packets or netdev_budget_usecs; a squeeze defers the rest to ksoftirqd, which competes with every other thread on the CPU — latency and, when rings fill, drops.",
			Device:   polled[0],
		})
	}
	return out
}

// irqStormDeferral: a NIC queue IRQ firing very often on a CPU busy in
// interrupt context while the NIC's NAPI instances defer nothing: deferral
// (napi_defer_hard_irqs + gro_flush_timeout) would serve several packets
// per interrupt.
func irqStormDeferral(h *host.Host, l *load.Load) []Finding {
	devs := napiDevices(h)
	if l == nil || len(devs) == 0 {
		return nil
	}
	var out []Finding
	for _, dev := range slices.Sorted(maps.Keys(devs)) {
		napis := devs[dev]
		deferring := false
		for _, n := range napis {
			if (n.DeferHardIRQs != nil && *n.DeferHardIRQs > 0) || (n.GROFlushTimeout != nil && *n.GROFlushTimeout > 0) {
				deferring = true
			}
		}
		if deferring {
			continue
		}
		var evs []Evidence
		var cpus cpuset.Set
		for _, n := range napiIRQs(h, dev, napis) {
			r := l.IRQ(n)
			if r == nil || r.Rate < StormIRQRate {
				continue
			}
			for cpu, rate := range r.PerCPU {
				c := l.CPU(cpu)
				if rate < StormIRQRate/2 || c == nil || c.IRQTime() < HotIRQPct {
					continue
				}
				cpus = cpus.Add(cpu)
				evs = append(evs, ev(fmt.Sprintf("%s on CPU%d", irqLabel(h, n), cpu), rate, "/s"),
					ev(fmt.Sprintf("CPU%d %%irq+%%soft", cpu), c.IRQTime(), "%"))
			}
		}
		if len(evs) == 0 {
			continue
		}
		evs = append(evs, ev(dev+" napi_defer_hard_irqs", 0, "polls"), ev(dev+" gro_flush_timeout", 0, "ns"))
		out = append(out, Finding{
			ID: IDIRQStormDeferral, Severity: Warning, CPUs: cpus.CPUs(),
			Summary:  fmt.Sprintf("%s's queue IRQs fire at least %.0f times a second on busy CPU(s) %s with interrupt deferral off", dev, StormIRQRate, cpus),
			Evidence: evs,
			Why:      "Every interrupt costs an entry, an exit and a NAPI schedule; at these rates that overhead is a large part of the interrupt time. Deferral keeps the IRQ masked and polls again for a few µs, so one interrupt serves a batch.",
			Device:   dev,
		})
	}
	return out
}

// napiThreadShared: a NAPI kernel thread and a busy application thread on
// one saturated CPU.
func napiThreadShared(h *host.Host, l *load.Load) []Finding {
	if l == nil || len(l.Tasks) == 0 || len(napiDevices(h)) == 0 {
		return nil
	}
	var out []Finding
	byCPU := map[int][]load.TaskLoad{}
	for _, t := range l.Tasks {
		byCPU[t.CPU] = append(byCPU[t.CPU], t)
	}
	for _, cpu := range slices.Sorted(maps.Keys(byCPU)) {
		c := l.CPU(cpu)
		if c == nil || c.Idle > BoundIdlePct {
			continue
		}
		var napi, app []load.TaskLoad
		for _, t := range byCPU[cpu] {
			switch {
			case isNAPIThread(t) && t.Busy >= AppBusyPct:
				napi = append(napi, t)
			case !t.Kernel && t.Busy >= AppBusyPct:
				app = append(app, t)
			}
		}
		if len(napi) == 0 || len(app) == 0 {
			continue
		}
		evs := []Evidence{ev(fmt.Sprintf("CPU%d %%idle", cpu), c.Idle, "%")}
		var names []string
		for _, t := range append(napi, app...) {
			evs = append(evs, ev(fmt.Sprintf("thread %d (%s, pid %d) CPU use", t.TID, t.Comm, t.PID), t.Busy, "%"))
			names = append(names, fmt.Sprintf("%s[%d]", t.Comm, t.TID))
		}
		out = append(out, Finding{
			ID: IDNAPIThreadShared, Severity: Warning, CPUs: []int{cpu},
			Summary:  fmt.Sprintf("A NAPI thread and the application share saturated CPU%d (%.0f%% idle): %s", cpu, c.Idle, strings.Join(names, ", ")),
			Evidence: evs,
			Why:      "The NAPI thread produces the packets the application consumes; on one saturated CPU each waits for the other's time slice, so receive latency grows with the application's load.",
			Device:   napiThreadDevice(h, napi[0].Comm),
			PIDs:     appPIDs(app),
		})
	}
	return out
}

// napiThreadDevice is the device of NAPI thread comm ("napi/eth1-8193"):
// the host's NIC whose name the comm carries (a comm is cut at 15
// characters, so a long name is matched by its start).
func napiThreadDevice(h *host.Host, comm string) string {
	name := strings.TrimPrefix(comm, "napi/")
	if i := strings.LastIndexByte(name, '-'); i > 0 {
		name = name[:i]
	}
	if h == nil {
		return name
	}
	best := ""
	for _, n := range h.NICs {
		if n.Name == name {
			return name
		}
		if strings.HasPrefix(n.Name, name) && best == "" {
			best = n.Name
		}
	}
	if best != "" {
		return best
	}
	return name
}

// appPIDs are the processes of threads, first seen first.
func appPIDs(ts []load.TaskLoad) []int {
	var out []int
	for _, t := range ts {
		if !slices.Contains(out, t.PID) {
			out = append(out, t.PID)
		}
	}
	return out
}
