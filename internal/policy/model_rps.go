package policy

import (
	"maps"
	"slices"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/plan"
)

// rpsPerQueue resolves the plan's RPS entries on hardware NICs to the rx
// IRQs of their queues (all the device's queues for an entry without a
// queue), for the devices where every RPS entry resolves: each queue's own
// IRQ is known, and the device's network softirq was attributed to its
// IRQs. A device where one does not is modelled as a whole (its
// network softirq handed off by the first entry's mask), as a virtual
// device is. Keyed by the entry's index in p.RxQueues.
func (m *model) rpsPerQueue(p *plan.Plan) map[int][]int {
	out := map[int][]int{}
	whole := map[string]bool{}
	for i := range p.RxQueues {
		e := &p.RxQueues[i]
		if e.RPSCPUs == nil || e.RPSCPUs.IsEmpty() {
			continue
		}
		nic := m.h.NIC(e.Device)
		if nic == nil || nic.Virtual || len(nic.RxQueues) == 0 || !m.byIRQ[e.Device] {
			whole[e.Device] = true
			continue
		}
		var irqs []int
		for _, q := range nic.RxQueues {
			if e.Queue != nil && q.Index != *e.Queue {
				continue
			}
			if q.IRQ == nil {
				whole[e.Device] = true
				break
			}
			irqs = append(irqs, *q.IRQ)
		}
		if len(irqs) == 0 {
			whole[e.Device] = true
		}
		out[i] = irqs
	}
	for i := range out {
		if whole[p.RxQueues[i].Device] {
			delete(out, i)
		}
	}
	return out
}

// virtualRPSSplit splits a virtual device's network softirq (per CPU in
// per) for RPS by its measured packets (split over its CPUs as its work
// is): what moves (all but RPSStayVirtual per packet) and the dispatch each
// CPU pays for handing all its packets off (RPSDispatchVirtual per packet).
// Without a packet count it says no: the share-based terms apply.
func (m *model) virtualRPSSplit(dev string, per map[int]float64) (movable, dispatch map[int]float64, ok bool) {
	pps := m.l.NetDevRx[dev] // 0 when absent: counted in another namespace
	var total float64
	for _, v := range per {
		total += v
	}
	if pps <= 0 || total <= 0 {
		return nil, nil, false
	}
	movable, dispatch = make(map[int]float64, len(per)), make(map[int]float64, len(per))
	for c, v := range per {
		n := pps * v / total // packets/s this CPU receives for dev
		movable[c] = max(0, v-n*RPSStayVirtual.Seconds()*100)
		// Never more than the work itself: a count the work does not
		// bear out (packets this CPU did not receive) adds nothing.
		dispatch[c] = min(v, n*RPSDispatchVirtual.Seconds()*100)
	}
	return movable, dispatch, true
}

// addDispatch adds to each CPU the dispatch it pays for the share of its
// packets RPS handed to other CPUs: what moved of what could (moved of per,
// as the move reported it). Nothing moved, nothing is charged.
func addDispatch(st map[int]cpuUse, dispatch, per, moved map[int]float64) {
	for _, c := range slices.Sorted(maps.Keys(dispatch)) {
		u, ok := st[c]
		if !ok || per[c] <= 0 || moved[c] <= 0 {
			continue
		}
		u.netSoft += dispatch[c] * min(1, moved[c]/per[c])
		st[c] = u
	}
}

// rfs says whether p turns on RFS for dev: a flow count on one of its rx
// queues. RFS needs the machine-wide table (rps_sock_flow_entries) too; a
// plan that sets flow counts without it relies on a table already set.
func rfs(p *plan.Plan, dev string) bool {
	for _, e := range p.RxQueues {
		if e.Device == dev && e.RPSFlowCnt != nil && *e.RPSFlowCnt > 0 {
			return true
		}
	}
	return false
}

