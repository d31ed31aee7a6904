package policy

import (
	"fmt"
	"strings"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/plan"
)

// interruptBound: by the device whose IRQs land on the CPU, its queue IRQs
// spread over the CPU and CPUs with room, or its receive work spread with
// RPS; with hardirq work dominating, the busiest IRQ moved whole.
func (r *remedy) interruptBound() {
	c := r.l.CPU(r.f.CPUs[0])
	if c == nil {
		return
	}
	soft := c.SoftIRQ >= c.IRQ && c.NetRx >= c.Block
	switch {
	case soft && r.f.Device != "" && r.h.NIC(r.f.Device) != nil:
		r.queueSpread()
		r.rpsOver(cpuset.Set{}, fmt.Sprintf("CPU%d's receive work", c.ID), c.SoftIRQ)
		r.help = "What would help instead: more CPUs, or less traffic per CPU; spread receive work (RPS, more queues) only onto CPUs that have spare time."
	case soft:
		r.help = fmt.Sprintf("No network device's IRQs land on CPU%d, so there is no device to steer its receive work from: steer the receiving NIC's queues (the inventory lists the NICs) only onto CPUs that have spare time.", c.ID)
	default:
		r.irqMove()
		r.help = "What would help instead: more CPUs, or fewer interrupts (coalescing, interrupt deferral)."
	}
}

// queueIRQsOn are the finding's movable IRQs of its device, busiest first.
func (r *remedy) queueIRQs() []int {
	var out []int
	for _, n := range r.f.IRQs {
		if q := r.h.IRQ(n); q != nil && q.Device == r.f.Device && q.Movable() {
			out = append(out, n)
		}
	}
	return out
}

// queueSpread spreads the device's queue IRQs, all on the finding's CPU,
// over that CPU and up to one CPU with room per further queue.
func (r *remedy) queueSpread() {
	irqs := r.queueIRQs()
	if len(irqs) < 2 || r.hot.Len() != 1 {
		return
	}
	from := r.hot.Min()
	roomy := r.roomy(r.others)
	if len(roomy) > len(irqs)-1 {
		roomy = roomy[:len(irqs)-1]
	}
	if len(roomy) == 0 {
		r.noRoom = r.noRoomFor(r.others, fmt.Sprintf("a share of CPU%d's interrupt work", from), r.l.CostPct(r.l.CPU(from))/2)
	}
	for k := len(roomy); k > 0; k-- {
		targets := append([]int{from}, roomy[:k]...)
		p := &plan.Plan{}
		for i, n := range irqs {
			to := targets[i%len(targets)]
			p.IRQs = append(p.IRQs, plan.IRQEntry{IRQ: ptr(n), CPUs: cpuset.Of(to),
				Reason: fmt.Sprintf("%s's queue IRQs share CPU%d's interrupt work with CPUs that have the time for it", r.f.Device, from)})
		}
		r.cands = append(r.cands, namedPlan{fmt.Sprintf("spread %s's queue IRQs over CPU%d and CPUs %s", r.f.Device, from, cpuset.Of(roomy[:k]...)), p})
	}
}

// rpsOver steers the device's receive work with RPS over keep and the
// CPUs with room (as many as pass the rules).
func (r *remedy) rpsOver(keep cpuset.Set, what string, pct float64) {
	ts, err := r.b.targets()
	if err != nil {
		return
	}
	var t *target
	for _, x := range ts {
		if x.nic.Name == r.f.Device && x.steer {
			t = x
		}
	}
	if t == nil {
		return
	}
	roomy := r.roomy(r.others)
	if len(roomy) == 0 && r.noRoom == "" {
		r.noRoom = r.noRoomFor(r.others, what, pct)
	}
	for k := len(roomy); k > 0; k-- {
		set := keep.Union(cpuset.Of(roomy[:k]...))
		p := rpsPlan(r.b, t, set, fmt.Sprintf("RPS spreads %s's receive work onto CPUs that have the time for it", t.nic.Name))
		if p != nil {
			r.cands = append(r.cands, namedPlan{fmt.Sprintf("RPS for %s on CPUs %s", t.nic.Name, set), p})
		}
	}
}

