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

// describe prints a prediction's busiest CPUs for a plan's why.
func describe(pred Prediction, cpus []int) string {
	var parts []string
	for _, c := range cpus {
		parts = append(parts, fmt.Sprintf("CPU%d %.0f%% busy (%.0f%% in interrupts)", c, pred.Busy[c], pred.IRQ[c]))
	}
	return strings.Join(parts, ", ")
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
