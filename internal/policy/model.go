package policy

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/load"
	"github.com/irqpilot/irqpilot/internal/plan"
)

// The cost model predicts each CPU's load after a plan from one
// measurement. It is pure and deliberately simple; every coefficient is a
// named constant with where it comes from.
//
// Per CPU it splits the measured time into hardirq (%irq), network softirq
// (the share of %soft that NET_RX/NET_TX account for among the softirqs that
// do work: NET_RX, NET_TX, BLOCK, IRQ_POLL, TASKLET — TIMER, HRTIMER, SCHED
// and RCU are cheap and left out), other softirq, and the rest (user,
// system, steal). With the eBPF cost collector (load.CostBPF) hardirq time
// per IRQ and softirq time per vector are measured; otherwise interrupt
// work is attributed to IRQs by their counts on that CPU ("estimated from
// counts": this kernel has no CONFIG_IRQ_TIME_ACCOUNTING). Then:
//   - moving an IRQ moves its hardirq time and, unless RPS takes it, the
//     network softirq its queue raises;
//   - RPS on a queue moves RPSMoved of that queue's network softirq evenly
//     onto the RPS CPUs and adds, on the CPU that hands it off, RPSIPICost
//     of the moved work as interrupt time (IPIs; for a hardware NIC also
//     the backlog enqueue in its NAPI poll; RPSIPICostVirtual for a
//     virtual device, whose enqueue runs in the sender's transmit path);
//   - placing the application moves its threads' measured CPU time.
//
// A virtual device (veth, no IRQs) raises NET_RX on the CPU that sent the
// packet: its network softirq is attributed to the device steered.
const (
	// RPSMoved: share of a queue's network softirq time that RPS moves.
	// Measured here: the seed-004 udp scenario (veth, one queue) went from
	// CPU0 72.4 % softirq to 0.4 % with RPS to CPU1 (docs/benchmarks.md),
	// i.e. ≈ 0.99; and on the core-0 bottleneck of apply --verify's live
	// tests (veth, UDP GSO flood pinned to CPU 0; NET_RX time per send from
	// the eBPF collector, 4 pairs of 3 s windows RPS off/on, measured by
	// cmd/irqpilot's TestMeasureRPSCostPerSend) RPS left 0.45 µs of
	// 26.1 µs per send on CPU 0: 0.98 moved (CPU 1 then spent 24.8 µs
	// per send on it). 0.95 was used before and predicted CPU 0 3-5
	// points of interrupt time too many in every undisturbed run.
	// Hardware drivers keep their NAPI poll and GRO on the IRQ CPU, which
	// scaling.rst puts at a minority of the stack — 0.8 is used for them.
	RPSMovedVirtual  = 0.98
	RPSMovedHardware = 0.8
	// RPSIPICost: extra interrupt time on the handing-off CPU per unit
	// moved (one IPI per backlog batch; a hardware NIC's NAPI poll also
	// enqueues to the remote backlogs). An estimate for hardware: the
	// seed-004 run shows CPU0's total busy falling by more than the
	// softirq moved, so the cost is small; 5 % keeps the model from
	// spreading for nothing. For a virtual device only the IPIs are
	// interrupt time: measured in the runs above, NET_RX left on CPU 0
	// was 0.018 of the work moved.
	RPSIPICost        = 0.05
	RPSIPICostVirtual = 0.02
	//
	// Not modelled yet: with RPS a virtual device's sender pays for the
	// dispatch in its own (system) time — netif_rx runs in its transmit
	// path, and the packets' memory is freed on the other CPU. Measured in
	// the same runs from the sender thread's runtime (schedstat): 10.3 µs
	// of its own per send with RPS off (36.3 µs less the 26.0 µs of receive
	// softirq it ran), 17.1 µs with RPS on, 0.27 of the work moved; so the
	// model predicts the sending CPU's busy time after such a move 7-11
	// points too low. Charging it turns auto's recorded seed-004 choice
	// (sink beside the sender, RPS to CPU 1: 29 % more datagrams, CPU 0
	// still saturated) into no change, because auto ranks by busy time
	// and not by throughput; that is for auto's objective to settle.

	// Overload is the busy percentage above which a CPU is predicted to be
	// saturated; a candidate that predicts one is rejected.
	Overload = 95.0
	// RemoteNUMACost: interrupt work on a CPU of another NUMA node than its
	// device costs this much more (packet buffers and descriptors cross the
	// interconnect). An estimate in the range the Intel IRQ affinity study
	// and vendor tuning guides report for remote-node receive (10-30 %);
	// it makes the model prefer a NUMA-local placement of equal load.
	RemoteNUMACost = 0.15
	// MinGain is the reduction of the busiest interrupt-loaded CPU's
	// predicted busy time (percentage points) a change must promise to be
	// worth making: below it, the measurement's own noise decides.
	MinGain = 10.0
)

