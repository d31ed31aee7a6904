package policy

import (
	"fmt"
	"strings"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/plan"
)

// DedicatedCore is ClustrixDB core-0 write-up's policy: every movable hardware IRQ on the
// housekeeping CPU(s) (default the lowest usable CPU, normally CPU 0), RPS
// over the remaining usable CPUs, and RFS on: rps_sock_flow_entries 65536,
// rps_flow_cnt per rx queue = 65536 / rx queues (ClustrixDB core-0 write-up: 8192 for its 8
// queues). The application gets the CPUs other than the housekeeping ones.
func DedicatedCore(h *host.Host, o Options) (*plan.Plan, error) {
	b, err := newBuilder(h, o, "dedicated-core")
	if err != nil {
		return nil, err
	}
	hk := o.Housekeeping
	if hk.IsEmpty() {
		hk = cpuset.Of(b.usable.Min())
	}
	for _, c := range hk.CPUs() {
		switch {
		case !b.v.Exists.Contains(c):
			return nil, fmt.Errorf("housekeeping CPU %d does not exist on this host (it has CPUs %s)", c, b.v.Exists)
		case !b.v.Online.Contains(c):
			return nil, fmt.Errorf("housekeeping CPU %d is offline", c)
		case b.banned.Contains(c):
			return nil, fmt.Errorf("housekeeping CPU %d is isolated or nohz_full; IRQs never go there", c)
		}
	}
	b.p.Why = fmt.Sprintf("CPU(s) %s take every movable hardware IRQ so the other CPUs run the application undisturbed; "+
		"RPS spreads the network softirq work over the other CPUs and RFS steers each flow to the CPU reading its socket (ClustrixDB core-0 write-up)", hk)

	reason := fmt.Sprintf("every movable hardware IRQ on housekeeping CPU(s) %s (ClustrixDB core-0 write-up)", hk)
	var managed, timers, idle []int
	var other []string
	outside := defaultScopeIRQs(h, o)
	for i := range h.IRQs {
		q := &h.IRQs[i]
		switch {
		case outside[q.Number] == "other" && q.Movable() && len(q.Actions) > 0 && q.Class != host.ClassTimer:
			other = append(other, plan.DescribeIRQ(h, q.Number))
		case outside[q.Number] != "":
			// Left out for the default route: ScopeDefault says so.
		case len(q.Actions) == 0:
			idle = append(idle, q.Number)
		case q.Class == host.ClassTimer || q.PerCPU():
			timers = append(timers, q.Number)
		case !q.Movable():
			managed = append(managed, q.Number)
		default:
			b.irq(q.Number, hk, reason)
		}
	}
	if len(managed) > 0 {
		b.note("%s kernel-managed; left where the kernel put them", irqWord(managed, "is", "are"))
	}
	if len(timers) > 0 {
		b.note("timer and per-CPU %s left alone: every CPU has its own", irqWord(timers, "is", "are"))
	}
	if len(idle) > 0 {
		b.note("%s no handler; left alone", irqWord(idle, "has", "have"))
	}
	if len(other) > 0 {
		b.note("%s", otherIRQsNote(other))
	}

	rest := b.usable.Difference(hk)
	rpsReason := fmt.Sprintf("RPS over the CPUs other than the housekeeping ones, %s (ClustrixDB core-0 write-up)", rest)
	if rest.IsEmpty() {
		rest = hk
		rpsReason = fmt.Sprintf("RPS on the housekeeping CPU(s) %s: no other usable CPU", hk)
	}
	ts, err := b.targets()
	if err != nil {
		return nil, err
	}
	entries := b.rfs(65536, "RFS on: steer each flow's softirq work to the CPU that reads its socket (ClustrixDB core-0 write-up)")
	for _, t := range ts {
		if !t.steer {
			b.note("%s: not steered; RPS on its multi-queue lower device %s covers it", t.nic.Name, t.nic.Lower)
			continue
		}
		b.managedNote(t)
		cnt := flowCnt(entries, len(t.nic.RxQueues))
		for _, rq := range t.nic.RxQueues {
			rs := rest
			b.rps(t.nic.Name, rq.Index, &rs, ptr(cnt), rpsReason)
		}
	}
	if err := b.app(b.usable.Difference(hk), "the application runs on the CPUs that take no IRQs (ClustrixDB core-0 write-up)"); err != nil {
		return nil, err
	}
	if err := b.irqbalance(true, hk); err != nil {
		return nil, err
	}
	return b.p, nil
}

