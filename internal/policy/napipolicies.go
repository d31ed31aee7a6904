package policy

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/plan"
)

// The interrupt-mitigation policies: they set NAPI and busy-polling knobs
// and leave IRQ placement, steering and irqbalance alone, so they combine
// with a placement plan (merge the entries by hand). Choosing threaded-NAPI
// placement from measured evidence is the evidence-driven planner's job
// (auto); these policies decide from the host model only.

// Values the policies use, with the source of each.
const (
	// efficiencyDefer and efficiencyFlushNs: Documentation/networking/
	// napi.rst's deferral example keeps polling for 2 empty polls within a
	// 20 µs timer before re-arming the IRQ (Eric Dumazet's commit
	// 6f8b12d661d0 used the same order of magnitude).
	efficiencyDefer   = 2
	efficiencyFlushNs = 20_000
	// latencyBusyUsecs: Documentation/admin-guide/sysctl/net.rst suggests
	// 50 µs for busy_read and busy_poll.
	latencyBusyUsecs = 50
	// latencyDefer, latencyFlushNs and latencySuspendNs: napi.rst's IRQ
	// suspension example (defer 2, 200 µs flush as the safety net while
	// the application is not polling, 20 ms suspension while it is; Cai &
	// Karsten, SIGMETRICS 2024).
	latencyDefer     = 2
	latencyFlushNs   = 200_000
	latencySuspendNs = 20_000_000
)

func init() {
	Policies["latency"] = Latency
	Policies["efficiency"] = Efficiency
}

// Efficiency trades a little latency at low load for fewer interrupts and
// larger GRO batches under load: every steered NIC gets
// napi_defer_hard_irqs 2 and gro_flush_timeout 20 µs (device-wide sysfs,
// kernel 5.10+).
func Efficiency(h *host.Host, o Options) (*plan.Plan, error) {
	b, ts, err := start(h, o, "efficiency", (*builder).napiTargets)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, t := range ts {
		why := fmt.Sprintf("after a poll finds work, keep the IRQ masked and poll again up to %d times within a %d µs timer: under load one interrupt serves many packets and GRO builds larger batches; with sparse traffic a packet may wait up to %d µs",
			efficiencyDefer, efficiencyFlushNs/1000, efficiencyFlushNs/1000)
		if !hasIRQ(t, h.NAPIsOf(t.nic.Name)) {
			why = fmt.Sprintf("%s has no IRQ: after a poll finds work, poll again up to %d times within a %d µs timer instead of waiting to be woken; only softirq rescheduling and GRO batching change, and a packet may wait up to %d µs",
				t.nic.Name, efficiencyDefer, efficiencyFlushNs/1000, efficiencyFlushNs/1000)
		}
		b.p.NAPI = append(b.p.NAPI, plan.NAPIEntry{Device: t.nic.Name, DeferHardIRQs: ptr(uint32(efficiencyDefer)),
			GROFlushTimeout: ptr(uint64(efficiencyFlushNs)), Reason: why})
		names = append(names, t.nic.Name)
	}
	if len(names) == 0 {
		b.note("no network interface to set")
	}
	b.p.Why = "interrupt deferral instead of per-packet interrupts: fewer IRQs and softirq runs per packet (CPU efficiency) for a bounded latency cost; IRQ placement and steering are left as they are"
	if len(names) > 0 {
		b.p.Why += ": " + strings.Join(names, ", ")
	}
	b.p.Notes = append(b.p.Notes, "leaves IRQ affinity, RPS/XPS and irqbalance alone: combine with a placement policy if needed")
	return b.p, nil
}