// A virtual device's RPS, per packet (where the device's received packets
// were measured, /proc/net/dev; a veth counts one per skb, a GSO send as
// one): the sending CPU keeps RPSStayVirtual of each packet's network
// softirq (the device's own receive entry, which runs before RPS picks a
// CPU) and pays RPSDispatchVirtual more per packet handed to another CPU
// (raising NET_RX for the IPIs and sending them: a VM exit each here); the
// rest of the packet's work moves. Measured on this 2-vCPU VM with the
// eBPF collector (cmd/irqpilot's TestMeasureRPSCostPerSend, a veth, the
// sender pinned to CPU 0, 4 pairs of 3 s windows RPS off/on per run):
// CPU 0 kept 1.08-1.56 µs of NET_RX per packet with RPS on (median 1.3 µs,
// 20 windows: 1400-byte datagrams at 6,000, 60,000 and 150,000 packets/s,
// with and without GRO on the veth, and 56 KB UDP GSO sends at 6,000/s),
// while the CPU receiving them took 0.85-1.45 µs per datagram of the 1.4-
// 2.1 µs CPU 0 had spent per datagram with RPS off: so RPS moves little of
// a small packet's work off the sending CPU, and half the 1.3 µs is the
// dispatch itself. The share-based terms above (0.98 moved, 0.02 per unit
// moved) predicted CPU 0 at 1.6 % interrupt time after RPS where 24.6 %
// was measured (the README's UDP flood, 157,000-214,000 packets/s); they
// stay for a device without a packet count. Known to overestimate where
// the receiving CPU is busy: at 32,000 GSO sends/s (CPU 1 then 48 % in
// interrupts) CPU 0 kept 0.2 µs per send, 3.5 points under the prediction
// (TestLiveApplyVerifyConfirmsRPSMove) — an IPI to a CPU that is busy or
// polling in idle costs little.
const (
	RPSStayVirtual     = 650 * time.Nanosecond
	RPSDispatchVirtual = 650 * time.Nanosecond
)

// cpuUse is one CPU's time, percent.
type cpuUse struct {
	other, hard, netSoft, otherSoft float64
}

func (c cpuUse) busy() float64 { return c.other + c.hard + c.netSoft + c.otherSoft }
func (c cpuUse) irq() float64  { return c.hard + c.netSoft + c.otherSoft }

// workSoftirqs are the softirqs counted as work when apportioning %soft.
var workSoftirqs = []string{"NET_RX", "NET_TX", "BLOCK", "IRQ_POLL", "TASKLET"}

