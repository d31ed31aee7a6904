package policy

import (
	"fmt"
	"maps"
	"slices"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/diagnose"
	"github.com/irqpilot/irqpilot/internal/load"
	"github.com/irqpilot/irqpilot/internal/plan"
)

// Threaded NAPI as one of auto's candidates. With threaded NAPI
// (sys/class/net/DEV/threaded, kernel 5.12) each NAPI instance of a device
// is polled by a kernel thread of its own, napi/DEV-ID, instead of in the
// softirq of the CPU that scheduled it: the driver's poll, GRO and the
// protocol stack up to the socket queue then run wherever that thread is
// placed, and the scheduler can time-share it with other work instead of
// it preempting whatever runs on the interrupted CPU.
//
// The candidate: when the measurement shows a saturated CPU (hot, and at
// most diagnose.BoundIdlePct idle) and a steered device can run threaded NAPI,
// turn it on and place the device's NAPI threads on the usable CPUs with
// headroom (diagnose.Headroom: measured spare time); without any, there is no
// candidate. A device can run threaded NAPI when
// the host read lists NAPI instances of it (netlink napi-get): the
// dev-threaded setting changes nothing on a device without any — a veth
// without GRO or XDP, a driver without NAPI — and a capture without NAPI
// facts (an older host, an older irqpilot) cannot show it has any.
//
// The model (predictNAPIThreads) treats it like RPS's moved work: the
// device's network softirq moves, times a coefficient, evenly onto the
// thread CPUs, and the CPU that schedules the poll keeps a wake-up cost.
const (
	// NAPIThreadMoved: share of a device's network softirq that runs in its
	// NAPI threads. Documentation/networking/napi.rst ("Threaded NAPI is an
	// operating mode that uses dedicated kernel threads rather than
	// software IRQ context for NAPI processing"): net/core/dev.c's
	// napi_threaded_poll runs the same __napi_poll — driver poll, GRO, the
	// protocol stack up to the socket queue — so without RPS all of NET_RX
	// moves, the driver's part included (which RPS leaves on the IRQ CPU:
	// RPSMovedHardware 0.8). What stays is NET_TX's qdisc and completion
	// work (net_tx_action), small on a receive-bound CPU. Measured here:
	// the seed-004 udp flood through the veth's NAPI put 63 % softirq on
	// CPU 0, threaded 0 % (docs/benchmarks.md, "Threaded NAPI with the
	// NAPI path on"). 0.95, the share RPS moved on the same scenario, is
	// used for hardware and virtual devices alike, keeping the NET_TX
	// share. The hardirq stays where it is.
	NAPIThreadMoved = 0.95
	// NAPIThreadWakeCost: extra time on the scheduling CPU per unit moved
	// (a thread wake-up, wake_up_process() from napi_schedule, where RPS
	// sends an IPI per backlog batch): taken equal to RPSIPICost, an
	// estimate of the same order.
	NAPIThreadWakeCost = RPSIPICost
)

type namedPlan struct {
	name string
	p    *plan.Plan
}

// napiThreadedPlans are the threaded NAPI candidates for the hot CPUs
// the measurement l shows saturated.
func napiThreadedPlans(b *builder, ts []*target, l *load.Load, hot cpuset.Set) []namedPlan {
	return napiThreadedPlansOff(b, ts, l, saturatedHot(b, l, hot))
}

// saturatedHot are the usable CPUs among hot at most diagnose.BoundIdlePct
// idle in l.
func saturatedHot(b *builder, l *load.Load, hot cpuset.Set) cpuset.Set {
	var sat cpuset.Set
	for _, c := range l.CPUs {
		if !c.NoTicks && b.usable.Contains(c.ID) && hot.Contains(c.ID) && c.Idle <= diagnose.BoundIdlePct {
			sat = sat.Add(c.ID)
		}
	}
	return sat
}

// napiThreadedPlansOff are the threaded NAPI candidates that take receive
// processing off the saturated CPUs sat (auto keeps sat from the
// measurement while it decides again on disturbed copies of it).
func napiThreadedPlansOff(b *builder, ts []*target, l *load.Load, sat cpuset.Set) []namedPlan {
	if sat.IsEmpty() {
		return nil
	}
	// The threads go only where the measurement shows spare time
	// (diagnose.Headroom): elsewhere they would take time from what runs there.
	to := diagnose.WithHeadroom(l, b.usable.Difference(sat), 0)
	if to.IsEmpty() {
		return nil
	}
	where := fmt.Sprintf("with headroom (busy below %.0f%%)", diagnose.HeadroomBusyMaxPct)
	var out []namedPlan
	for _, t := range ts {
		napis := b.h.NAPIsOf(t.nic.Name)
		if len(napis) == 0 {
			continue
		}
		cpus := to
		p := &plan.Plan{Version: plan.Version, Policy: "auto", Host: b.h.Hostname}
		p.NAPI = append(p.NAPI, plan.NAPIEntry{Device: t.nic.Name, Threaded: ptr(true), CPUs: &cpus,
			Reason: fmt.Sprintf("threaded NAPI: the receive processing of %s's %d NAPI instance(s) runs in kernel threads on CPUs %s, %s, instead of in softirq on saturated CPU %s; the scheduler can share those threads with other work (a thread that does not exist yet is placed by a second apply)",
				t.nic.Name, len(napis), cpus, where, sat)})
		out = append(out, namedPlan{fmt.Sprintf("threaded NAPI for %s on CPUs %s", t.nic.Name, cpus), p})
	}
	return out
}

// predictNAPIThreads moves, in st, the network softirq of every device p
// makes threaded with placed threads (a device-wide napi entry with
// threaded and cpus) onto those CPUs, like RPS (see the constants above),
// and the measured time of the device's NAPI threads that already run
// (threaded before the plan) off the CPUs outside those.
// devNet is each device's network softirq per CPU after p's IRQ moves;
// a device p also steers with RPS is left to RPS (the model does not split
// the two), and so is one without NAPI instances or with unplaced threads.
func (m *model) predictNAPIThreads(p *plan.Plan, st map[int]cpuUse, devNet map[string]map[int]float64, steered map[string]bool) {
	done := map[string]bool{}
	for _, e := range p.NAPI {
		if e.ID != nil || e.Threaded == nil || !*e.Threaded || e.CPUs == nil || e.CPUs.IsEmpty() ||
			done[e.Device] || steered[e.Device] || len(m.h.NAPIsOf(e.Device)) == 0 {
			continue
		}
		done[e.Device] = true
		moveNetSoft(st, devNet[e.Device], NAPIThreadMoved, *e.CPUs, NAPIThreadWakeCost)
		// In PID order: a fixed order of float sums.
		for _, pid := range slices.Sorted(maps.Keys(m.napiThreads)) {
			if !napiThreadOf(m.napiThreads[pid], e.Device) {
				continue
			}
			for _, c := range slices.Sorted(maps.Keys(m.tasks[pid])) {
				if v := m.tasks[pid][c]; !e.CPUs.Contains(c) {
					moveScaled(st, c, v, 1, *e.CPUs, func(u *cpuUse) *float64 { return &u.other })
				}
			}
		}
	}
}