// Latency lowers receive latency in one of two ways:
//   - the consumer's CPUs known (--app-cpus): threaded NAPI with each NAPI
//     kernel thread placed beside the consumer (its SMT sibling, else a CPU
//     sharing its L3, never the consumer's own CPUs), so receive
//     processing neither interrupts the consumer nor crosses caches;
//   - otherwise busy polling for applications: net.core.busy_read and
//     busy_poll 50 µs (machine-wide), and IRQ suspension on every NAPI
//     instance the host reports (20 ms while an application that opted in
//     with SO_PREFER_BUSY_POLL / epoll busy-poll parameters keeps finding
//     events), with deferral (2, 200 µs) as the safety net.
func Latency(h *host.Host, o Options) (*plan.Plan, error) {
	b, ts, err := start(h, o, "latency", (*builder).napiTargets)
	if err != nil {
		return nil, err
	}
	if o.AppCPUs != nil && !o.AppCPUs.IsEmpty() {
		return b.latencyThreaded(ts, *o.AppCPUs)
	}
	b.p.BusyPoll = &plan.BusyPollEntry{BusyRead: ptr(latencyBusyUsecs), BusyPoll: ptr(latencyBusyUsecs),
		Reason: fmt.Sprintf("sockets busy-poll their device queue for up to %d µs before sleeping: lower wake-up latency, paid in CPU spinning; machine-wide (an application can instead set SO_BUSY_POLL on its own sockets)", latencyBusyUsecs)}
	var suspended []string
	without := map[string][]string{} // why → what
	noSet := h.NAPISet != nil && !*h.NAPISet
	for _, t := range ts {
		napis := h.NAPIsOf(t.nic.Name)
		irq := hasIRQ(t, napis)
		if !irq && len(napis) == 0 {
			// A device with neither an interrupt nor a NAPI instance
			// (a veth without GRO or XDP): nothing to suspend or defer.
			b.note("%s has no IRQ and no NAPI instance: no suspension or deferral to set", t.nic.Name)
			continue
		}
		// A device without an interrupt but with NAPI instances (a veth
		// with GRO): its NAPI is scheduled by the sender instead of an
		// IRQ, and the same timers keep it polling instead.
		reason := fmt.Sprintf("safety net for IRQ suspension: when the application stops polling, the device is polled on a %d µs timer (%d empty polls) before its IRQ is re-armed", latencyFlushNs/1000, latencyDefer)
		suspendWhy := fmt.Sprintf("IRQ suspension: while an application that opted in (SO_PREFER_BUSY_POLL, epoll busy-poll) keeps finding events, the IRQ stays off for up to %d ms — busy-poll latency at interrupt-level CPU cost (Cai & Karsten, SIGMETRICS 2024)", latencySuspendNs/1_000_000)
		if !irq {
			reason = fmt.Sprintf("safety net for suspension: %s has no IRQ; when the application stops polling, its NAPI is polled on a %d µs timer (%d empty polls) before it waits for the sender to schedule it again", t.nic.Name, latencyFlushNs/1000, latencyDefer)
			suspendWhy = fmt.Sprintf("NAPI suspension (%s has no IRQ; the sender schedules its NAPI): while an application that opted in (SO_PREFER_BUSY_POLL, epoll busy-poll) keeps finding events, the NAPI is left to it for up to %d ms instead of the softirq (Cai & Karsten, SIGMETRICS 2024)", t.nic.Name, latencySuspendNs/1_000_000)
		}
		b.p.NAPI = append(b.p.NAPI, plan.NAPIEntry{Device: t.nic.Name, DeferHardIRQs: ptr(uint32(latencyDefer)), GROFlushTimeout: ptr(uint64(latencyFlushNs)),
			Reason: reason})
		switch {
		case noSet:
			without["this kernel's netdev netlink family has no napi-set operation"] = append(without["this kernel's netdev netlink family has no napi-set operation"], t.nic.Name)
			continue
		case len(napis) == 0:
			why := plan.NAPIUnsupported(h, t.nic.Name)
			without[why] = append(without[why], t.nic.Name)
			continue
		}
		for _, n := range napis {
			if n.IRQSuspendTimeout == nil {
				const why = "the kernel reports no irq-suspend-timeout for these NAPI instances"
				without[why] = append(without[why], fmt.Sprintf("%s napi %d", t.nic.Name, n.ID))
				continue
			}
			b.p.NAPI = append(b.p.NAPI, plan.NAPIEntry{Device: t.nic.Name, ID: ptr(n.ID), IRQSuspendTimeout: ptr(uint64(latencySuspendNs)),
				Reason: suspendWhy})
			suspended = append(suspended, fmt.Sprintf("%s napi %d", t.nic.Name, n.ID))
		}
	}
	for _, why := range slices.Sorted(maps.Keys(without)) {
		b.note("no IRQ suspension for %s: %s", strings.Join(without[why], ", "), why)
	}
	b.p.Why = "busy polling: applications poll the device instead of waiting for its interrupt"
	if len(suspended) > 0 {
		b.p.Why += fmt.Sprintf("; IRQ suspension on %d NAPI instance(s) for applications that opt in", len(suspended))
	}
	b.p.Why += "; give --app-cpus to place threaded NAPI beside the consumer instead"
	b.p.Notes = append(b.p.Notes, "leaves IRQ affinity, RPS/XPS and irqbalance alone: combine with a placement policy if needed")
	return b.p, nil
}