// PerQueue is AWS Graviton memcached tuning's policy. For each NIC, with P its usable NUMA-local
// CPUs in ascending order (N = |P|), Q its queues and R = CPUsPerIRQCore
// (default 8):
//
//  1. The pool's IRQ CPUs (IRQCores overrides the count K):
//     - wide: on a machine with more than one NUMA node with usable CPUs,
//     the NIC's node known, and at least half of the usable CPUs left
//     without queue IRQs once the node is given to them, the IRQ CPUs
//     are the whole node, one CPU per physical core before any SMT
//     sibling: every queue gets its own CPU (K' = min(Q, N) below). The
//     application is not NIC-local work and runs on the other nodes, so
//     the NIC's node serves the queues instead of being rationed.
//     - otherwise K = N/R (AWS Graviton memcached tuning's ratio, at least 1); on a single-node
//     machine raised to ⌈Q/2⌉ so that no more than two queues share an
//     IRQ CPU (the most its table shares), but never above N/2 (at
//     least 1). P is cut into K contiguous blocks;
//     IRQ CPU j is the first CPU of block j that is no SMT sibling of an
//     IRQ CPU already chosen, else the first not already an IRQ CPU,
//     else the first.
//     NICs on the same node share these CPUs.
//  2. A NIC uses K' = min(K, Q) of them (rotating between NICs).
//  3. Queue i's IRQs go to the NIC's IRQ CPU ⌊i·K'/Q⌋: each queue on its own
//     core when K' = Q, queues shared in order otherwise.
//  4. RPS: when N ≥ R, queue i's softirq work is spread over a group of P:
//     single node, P cut into min(Q, N) contiguous groups, queue i on group
//     i mod min(Q, N); several nodes, each IRQ CPU with its SMT siblings and
//     an equal share of the CPUs that take no IRQ (so the group holds the
//     queue's IRQ CPU). When N < R the IRQ CPU alone is too small a share
//     to give away, so queue i's stack runs on its IRQ CPU (RPS = that CPU).
//     A device without IRQs (veth) gets the same RPS: its receive work runs
//     where packets arrive until RPS moves it.
//  5. The application gets every usable CPU that takes no queue IRQ, on
//     any node. IRQs and softirq work never leave the NIC's node (unless
//     the node is unknown).
//
// On single-node hosts this gives AWS Graviton memcached tuning's table exactly: 4 CPUs/1 queue →
// K=1, IRQ 0, RPS 0, app 1-3; 8/2 → K=1, IRQs 0,0, RPS 0-3 and 4-7, app 1-7;
// 16/2 → K=2, IRQs 0,8, RPS 0-7 and 8-15, app 1-7,9-15.
func PerQueue(h *host.Host, o Options) (*plan.Plan, error) {
	b, ts, err := start(h, o, "per-queue", (*builder).targets)
	if err != nil {
		return nil, err
	}
	R := b.o.CPUsPerIRQCore
	multiNode := b.usableNodes() > 1
	wideAny := false
	// IRQ CPUs are chosen once per NUMA pool and shared by the NICs there,
	// so several NICs on one node share the node's IRQ-CPU budget.
	type nodeState struct {
		irq  []int
		next int  // rotating start, so NICs with few queues use different IRQ CPUs
		wide bool // each queue its own CPU of the node (several nodes)
	}
	nodes := map[string]*nodeState{}
	picked := cpuset.Set{} // candidate IRQ CPUs chosen so far (for SMT avoidance)
	used := cpuset.Set{}   // CPUs that actually got a queue
	pool := cpuset.Set{}
	var summary []string
	for _, t := range ts {
		if skipStacked(b, ts, t) {
			continue
		}
		P, local := b.nodeCPUs(t.nic)
		Q := t.queueCount()
		if Q == 0 {
			b.note("%s has no queues; nothing to place", t.nic.Name)
			continue
		}
		cpus := P.CPUs()
		N := len(cpus)
		ns := nodes[P.String()]
		if ns == nil {
			// Wide: the NIC's node serves its queues, provided at least
			// half of the usable CPUs stay free of queue IRQs for the
			// application.
			wide := multiNode && local && 2*b.usable.Difference(picked).Difference(P).Len() >= b.usable.Len()
			K := o.IRQCores
			switch {
			case K > 0:
			case wide:
				K = N // the whole node in core order; each NIC takes min(Q, N) in turn
			case multiNode:
				K = N / R
			default:
				K = min(max(N/R, (Q+1)/2), N/2)
			}
			K = max(1, min(K, N))
			ns = &nodeState{irq: make([]int, K), wide: wide}
			if ns.wide {
				copy(ns.irq, b.coreOrder(P, picked))
			} else {
				for j := range K {
					ns.irq[j] = b.pickCPU(cpus[j*N/K:(j+1)*N/K], picked)
					picked = picked.Add(ns.irq[j])
				}
			}
			picked = picked.Union(cpuset.Of(ns.irq...))
			nodes[P.String()] = ns
		}
		K := min(len(ns.irq), Q)
		start := ns.next
		ns.next = (ns.next + K) % len(ns.irq)
		irqCPUOf := func(pos int) int { return ns.irq[(start+pos*K/Q)%len(ns.irq)] }
		mine := cpuset.Set{}
		for pos := range Q {
			mine = mine.Add(irqCPUOf(pos))
		}
		used = used.Union(mine)
		wideAny = wideAny || ns.wide
		spread := N >= R
		G := min(Q, N)
		group := func(pos int) cpuset.Set {
			g := pos % G
			return cpuset.Of(cpus[g*N/G : (g+1)*N/G]...)
		}
		if ns.wide {
			groups := b.groupsAround(P, mine)
			group = func(pos int) cpuset.Set { return groups[irqCPUOf(pos)] }
		}
		where := "NUMA-local"
		if !local {
			where = "NIC node unknown, any usable CPU"
		}
		irqs := len(t.queues) > 0
		b.managedNote(t)
		for pos, qi := range t.queues {
			c := irqCPUOf(pos)
			for _, irq := range t.irqs[qi] {
				if irq.Movable() {
					b.irq(irq.Number, cpuset.Of(c), fmt.Sprintf("%s queue %d IRQ on CPU %d, IRQ CPU %d of %d (%s; AWS Graviton memcached tuning)", t.nic.Name, qi, c, pos*K/Q+1, K, where))
				}
			}
		}
		rpsOf := func(pos int) (cpuset.Set, string) {
			if spread {
				g := group(pos)
				if !irqs {
					return g, fmt.Sprintf("%s: its receive work runs where packets arrive; RPS spreads it over group %s (AWS Graviton memcached tuning)", t.lineWhy(), g)
				}
				return g, fmt.Sprintf("RPS spreads queue softirq work over group %s (AWS Graviton memcached tuning)", g)
			}
			c := cpuset.Of(irqCPUOf(pos))
			if !irqs {
				return c, fmt.Sprintf("%s: RPS runs this queue's receive work on CPU %s, off the application's CPUs (AWS Graviton memcached tuning)", t.lineWhy(), c)
			}
			return c, fmt.Sprintf("stack runs on the queue's IRQ CPU %s: %d usable CPUs are too few to spread (AWS Graviton memcached tuning)", c, N)
		}
		for _, dev := range append([]*target{t}, vlanOver(ts, t.nic.Name)...) {
			if !dev.steer {
				continue
			}
			for _, rq := range dev.nic.RxQueues {
				s, why := rpsOf(queuePos(t, rq.Index))
				if dev != t {
					why += "; on VLAN " + dev.nic.Name + " over single-queue " + t.nic.Name + " (RPS/RFS on a single-queue NIC)"
				}
				b.rps(dev.nic.Name, rq.Index, &s, nil, why)
			}
		}
		pool = pool.Union(P)
		if irqs {
			summary = append(summary, fmt.Sprintf("%s: %d queue(s), IRQ CPU(s) %s", t.nic.Name, Q, mine))
		} else {
			summary = append(summary, fmt.Sprintf("%s: %d queue(s), %s, receive work on CPU(s) %s", t.nic.Name, Q, noIRQSummary(t), mine))
		}
	}
	ratio := fmt.Sprintf("one IRQ CPU per %d usable CPUs, at most two queues per IRQ CPU", R)
	if wideAny {
		ratio = "each queue on its own CPU of the NIC's node, physical cores first"
	}
	b.p.Why = fmt.Sprintf("each queue's IRQ pinned NUMA-local (%s), RPS spreads softirq work per queue, "+
		"the application runs on every other usable CPU (AWS Graviton memcached tuning)", ratio)
	if len(summary) > 0 {
		b.p.Why += ": " + strings.Join(summary, "; ")
	}
	app := cpuset.Set{}
	if !pool.IsEmpty() {
		app = b.usable.Difference(used)
	}
	if err := b.app(app, "the application runs on the usable CPUs that take no queue IRQ, on any node: its threads are not NIC-local work (AWS Graviton memcached tuning)"); err != nil {
		return nil, err
	}
	if err := b.irqbalance(len(b.p.IRQs) > 0, used); err != nil {
		return nil, err
	}
	return b.p, nil
}