// consumerCPUs is where the application's measured threads run after p
// (its app entries applied), within to, as weights summing to 1; nil when
// no selected thread was measured busy there.
//
// RFS steers each flow's protocol work to the CPU where its socket was
// last read, not evenly over the RPS CPUs. Measured with the udp workload
// (2-queue veth, sink on CPU 1, rps-spread: RPS over 0-1 with RFS, eBPF
// interrupt time): CPU 0 went from 48.5 % to 9.3 % in interrupts and CPU 1
// from 8.1 % to 52.3 %, where spreading evenly had predicted 30 % and 28 %.
// So with RFS the moved work follows the application's threads.
func (m *model) consumerCPUs(p *plan.Plan, to cpuset.Set) map[int]float64 {
	w := map[int]float64{}
	for _, pid := range m.selected {
		var dest *cpuset.Set
		for i := range p.Apps {
			if a := &p.Apps[i]; a.PID == pid || (a.PID == 0 && slices.Contains(m.selected, pid)) {
				dest = &a.CPUs
			}
		}
		for _, c := range slices.Sorted(maps.Keys(m.tasks[pid])) {
			v := m.tasks[pid][c]
			if dest == nil || dest.Contains(c) {
				w[c] += v
				continue
			}
			if n := dest.Len(); n > 0 {
				for _, d := range dest.CPUs() {
					w[d] += v / float64(n)
				}
			}
		}
	}
	var sum float64
	for c, v := range w {
		if _, ok := m.cpus[c]; !ok || !to.Contains(c) {
			delete(w, c)
			continue
		}
		sum += v
	}
	if sum <= 0 {
		return nil
	}
	for c := range w {
		w[c] /= sum
	}
	return w
}

// moveNetSoftTo is moveNetSoft with the moved work shared by weight (RFS:
// where the consumer runs) instead of evenly: each source CPU keeps its own
// weight's share and hands the rest off, paying cost per unit moved.
func moveNetSoftTo(st map[int]cpuUse, per map[int]float64, frac float64, w map[int]float64, cost float64) map[int]float64 {
	add, out := map[int]float64{}, map[int]float64{}
	for _, c := range slices.Sorted(maps.Keys(per)) {
		moved := per[c] * frac * (1 - w[c])
		if moved <= 0 {
			continue
		}
		rest := 1 - w[c]
		for _, t := range slices.Sorted(maps.Keys(w)) {
			if t != c {
				add[t] += moved * w[t] / rest
			}
		}
		u := st[c]
		u.netSoft += moved*cost - moved
		st[c] = u
		out[c] = moved
	}
	for _, t := range slices.Sorted(maps.Keys(add)) {
		u := st[t]
		u.netSoft += add[t]
		st[t] = u
	}
	return out
}

// moveNetSoft moves frac of a device's network softirq (per CPU in per)
// onto the CPUs to, as RPS and threaded NAPI hand it off: the share a CPU
// of to keeps for itself does not move, and the CPU handing work off pays
// cost per unit moved.
func moveNetSoft(st map[int]cpuUse, per map[int]float64, frac float64, to cpuset.Set, cost float64) map[int]float64 {
	// Each source CPU's moved work spreads evenly over the measured CPUs of
	// to other than itself. Summed per target in one pass (a source inside
	// to leaves itself out) rather than one spread per source: RPS over
	// hundreds of CPUs would otherwise cost sources × targets.
	var live []int
	in := map[int]bool{}
	for _, c := range to.CPUs() {
		if _, ok := st[c]; ok {
			live = append(live, c)
			in[c] = true
		}
	}
	if len(live) == 0 {
		return nil
	}
	n := float64(len(live))
	var outside, inside float64 // every target's share from sources outside and inside to
	gave, out := map[int]float64{}, map[int]float64{}
	for _, c := range slices.Sorted(maps.Keys(per)) {
		moved := per[c] * frac
		if to.Contains(c) {
			moved = moved * float64(to.Len()-1) / float64(to.Len())
		}
		if moved <= 0 || (in[c] && len(live) == 1) {
			continue
		}
		if in[c] {
			inside += moved / (n - 1)
			gave[c] = moved
		} else {
			outside += moved / n
		}
		u := st[c]
		u.netSoft += moved*cost - moved
		st[c] = u
		out[c] = moved
	}
	for _, t := range live {
		share := outside + inside
		if len(live) > 1 {
			share -= gave[t] / (n - 1)
		}
		u := st[t]
		u.netSoft += share
		st[t] = u
	}
	return out
}