// hasIRQ reports whether a steered device has an interrupt: a queue IRQ,
// an IRQ its NAPI instances report, or any IRQ of a physical NIC.
func hasIRQ(t *target, napis []host.NAPI) bool {
	if len(t.queues) > 0 || !t.nic.Virtual || len(t.nic.IRQs) > 0 {
		return true
	}
	for _, n := range napis {
		if n.IRQ != nil {
			return true
		}
	}
	return false
}

// latencyThreaded is the threaded-NAPI form of Latency.
func (b *builder) latencyThreaded(ts []*target, app cpuset.Set) (*plan.Plan, error) {
	beside := b.besideCPUs(app)
	var placed []string
	for _, t := range ts {
		e := plan.NAPIEntry{Device: t.nic.Name, Threaded: ptr(true)}
		if beside.IsEmpty() {
			e.Reason = "threaded NAPI: receive processing in kernel threads the scheduler can keep off the consumer's CPUs"
			b.note("%s: no usable CPU beside the consumer's %s; NAPI threads are left where the scheduler puts them", t.nic.Name, app)
		} else {
			e.CPUs = &beside
			e.Reason = fmt.Sprintf("threaded NAPI, each kernel thread on %s beside the consumer on %s: receive work does not interrupt the consumer and stays in the cache it shares (a thread that does not exist yet is placed by a second apply)", beside, app)
		}
		b.p.NAPI = append(b.p.NAPI, e)
		placed = append(placed, t.nic.Name)
	}
	b.p.Why = "threaded NAPI beside the consumer: receive processing runs in placed kernel threads next to the application's CPUs " + app.String()
	if len(placed) > 0 {
		b.p.Why += ": " + strings.Join(placed, ", ")
	}
	b.p.Notes = append(b.p.Notes, "leaves IRQ affinity, RPS/XPS and irqbalance alone: combine with a placement policy if needed")
	return b.p, nil
}

// besideCPUs: the usable SMT siblings of the consumer's CPUs, else usable
// CPUs sharing their L3 (or NUMA node), else any usable CPU — never the
// consumer's own.
func (b *builder) besideCPUs(app cpuset.Set) cpuset.Set {
	free := b.usable.Difference(app)
	if s := b.siblingsOf(app).Intersect(free); !s.IsEmpty() {
		return s
	}
	var l3 cpuset.Set
	for _, c := range app.CPUs() {
		if cpu := b.cpuOf[c]; cpu != nil {
			l3 = l3.Union(cpu.L3)
		}
	}
	if s := l3.Intersect(free); !s.IsEmpty() {
		return s
	}
	return free
}

// napiTargets are the steered NICs the model has as interfaces: a NIC known
// only from its IRQs (a capture without its sysfs class entry) has no NAPI
// knobs to set here.
func (b *builder) napiTargets() ([]*target, error) {
	ts, err := b.targets()
	if err != nil {
		return nil, err
	}
	var out []*target
	var unseen []string
	for _, t := range ts {
		if b.h.NIC(t.nic.Name) == nil {
			unseen = append(unseen, t.nic.Name)
			continue
		}
		out = append(out, t)
	}
	if len(unseen) > 0 {
		b.note("%s: known only from IRQs (no /sys/class/net entry in this capture): no NAPI settings", strings.Join(unseen, ", "))
	}
	return out, nil
}