// model is a measurement prepared for prediction.
type model struct {
	h    *host.Host
	l    *load.Load
	cpus map[int]cpuUse
	// irqHard and irqNet are each IRQ's hardirq and network-softirq time
	// per CPU (percent of that CPU).
	irqHard, irqNet map[int]map[int]float64
	// devNet is each network device's network softirq per CPU: its queue
	// IRQs' share, or for a device without IRQs the unattributed rest.
	devNet map[string]map[int]float64
	// byIRQ are the devices whose network softirq came from their queue
	// IRQs' counts (the others' is the unattributed rest).
	byIRQ map[string]bool
	// lines are the network IRQs' devices, each with its share of the
	// IRQ's network softirq (lineDevices).
	lines map[int]map[string]float64
	// tasks by PID: busy percent per CPU.
	tasks map[int]map[int]float64
	// node is each CPU's NUMA node (read from the host once: Predict asks
	// for every moved IRQ of every candidate).
	node map[int]int
	// selected are the processes an app entry without a PID (a comm:,
	// unit: or cgroup: selector) stands for (Options.AppPIDs).
	selected []int
	// napiThreads are the measured NAPI kernel threads (napi/DEV-ID) by
	// PID: their comm.
	napiThreads map[int]string
}

func newModel(h *host.Host, l *load.Load, steered []string) *model {
	m := &model{h: h, l: l, cpus: map[int]cpuUse{}, irqHard: map[int]map[int]float64{},
		irqNet: map[int]map[int]float64{}, devNet: map[string]map[int]float64{}, tasks: map[int]map[int]float64{},
		node: make(map[int]int, len(h.CPUs))}
	for _, c := range h.CPUs {
		m.node[c.ID] = c.Node
	}
	for _, c := range l.CPUs {
		if c.NoTicks {
			continue
		}
		var work, net float64
		for _, n := range workSoftirqs {
			work += c.Softirqs[n]
		}
		net = c.Softirqs["NET_RX"] + c.Softirqs["NET_TX"]
		u := cpuUse{other: c.User + c.Nice + c.System + c.Steal + c.Guest, hard: c.IRQ}
		if work > 0 {
			u.netSoft = c.SoftIRQ * net / work
		}
		u.otherSoft = c.SoftIRQ - u.netSoft
		if l.CostSource == load.CostBPF && c.SoftirqTime != nil {
			// Measured by the eBPF collector: use the real times.
			u.hard = 100 * c.HardirqTime
			u.netSoft = 100 * (c.SoftirqTime["NET_RX"] + c.SoftirqTime["NET_TX"])
			var soft float64
			for _, v := range c.SoftirqTime {
				soft += 100 * v
			}
			u.otherSoft = max(0, soft-u.netSoft)
			// The tick-based counters put interrupt work done in a
			// task's context (softirqs at syscall exit, without IRQ time
			// accounting) in system time; the eBPF times count it as
			// interrupts. Counted in both, a CPU would read above 100 %
			// busy: the CPU's busy time stays what the counters say.
			statBusy := u.other + c.IRQ + c.SoftIRQ
			u.other = max(0, min(u.other, statBusy-u.irq()))
		}
		m.cpus[c.ID] = u
	}
	// Attribute each CPU's hardirq time over the IRQs that fired there
	// (measured per IRQ with the eBPF collector), and its network softirq
	// over the network IRQs, by count. By count, not by the packets each
	// queue carried (the drivers' counters): on a lab guest's two virtio-net
	// queues, each on its own CPU under memcached load, the queues'
	// interrupt time was 2.9 to 1, their interrupts 4.0 to 1 and their
	// packets 5.5 to 1 — the busier queue handles more packets per
	// interrupt and takes less time per packet, and interrupts were the
	// closer of the two.
	netIRQ := map[int]map[string]float64{}
	for i := range h.IRQs {
		if q := &h.IRQs[i]; q.Class == host.ClassNetwork && q.Device != "" {
			netIRQ[q.Number] = lineDevices(h, l, q)
		}
	}
	m.lines = netIRQ
	totalRate, netRate := map[int]float64{}, map[int]float64{}
	for _, q := range l.IRQs {
		for c, r := range q.PerCPU {
			totalRate[c] += r
			if _, ok := netIRQ[q.IRQ]; ok {
				netRate[c] += r
			}
		}
	}
	attributed := map[int]float64{}
	for _, q := range l.IRQs {
		for c, r := range q.PerCPU {
			u, ok := m.cpus[c]
			if !ok || r == 0 {
				continue
			}
			if m.irqHard[q.IRQ] == nil {
				m.irqHard[q.IRQ], m.irqNet[q.IRQ] = map[int]float64{}, map[int]float64{}
			}
			m.irqHard[q.IRQ][c] = u.hard * r / totalRate[c]
			if t, ok := q.TimePerCPU[c]; ok && l.CostSource == load.CostBPF {
				m.irqHard[q.IRQ][c] = 100 * t // measured
			}
			if devs, ok := netIRQ[q.IRQ]; ok {
				v := u.netSoft * r / netRate[c]
				m.irqNet[q.IRQ][c] = v
				attributed[c] += v
				for _, dev := range slices.Sorted(maps.Keys(devs)) {
					if m.devNet[dev] == nil {
						m.devNet[dev] = map[int]float64{}
					}
					m.devNet[dev][c] += v * devs[dev]
					if m.byIRQ == nil {
						m.byIRQ = map[string]bool{}
					}
					m.byIRQ[dev] = true
				}
			}
		}
	}
	// Network softirq no IRQ explains (veth, loopback): the steered
	// devices without IRQs share it.
	var virtual []string
	for _, d := range steered {
		if len(m.devNet[d]) == 0 {
			virtual = append(virtual, d)
		}
	}
	share := virtualShares(l, virtual)
	for c, u := range m.cpus {
		rest := u.netSoft - attributed[c]
		if rest <= 0 || len(virtual) == 0 {
			continue
		}
		for _, d := range virtual {
			if m.devNet[d] == nil {
				m.devNet[d] = map[int]float64{}
			}
			m.devNet[d][c] += rest * share[d]
		}
	}
	for _, t := range l.Tasks {
		if t.Kernel && strings.HasPrefix(t.Comm, "napi/") {
			if m.napiThreads == nil {
				m.napiThreads = map[int]string{}
			}
			m.napiThreads[t.PID] = t.Comm
		}
		if m.tasks[t.PID] == nil {
			m.tasks[t.PID] = map[int]float64{}
		}
		m.tasks[t.PID][t.CPU] += t.Busy
	}
	return m
}