// irqMove moves the busiest IRQ on the finding's CPU whole onto one CPU
// with room (the kernel delivers an IRQ to one CPU of its list).
func (r *remedy) irqMove() {
	if len(r.f.IRQs) == 0 {
		return
	}
	n := r.f.IRQs[0]
	if q := r.h.IRQ(n); q == nil || !q.Movable() {
		return
	}
	roomy := r.roomy(r.others)
	if len(roomy) == 0 {
		r.noRoom = r.noRoomFor(r.others, fmt.Sprintf("IRQ %d", n), r.irqShare(n))
	}
	for _, c := range roomy {
		p := &plan.Plan{IRQs: []plan.IRQEntry{{IRQ: ptr(n), CPUs: cpuset.Of(c), Reason: fmt.Sprintf("IRQ %d leaves interrupt-bound CPU %s for a CPU with the time for it", n, r.hot)}}}
		r.cands = append(r.cands, namedPlan{fmt.Sprintf("move IRQ %d onto CPU %d", n, c), p})
	}
}

// irqShare is IRQ n's share of its CPUs' interrupt time, by its share of
// their interrupts (for a sentence; the model predicts the move itself).
func (r *remedy) irqShare(n int) float64 {
	q := r.l.IRQ(n)
	if q == nil {
		return 0
	}
	var share float64
	for c, rate := range q.PerCPU {
		if cl := r.l.CPU(c); cl != nil && cl.Interrupts > 0 {
			share += r.l.CostPct(cl) * min(1, rate/cl.Interrupts)
		}
	}
	return share
}

// numaLocal moves an IRQ served on another node than its device's onto
// one CPU of the device's node with room.
func (r *remedy) numaLocal() {
	if len(r.f.IRQs) != 1 {
		return
	}
	n := r.f.IRQs[0]
	q := r.h.IRQ(n)
	if q == nil || !q.Movable() {
		return
	}
	node := r.h.IRQNode(q)
	var local cpuset.Set
	for _, nd := range r.h.Topology.Nodes {
		if nd.ID == node {
			local = nd.CPUs.Intersect(r.b.usable).Difference(r.hot)
		}
	}
	roomy := r.roomy(local)
	if len(roomy) == 0 {
		r.noRoom = r.noRoomFor(local, fmt.Sprintf("IRQ %d on node %d", n, node), r.irqShare(n))
	}
	for _, c := range roomy {
		p := &plan.Plan{IRQs: []plan.IRQEntry{{IRQ: ptr(n), CPUs: cpuset.Of(c), Reason: fmt.Sprintf("IRQ %d is served on node %d's CPUs, its device's (node-local memory for its packets and completions)", n, node)}}}
		r.cands = append(r.cands, namedPlan{fmt.Sprintf("move IRQ %d onto CPU %d of its device's node %d", n, c, node), p})
	}
	r.help = "It stays remote: cross-node traffic costs less than a saturated CPU."
}

// napiThreads places the device's NAPI threads beside the consumer, on
// CPUs with room, instead of on its saturated CPU.
func (r *remedy) napiThreads() {
	if r.f.Device == "" || len(r.h.NAPIsOf(r.f.Device)) == 0 {
		return
	}
	roomy := r.roomy(r.others)
	if len(roomy) == 0 {
		var busy float64
		for _, t := range r.l.Tasks {
			if t.Kernel && r.hot.Contains(t.CPU) && napiThreadOf(t.Comm, r.f.Device) {
				busy += t.Busy
			}
		}
		r.noRoom = r.noRoomFor(r.others, "the NAPI threads", busy)
	}
	for k := len(roomy); k > 0; k-- {
		set := cpuset.Of(roomy[:k]...)
		p := &plan.Plan{NAPI: []plan.NAPIEntry{{Device: r.f.Device, Threaded: ptr(true), CPUs: &set,
			Reason: fmt.Sprintf("%s's NAPI threads run beside the consumer on CPU %s, not on it, on CPUs that have the time for them", r.f.Device, r.hot)}}}
		r.cands = append(r.cands, namedPlan{fmt.Sprintf("place %s's NAPI threads on CPUs %s", r.f.Device, set), p})
	}
}

// napiThreadOf reports whether kernel thread comm ("napi/eth1-8193") polls
// a NAPI instance of dev (a comm is cut at 15 characters).
func napiThreadOf(comm, dev string) bool {
	name, ok := strings.CutPrefix(comm, "napi/")
	if !ok {
		return false
	}
	if i := strings.LastIndexByte(name, '-'); i > 0 && name[:i] == dev {
		return true
	}
	return len(comm) == 15 && strings.HasPrefix("napi/"+dev, comm)
}