// Colocate is Intel IRQ+process affinity study's "full affinity": each queue gets its own core
// (NUMA-local, distinct physical cores first, SMT siblings only when cores
// run out), and the queue's IRQs, its RPS and XPS CPUs and the application
// worker that consumes it all run there, so data stays in that core's
// caches. Run one application worker per queue.
//
// CPUs outside the NIC's node: none of the NIC's work goes there (queues
// share CPUs of the node, in the same order, when it has fewer CPUs than
// the NIC has queues), and the plan gives the application — the workers,
// which consume the queues — only the queues' CPUs; the rest of the machine
// is left to other work. On the 32-CPU guest with 4 nodes and an 8-queue NIC
// on node 2 (CPUs 8-11, siblings 24-27) that is CPUs 8, 9, 10, 11, then 24-27.
func Colocate(h *host.Host, o Options) (*plan.Plan, error) {
	b, ts, err := start(h, o, "colocate", (*builder).targets)
	if err != nil {
		return nil, err
	}
	used := cpuset.Set{}
	var summary []string
	workers := 0
	for _, t := range ts {
		if skipStacked(b, ts, t) {
			continue
		}
		P, _ := b.nodeCPUs(t.nic)
		Q := t.queueCount()
		if Q == 0 {
			b.note("%s has no queues; nothing to place", t.nic.Name)
			continue
		}
		order := b.coreOrder(P, used)
		core := func(pos int) int { return order[pos%len(order)] }
		b.managedNote(t)
		for pos, qi := range t.queues {
			c := core(pos)
			for _, irq := range t.irqs[qi] {
				if irq.Movable() {
					b.irq(irq.Number, cpuset.Of(c), fmt.Sprintf("%s queue %d IRQ, stack and worker together on CPU %d (Intel IRQ+process affinity study)", t.nic.Name, qi, c))
				}
			}
		}
		mine := cpuset.Set{}
		for pos := range Q {
			mine = mine.Add(core(pos))
		}
		for _, dev := range append([]*target{t}, vlanOver(ts, t.nic.Name)...) {
			if !dev.steer {
				continue
			}
			for _, rq := range dev.nic.RxQueues {
				s := cpuset.Of(core(queuePos(t, rq.Index)))
				b.rps(dev.nic.Name, rq.Index, &s, nil, fmt.Sprintf("softirq work stays on the queue's core %s (Intel IRQ+process affinity study)", s))
			}
			for _, tq := range dev.nic.TxQueues {
				s := cpuset.Of(core(queuePos(t, tq.Index)))
				b.xps(dev.nic.Name, tq.Index, s, fmt.Sprintf("transmit from the queue's core %s (Intel IRQ+process affinity study)", s))
			}
		}
		used = used.Union(mine)
		workers += Q
		summary = append(summary, fmt.Sprintf("%s: %d queue(s) on CPUs %s", t.nic.Name, Q, mine))
	}
	b.p.Why = "full affinity: each queue's IRQ, its softirq work, its transmits and the worker consuming it share one core, so the data stays in cache (Intel IRQ+process affinity study)"
	if len(summary) > 0 {
		b.p.Why += ": " + strings.Join(summary, "; ") + fmt.Sprintf("; run %d application workers, one per queue", workers)
	}
	if err := b.app(used, "one application worker per queue, on the queues' cores (Intel IRQ+process affinity study)"); err != nil {
		return nil, err
	}
	if err := b.irqbalance(len(b.p.IRQs) > 0, used); err != nil {
		return nil, err
	}
	return b.p, nil
}