// Prediction is each CPU's busy and interrupt time after a plan.
type Prediction struct {
	Busy map[int]float64 // percent
	IRQ  map[int]float64 // hardirq + softirq percent
}

// Max returns the busiest CPU and its busy percent.
func (p Prediction) Max() (int, float64) {
	best, cpu := -1.0, -1
	for c, b := range p.Busy {
		if b > best || (b == best && c < cpu) {
			best, cpu = b, c
		}
	}
	return cpu, best
}

// Predict is what the model expects of p on the measured machine.
func (m *model) Predict(p *plan.Plan) Prediction {
	st := map[int]cpuUse{}
	for c, u := range m.cpus {
		st[c] = u
	}
	moveTo := func(from int, amount float64, to cpuset.Set, field func(*cpuUse) *float64) {
		moveScaled(st, from, amount, 1, to, field)
	}
	numaScale := func(q *host.IRQ, from int, to cpuset.Set) float64 {
		dev := m.h.IRQNode(q)
		if dev < 0 || to.IsEmpty() {
			return 1
		}
		f := func(c int) float64 {
			if n, ok := m.node[c]; ok && n >= 0 && n != dev {
				return 1 + RemoteNUMACost
			}
			return 1
		}
		return f(to.Min()) / f(from)
	}
	hard := func(u *cpuUse) *float64 { return &u.hard }
	net := func(u *cpuUse) *float64 { return &u.netSoft }
	other := func(u *cpuUse) *float64 { return &u.other }

	// Where each device's network softirq runs after IRQ moves.
	devNet := map[string]map[int]float64{}
	for d, per := range m.devNet {
		devNet[d] = map[int]float64{}
		for c, v := range per {
			devNet[d][c] = v
		}
	}
	// And each network IRQ's (hence its queue's) network softirq.
	irqNet := map[int]map[int]float64{}
	for n, per := range m.irqNet {
		irqNet[n] = per
	}
	for _, e := range p.IRQs {
		if e.IRQ == nil {
			continue
		}
		n := *e.IRQ
		if len(m.irqHard[n]) == 0 && len(m.irqNet[n]) == 0 {
			continue // no measured work to move (and the host lookup is a scan)
		}
		q := m.h.IRQ(n)
		// Sorted: float sums in a fixed order make equal inputs give
		// equal predictions to the last bit (and so equal rankings).
		for _, c := range slices.Sorted(maps.Keys(m.irqHard[n])) {
			v := m.irqHard[n][c]
			moveScaled(st, c, v, numaScale(q, c, e.CPUs), e.CPUs, hard)
		}
		after := map[int]float64{}
		for _, c := range slices.Sorted(maps.Keys(m.irqNet[n])) {
			v := m.irqNet[n][c]
			moveScaled(st, c, v, numaScale(q, c, e.CPUs), e.CPUs, net)
			for _, dev := range slices.Sorted(maps.Keys(m.lines[n])) {
				if devNet[dev] == nil {
					continue
				}
				share := m.lines[n][dev]
				devNet[dev][c] -= v * share
				for _, d := range e.CPUs.CPUs() {
					devNet[dev][d] += v * share / float64(e.CPUs.Len())
				}
			}
			for _, d := range e.CPUs.CPUs() {
				after[d] += v / float64(e.CPUs.Len())
			}
		}
		if len(m.irqNet[n]) > 0 {
			irqNet[n] = after
		}
	}
	perQueue := m.rpsPerQueue(p)
	rpsDone := map[int]bool{} // rx IRQs whose queue's RPS is counted
	steered := map[string]bool{}
	for i, e := range p.RxQueues {
		if e.RPSCPUs == nil || e.RPSCPUs.IsEmpty() {
			continue
		}
		if irqs, ok := perQueue[i]; ok {
			// A hardware NIC's queue: RPS hands off the work of the
			// queue's own IRQ, wherever that now runs, not the whole
			// device's (seen in the lab: a per-queue plan on a
			// two-queue virtio-net keeping each queue's RPS on its own
			// IRQ CPU was predicted to move queue 1's 20 points onto
			// queue 0's CPU, the first queue's mask taken for the
			// device).
			steered[e.Device] = true
			// With RFS the moved work follows the application's
			// threads, as for a whole device (consumerCPUs).
			var w map[int]float64
			if rfs(p, e.Device) {
				w = m.consumerCPUs(p, *e.RPSCPUs)
			}
			for _, n := range irqs {
				if rpsDone[n] {
					continue
				}
				rpsDone[n] = true
				if len(w) > 0 {
					moveNetSoftTo(st, irqNet[n], RPSMovedHardware, w, RPSIPICost)
				} else {
					moveNetSoft(st, irqNet[n], RPSMovedHardware, *e.RPSCPUs, RPSIPICost)
				}
			}
			continue
		}
		if steered[e.Device] {
			continue
		}
		steered[e.Device] = true
		frac, cost := RPSMovedHardware, RPSIPICost
		per := devNet[e.Device]
		var dispatch map[int]float64 // per packet, where counted
		if nic := m.h.NIC(e.Device); nic != nil && nic.Virtual {
			frac, cost = RPSMovedVirtual, RPSIPICostVirtual
			if movable, d, ok := m.virtualRPSSplit(e.Device, per); ok {
				per, dispatch, frac, cost = movable, d, 1, 0
			}
		}
		if rfs(p, e.Device) {
			if w := m.consumerCPUs(p, *e.RPSCPUs); len(w) > 0 {
				addDispatch(st, dispatch, per, moveNetSoftTo(st, per, frac, w, cost))
				continue
			}
		}
		addDispatch(st, dispatch, per, moveNetSoft(st, per, frac, *e.RPSCPUs, cost))
	}
	m.predictNAPIThreads(p, st, devNet, steered) // auto_napi.go
	for _, a := range p.Apps {
		pids := []int{a.PID}
		if a.PID == 0 {
			pids = m.selected
		}
		for _, pid := range pids {
			for _, c := range slices.Sorted(maps.Keys(m.tasks[pid])) {
				if v := m.tasks[pid][c]; !a.CPUs.Contains(c) {
					// Without IRQ time accounting the kernel charges
					// softirq work done in a task's context (a veth's
					// receive, a socket's backlog) to the task; that
					// part stays with the interrupts it is, so no more
					// than the CPU's task time moves: a CPU is never
					// predicted less busy than its own interrupt time.
					moveTo(c, min(v, max(st[c].other, 0)), a.CPUs, other)
				}
			}
		}
	}
	out := Prediction{Busy: map[int]float64{}, IRQ: map[int]float64{}}
	for c, u := range st {
		out.Busy[c] = u.busy()
		out.IRQ[c] = u.irq()
	}
	return out
}

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

