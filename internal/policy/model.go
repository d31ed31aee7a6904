package policy

import (
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/load"
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