// RPSSpread is RPS/RFS on a single-queue NIC's policy: RPS and RFS over every usable CPU of the
// NIC's NUMA node (all usable CPUs when unknown), rps_sock_flow_entries
// 32768, rps_flow_cnt per rx queue = 32768 / rx queues. IRQs are not
// touched. On a VLAN over a single-queue NIC, the VLAN device is steered too.
func RPSSpread(h *host.Host, o Options) (*plan.Plan, error) {
	b, ts, err := start(h, o, "rps-spread", (*builder).targets)
	if err != nil {
		return nil, err
	}
	entries := b.rfs(32768, "RFS on: steer each flow's softirq work to the CPU that reads its socket (RPS/RFS on a single-queue NIC)")
	var summary []string
	for _, t := range ts {
		if !t.steer {
			b.note("%s: not steered; RPS on its multi-queue lower device %s covers it", t.nic.Name, t.nic.Lower)
			continue
		}
		P, local := b.nodeCPUs(t.nic)
		where := "its NUMA node"
		if !local {
			where = "the machine (node unknown)"
		}
		cnt := flowCnt(entries, len(t.nic.RxQueues))
		why := fmt.Sprintf("spread softirq work over every usable CPU of %s, %s (RPS/RFS on a single-queue NIC)", where, P)
		if t.nic.Kind == "vlan" {
			why += "; VLAN over single-queue " + t.nic.Lower + " is where the packets are received"
		}
		for _, rq := range t.nic.RxQueues {
			s := P
			b.rps(t.nic.Name, rq.Index, &s, ptr(cnt), why)
		}
		if len(t.nic.RxQueues) > 0 {
			summary = append(summary, fmt.Sprintf("%s over %s", t.nic.Name, P))
		}
	}
	b.p.Why = "the receiving CPU is left to the NIC's IRQ; RPS moves the protocol work to every CPU of the NIC's node and RFS keeps each flow where its socket is read (RPS/RFS on a single-queue NIC)"
	if len(summary) > 0 {
		b.p.Why += ": " + strings.Join(summary, "; ")
	}
	if err := b.irqbalance(false, cpuset.Set{}); err != nil {
		return nil, err
	}
	return b.p, nil
}

// noIRQSummary is how the plan's why names a NIC's interrupts when none is
// placed.
func noIRQSummary(t *target) string {
	switch {
	case t.line != nil && len(t.line.SharedWith) > 0:
		return fmt.Sprintf("shared interrupt line IRQ %d left alone", t.line.Number)
	case t.line != nil:
		return fmt.Sprintf("one interrupt line, IRQ %d, for its queues", t.line.Number)
	}
	return "no IRQ"
}