// describe prints a prediction's busiest CPUs for a plan's why.
func describe(pred Prediction, cpus []int) string {
	var parts []string
	for _, c := range cpus {
		parts = append(parts, fmt.Sprintf("CPU%d %.0f%% busy (%.0f%% in interrupts)", c, pred.Busy[c], pred.IRQ[c]))
	}
	return strings.Join(parts, ", ")
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

// moveScaled moves amount of one kind of work off CPU from and spreads it,
// times scale (a NUMA-locality change), evenly over the measured CPUs of to.
func moveScaled(st map[int]cpuUse, from int, amount, scale float64, to cpuset.Set, field func(*cpuUse) *float64) {
	var live []int
	for _, c := range to.CPUs() {
		if _, ok := st[c]; ok {
			live = append(live, c)
		}
	}
	if len(live) == 0 || amount == 0 {
		return
	}
	u := st[from]
	*field(&u) -= amount
	st[from] = u
	for _, c := range live {
		v := st[c]
		*field(&v) += amount * scale / float64(len(live))
		st[c] = v
	}
}

// virtualShares is the share of the network softirq no IRQ explains that
// each steered device without IRQs is given: its received packets' share
// of all packets the machine's protocols took in (softnet's processed, all
// CPUs and namespaces), when both were measured; so a veth no packet
// crossed is given none, where the even split gave it a busy namespace's
// work (a plan turning RPS on for an idle veth was predicted to move 33
// points off a CPU another namespace's flood loaded). Without the counts
// (or without one for a steered device, which then lives in another
// network namespace than the one measured),
// the devices share it evenly. A device's packets are counted once by
// softnet, with or without RPS, so the shares sum to at most 1 (capped).
func virtualShares(l *load.Load, virtual []string) map[string]float64 {
	out := map[string]float64{}
	total := Traffic(l)
	// A device absent from the counts was not seen (it lives in another
	// network namespace than the one measured): unknown, not idle.
	counted := l.NetDevRx != nil
	for _, d := range virtual {
		if _, ok := l.NetDevRx[d]; !ok {
			counted = false
		}
	}
	if !counted || total <= 0 {
		for _, d := range virtual {
			out[d] = 1 / float64(len(virtual))
		}
		return out
	}
	var sum float64
	for _, d := range virtual {
		out[d] = math.Min(1, l.NetDevRx[d]/total)
		sum += out[d]
	}
	if sum > 1 {
		for d := range out {
			out[d] /= sum
		}
	}
	return out
}
