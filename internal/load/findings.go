package load

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/host"
)

// Severity of a finding.
type Severity string

// Severities, in increasing order.
const (
	Info     Severity = "info"
	Warning  Severity = "warning"
	Critical Severity = "critical"
)

func (s Severity) rank() int {
	switch s {
	case Critical:
		return 2
	case Warning:
		return 1
	}
	return 0
}

// AtLeast reports whether s is as severe as o.
func (s Severity) AtLeast(o Severity) bool { return s.rank() >= o.rank() }

// Finding is one diagnosis. The JSON names are stable (docs/json.md, "doctor --json").
type Finding struct {
	// ID is stable across versions: "interrupt-bound-cpu", "softnet-drops", …
	ID       string   `json:"id"`
	Severity Severity `json:"severity"`
	// CPUs involved, ascending (empty when not CPU-specific).
	CPUs     []int      `json:"cpus"`
	Summary  string     `json:"summary"`
	Evidence []Evidence `json:"evidence"`
	// Why it matters, in a sentence or two.
	Why string `json:"why"`
	// Fix is the policy or command that addresses it.
	Fix string `json:"fix"`
	// Moves are the moves of work onto CPUs the fix proposes, each with
	// its prediction; every target had the headroom for it when measured.
	Moves []Move `json:"moves,omitempty"`

	// appThreads are app-on-irq-cpu's per-thread evidence (reconcile
	// carries them into the interrupt-bound finding it merges into).
	appThreads []Evidence
}

// Evidence is one number behind a finding.
type Evidence struct {
	Name  string  `json:"name"` // "CPU0 %soft", "irq 38 rate"
	Value float64 `json:"value"`
	Unit  string  `json:"unit"` // "%", "/s", "irqs", "node"
}

// Finding IDs.
const (
	IDInterruptBound   = "interrupt-bound-cpu"
	IDNICOneCPU        = "nic-irqs-one-cpu"
	IDFewQueuesNoRPS   = "few-queues-no-rps"
	IDRPSIPIOverhead   = "rps-ipi-overhead"
	IDIRQRemoteNUMA    = "irq-remote-numa"
	IDAppOnIRQCPU      = "app-on-irq-cpu"
	IDIrqbalanceManual = "irqbalance-with-manual"
	IDManagedIRQs      = "managed-irqs"
	IDSoftnetDrops     = "softnet-drops"
	IDSoftnetSqueeze   = "softnet-squeeze"
)

// Thresholds of the rules (docs/json.md lists the findings); changing one
// changes what doctor reports, so tests pin them.
const (
	// interrupt-bound-cpu: a CPU spending at least BoundIRQPct in hard+soft
	// interrupt context with at most BoundIdlePct idle, at least
	// BoundRatio times (and BoundMargin points above) the other CPUs'
	// average interrupt time, while the other CPUs average at least
	// OthersIdlePct idle: they wait while one CPU saturates (ClustrixDB core-0 write-up; RPS/RFS on a single-queue NIC).
	// Critical from CriticalIRQPct.
	BoundIRQPct    = 25.0
	CriticalIRQPct = 50.0
	BoundIdlePct   = 10.0
	BoundRatio     = 2.0
	BoundMargin    = 15.0
	OthersIdlePct  = 30.0
	// A NIC carries traffic when its IRQs fire at least this often.
	ActiveIRQRate = 100.0
	// rps-ipi-overhead: RPS IPIs received per second (all CPUs) and per
	// packet processed.
	RPSIPIRate   = 2000.0
	RPSIPIPerPkt = 0.25
	// app-on-irq-cpu: a user thread at least this busy (percent of a CPU) on
	// a CPU whose interrupt time is at least HotIRQPct.
	AppBusyPct = 20.0
	HotIRQPct  = 10.0
	// softnet-squeeze: squeezes per second and per NET_RX softirq.
	SqueezeRate  = 1.0
	SqueezeRatio = 0.01
)

// Diagnose explains what h and l show. It is pure. h may lack parts
// (Unavailable); rules that need them stay silent.
func Diagnose(h *host.Host, l *Load) []Finding {
	var fs []Finding
	for _, rule := range []func(*host.Host, *Load) []Finding{
		interruptBound, nicIRQsOneCPU, fewQueuesNoRPS, rpsIPIOverhead,
		irqRemoteNUMA, appOnIRQCPU, irqbalanceWithManual, managedIRQs,
		softnetDrops, softnetSqueeze,
		napiBudget, irqStormDeferral, napiThreadShared,
	} {
		fs = append(fs, rule(h, l)...)
	}
	fs = reconcile(fs)
	for i := range fs {
		if fs[i].CPUs == nil {
			fs[i].CPUs = []int{}
		}
	}
	sort.SliceStable(fs, func(i, j int) bool {
		if a, b := fs[i].Severity.rank(), fs[j].Severity.rank(); a != b {
			return a > b
		}
		return fs[i].ID < fs[j].ID
	})
	return fs
}

// Worst returns the highest severity among fs ("" when none).
func Worst(fs []Finding) Severity {
	var w Severity
	for _, f := range fs {
		if w == "" || f.Severity.rank() > w.rank() {
			w = f.Severity
		}
	}
	return w
}

func ev(name string, v float64, unit string) Evidence {
	return Evidence{Name: name, Value: round2(v), Unit: unit}
}

func round2(v float64) float64 {
	if v >= 0 {
		return float64(int64(v*100+0.5)) / 100
	}
	return -float64(int64(-v*100+0.5)) / 100
}

func irqLabel(h *host.Host, n int) string {
	if h != nil {
		if q := h.IRQ(n); q != nil && q.Device != "" {
			if q.Queue != nil {
				return fmt.Sprintf("irq %d (%s queue %d)", n, q.Device, *q.Queue)
			}
			return fmt.Sprintf("irq %d (%s)", n, q.Device)
		}
	}
	return fmt.Sprintf("irq %d", n)
}

// onlineCount is how many CPUs the load covers.
func onlineCount(h *host.Host, l *Load) int {
	if h != nil && !h.Topology.Online.IsEmpty() {
		return h.Topology.Online.Len()
	}
	return len(l.CPUs)
}

func interruptBound(h *host.Host, l *Load) []Finding {
	if l == nil || len(l.CPUs) < 2 {
		return nil
	}
	var out []Finding
	for i := range l.CPUs {
		c := &l.CPUs[i]
		if c.NoTicks || l.CostPct(c) < BoundIRQPct || c.Idle > BoundIdlePct {
			continue
		}
		var othersIRQ, othersIdle float64
		n := 0
		for j := range l.CPUs {
			if j != i && !l.CPUs[j].NoTicks {
				othersIRQ += l.CostPct(&l.CPUs[j])
				othersIdle += l.CPUs[j].Idle
				n++
			}
		}
		if n == 0 {
			continue
		}
		othersIRQ /= float64(n)
		othersIdle /= float64(n)
		if l.CostPct(c) < BoundRatio*othersIRQ || l.CostPct(c)-othersIRQ < BoundMargin {
			continue
		}
		if othersIdle < OthersIdlePct {
			continue // no CPU waits: the machine is simply busy
		}
		sev := Warning
		if l.CostPct(c) >= CriticalIRQPct {
			sev = Critical
		}
		waiting := fmt.Sprintf("the other CPUs are %.0f%% idle on average", othersIdle)
		f := Finding{
			ID: IDInterruptBound, Severity: sev, CPUs: []int{c.ID},
			Summary: fmt.Sprintf("CPU%d is interrupt-bound: %.1f%% in interrupts (%.1f%% irq, %.1f%% softirq), %.1f%% idle, while %s",
				c.ID, c.IRQTime(), c.IRQ, c.SoftIRQ, c.Idle, waiting),
			Evidence: []Evidence{
				ev(fmt.Sprintf("CPU%d %%irq", c.ID), c.IRQ, "%"),
				ev(fmt.Sprintf("CPU%d %%soft", c.ID), c.SoftIRQ, "%"),
				ev(fmt.Sprintf("CPU%d %%idle", c.ID), c.Idle, "%"),
				ev("other CPUs mean %irq+%soft", othersIRQ, "%"),
				ev("other CPUs mean %idle", othersIdle, "%"),
				ev(fmt.Sprintf("CPU%d NET_RX softirqs", c.ID), c.NetRx, "/s"),
				ev(fmt.Sprintf("CPU%d NET_TX softirqs", c.ID), c.NetTx, "/s"),
				ev(fmt.Sprintf("CPU%d BLOCK softirqs", c.ID), c.Block, "/s"),
				ev(fmt.Sprintf("CPU%d device IRQs", c.ID), c.Interrupts, "/s"),
				ev(fmt.Sprintf("CPU%d interrupt time, %s", c.ID, CostDescription(l.CostSource)), l.CostPct(c), "%"),
			},
			Why: "Everything this CPU's interrupts deliver waits for it: once it saturates, throughput stops growing while the other CPUs have time to spare (ClustrixDB core-0 write-up; RPS/RFS on a single-queue NIC: core 0 at 52.8% softirq and 6% idle).",
		}
		// The IRQs that land here, busiest first.
		type hot struct {
			irq  int
			rate float64
		}
		var hots []hot
		for _, q := range l.IRQs {
			if r := q.PerCPU[c.ID]; r >= ActiveIRQRate {
				hots = append(hots, hot{q.IRQ, r})
			}
		}
		sort.Slice(hots, func(a, b int) bool { return hots[a].rate > hots[b].rate })
		var names []string
		for k, x := range hots {
			if k == 5 {
				break
			}
			f.Evidence = append(f.Evidence, ev(irqLabel(h, x.irq)+fmt.Sprintf(" on CPU%d", c.ID), x.rate, "/s"))
			if r := l.IRQ(x.irq); r != nil && l.CostSource == CostBPF {
				f.Evidence = append(f.Evidence, ev(irqLabel(h, x.irq)+fmt.Sprintf(" handler time on CPU%d, measured", c.ID), 1000*r.TimePerCPU[c.ID], "ms/s"))
			}
			names = append(names, fmt.Sprint(x.irq))
		}
		f.Fix, f.Moves = interruptBoundFix(h, l, c, names)
		out = append(out, f)
	}
	return out
}

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

func nicIRQsOneCPU(h *host.Host, l *Load) []Finding {
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
		fix, moves := queueSpreadFix(h, l, n, cpu, busy)
		f := Finding{
			ID: IDNICOneCPU, Severity: Warning, CPUs: []int{cpu},
			Summary:  fmt.Sprintf("All %d queue IRQs of %s landed on CPU%d (%.0f interrupts/s)", len(irqs), n.Name, cpu, total),
			Evidence: append(evs, ev(n.Name+" queue IRQs", float64(len(irqs)), "irqs")),
			Why:      "The NIC spreads packets over several queues so that several CPUs can take them; with every queue's IRQ on one CPU that CPU does all the work.",
			Fix:      fix, Moves: moves,
		}
		if rpsOn(n) {
			f.Severity = Info
			f.Summary += "; RPS is on, as in the dedicated-core layout (ClustrixDB core-0 write-up)"
			f.Fix = "Nothing to do if this is a deliberate dedicated-core layout; otherwise: " + fix
		}
		out = append(out, f)
	}
	return out
}

func fewQueuesNoRPS(h *host.Host, l *Load) []Finding {
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
			Why: "Without RPS, each packet's protocol processing runs on the CPU that took the queue's interrupt, so at most as many CPUs as queues work on receive (RPS/RFS on a single-queue NIC: one queue, CPU0 52.8% softirq).",
		})
		out[len(out)-1].Fix, out[len(out)-1].Moves = rpsFix(h, l, n, cpus, ncpu)
	}
	return out
}

// queueSpreadFix spreads n's queue IRQs, all on cpu (cost percent of
// interrupt time), over cpu and the CPUs with room for a queue's share.
func queueSpreadFix(h *host.Host, l *Load, n *host.NIC, cpu int, cost float64) (string, []Move) {
	irqs := nicIRQsOn(h, l, n, cpu)
	others := otherCPUs(h, l, cpu)
	b := newBudget(l)
	set, ps := b.spreadAtMost(others, cost, true, len(irqs)-1)
	if set.IsEmpty() {
		return b.noRoom(others, fmt.Sprintf("a share of CPU%d's interrupt work", cpu), cost/2) + " What would help instead: more CPUs, or fewer interrupts (coalescing, interrupt deferral).", nil
	}
	b.record(n.Name+" queue IRQs", 0, cpu, ps)
	targets := append([]int{cpu}, set.CPUs()...)
	var cmds []string
	for k, q := range irqs {
		cmds = append(cmds, fmt.Sprintf("`echo %d > /proc/irq/%d/smp_affinity_list`", targets[k%len(targets)], q))
	}
	fix := fmt.Sprintf("Spread %s's queue IRQs over CPU%d and CPUs %s, which have the time (%s): %s", n.Name, cpu, set, predictions(ps), strings.Join(cmds, ", "))
	if set.Equal(others) {
		fix += fmt.Sprintf(" (or plan it, NUMA-local: %s)", planApply("per-queue", n.Name))
	}
	return fix + ".", b.moves
}

// rpsFix turns RPS on for n, whose queue IRQs land on cpus, over those CPUs
// and the others with room for a share of their receive work.
func rpsFix(h *host.Host, l *Load, n *host.NIC, cpus cpuset.Set, ncpu int) (string, []Move) {
	all := h.Topology.Online
	if all.IsEmpty() {
		all = cpuset.Range(0, ncpu-1)
	}
	var soft float64
	for _, c := range cpus.CPUs() {
		if cl := l.CPU(c); cl != nil {
			soft += cl.SoftIRQ
		}
	}
	b := newBudget(l)
	others := all.Difference(cpus)
	set, ps := b.spread(others, soft, true)
	if set.IsEmpty() {
		return b.noRoom(others, n.Name+"'s receive work", soft) + " RPS would only add inter-processor interrupts. What would help instead: more queues (`ethtool -L " + n.Name + " combined N`) or more CPUs.", nil
	}
	from := -1
	if !cpus.IsEmpty() {
		from = cpus.Min()
	}
	b.record(n.Name+" receive work (RPS)", 0, from, ps)
	mask := cpus.Union(set)
	fix := fmt.Sprintf("Enable RPS/RFS on %s's rx queues over CPUs %s, which have the time (%s): `echo %s > /sys/class/net/%s/queues/rx-N/rps_cpus` for each queue", n.Name, mask, predictions(ps), mask.Mask(0), n.Name)
	if set.Equal(others) {
		fix += fmt.Sprintf(" (or plan it: %s)", planApply("rps-spread", n.Name))
	}
	return fix + ".", b.moves
}

// spareCPUs names the CPUs that could take receive work: "onto CPUs with
// spare time (now 1-3)", or that none could.
func spareCPUs(h *host.Host, l *Load) string {
	var all cpuset.Set
	if h != nil && !h.Topology.Online.IsEmpty() {
		all = h.Topology.Online
	} else {
		for _, c := range l.CPUs {
			all = all.Add(c.ID)
		}
	}
	if s := l.WithHeadroom(all, 0); !s.IsEmpty() {
		return fmt.Sprintf("onto CPUs with spare time only (now %s)", s)
	}
	return fmt.Sprintf("but no CPU has spare time now (all above %.0f%% busy): more CPUs or less load help, moving work does not", HeadroomBusyMaxPct)
}

func nilIfEmpty(s []int) []int {
	if len(s) == 0 {
		return []int{}
	}
	return s
}

func rpsIPIOverhead(h *host.Host, l *Load) []Finding {
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
		Fix: "Narrow rps_cpus to the CPUs sharing the NIC's cache/NUMA node (`irqpilot plan --policy rps-spread` picks the node's CPUs) or, with enough hardware queues, turn RPS off and place queue IRQs (`--policy per-queue`) " + spareCPUs(h, l) + "; measure with `irqpilot bench`.",
	}
	for _, s := range l.Softnet {
		if s.ReceivedRPS > 0 {
			f.Evidence = append(f.Evidence, ev(fmt.Sprintf("CPU%d received_rps", s.CPU), s.ReceivedRPS, "/s"))
		}
	}
	return []Finding{f}
}

func irqRemoteNUMA(h *host.Host, l *Load) []Finding {
	if h == nil || len(h.Topology.Nodes) < 2 {
		return nil
	}
	var out []Finding
	for i := range h.IRQs {
		q := &h.IRQs[i]
		if !q.Movable() || q.Class == host.ClassTimer {
			continue
		}
		node := h.IRQNode(q)
		if node < 0 {
			continue
		}
		var served cpuset.Set
		rate := 0.0
		if l != nil {
			if r := l.IRQ(q.Number); r != nil {
				served, rate = r.CPUs, r.Rate
			}
		}
		if served.IsEmpty() && q.EffectiveAffinity != nil {
			served = *q.EffectiveAffinity
		}
		if served.IsEmpty() {
			continue
		}
		remote := true
		var nodes []string
		for _, c := range served.CPUs() {
			cn := h.CPUNode(c)
			if cn == node || cn < 0 {
				remote = false
			}
			nodes = append(nodes, fmt.Sprintf("CPU%d node %d", c, cn))
		}
		if !remote {
			continue
		}
		sev := Info
		if rate >= ActiveIRQRate {
			sev = Warning
		}
		var local cpuset.Set
		for _, nd := range h.Topology.Nodes {
			if nd.ID == node {
				local = nd.CPUs
			}
		}
		var moves []Move
		fix := fmt.Sprintf("Move it to node %d's CPUs (%s) that have spare time; doctor measures that on the live machine (`irqpilot doctor`).", node, local)
		if l != nil {
			// Its interrupt time moves whole: the share of each serving
			// CPU's interrupt time that its interrupts make up.
			var share float64
			if r := l.IRQ(q.Number); r != nil {
				for _, c := range served.CPUs() {
					if cl := l.CPU(c); cl != nil && cl.Interrupts > 0 {
						share += l.CostPct(cl) * min(1, r.PerCPU[c]/cl.Interrupts)
					}
				}
			}
			b := newBudget(l)
			if set, ps := b.eachFits(local.Difference(served), share); !set.IsEmpty() {
				b.record(irqLabel(h, q.Number), 0, served.Min(), ps)
				moves = b.moves
				fix = fmt.Sprintf("`echo %s > /proc/irq/%d/smp_affinity_list` (%s)", set, q.Number, predictions(ps))
				if set.Equal(local) {
					fix += ", or `irqpilot plan --policy per-queue` (NUMA-local placement)"
				}
				fix += "."
			} else {
				fix = b.noRoom(local.Difference(served), fmt.Sprintf("%s on node %d", irqLabel(h, q.Number), node), share) + " It stays remote: cross-node traffic costs less than a saturated CPU."
			}
		}
		out = append(out, Finding{
			ID: IDIRQRemoteNUMA, Severity: sev, CPUs: served.CPUs(),
			Summary: fmt.Sprintf("%s is served on CPU(s) %s of another NUMA node than its device (node %d)", irqLabel(h, q.Number), served, node),
			Evidence: []Evidence{
				ev(irqLabel(h, q.Number)+" device node", float64(node), "node"),
				ev(irqLabel(h, q.Number)+" rate", rate, "/s"),
			},
			Why: "The device writes packets and completions into memory on its own node; handling them on another node adds cross-node memory traffic to every interrupt (" + strings.Join(nodes, ", ") + ").",
			Fix: fix, Moves: moves,
		})
	}
	return out
}

// busyApps are the application threads at least AppBusyPct busy on cpu:
// their processes (first seen first), evidence, names and total use.
func busyApps(l *Load, cpu int) (pids []int, evs []Evidence, names []string, busy float64) {
	for _, t := range l.Tasks {
		if t.Kernel || t.CPU != cpu || t.Busy < AppBusyPct {
			continue
		}
		if !slices.Contains(pids, t.PID) {
			pids = append(pids, t.PID)
		}
		busy += t.Busy
		evs = append(evs, ev(fmt.Sprintf("thread %d (%s, pid %d) CPU use", t.TID, t.Comm, t.PID), t.Busy, "%"))
		if len(names) < 5 {
			names = append(names, fmt.Sprintf("%s[%d]", t.Comm, t.TID))
		}
	}
	return pids, evs, names, busy
}

func appOnIRQCPU(h *host.Host, l *Load) []Finding {
	if l == nil || len(l.Tasks) == 0 || len(l.CPUs) < 2 {
		return nil
	}
	hot := -1
	for i := range l.CPUs {
		if l.CostPct(&l.CPUs[i]) >= HotIRQPct && (hot < 0 || l.CostPct(&l.CPUs[i]) > l.CostPct(&l.CPUs[hot])) {
			hot = i
		}
	}
	if hot < 0 {
		return nil
	}
	c := &l.CPUs[hot]
	pids, threads, names, busy := busyApps(l, c.ID)
	if len(threads) == 0 {
		return nil
	}
	sev := Info
	if c.Idle <= BoundIdlePct {
		sev = Warning
	}
	evs := append([]Evidence{
		ev(fmt.Sprintf("CPU%d %%irq+%%soft", c.ID), c.IRQTime(), "%"),
		ev(fmt.Sprintf("CPU%d %%idle", c.ID), c.Idle, "%"),
		ev(fmt.Sprintf("CPU%d interrupt time, %s", c.ID, CostDescription(l.CostSource)), l.CostPct(c), "%"),
	}, threads...)
	for _, o := range otherCPUs(h, l, c.ID).CPUs() {
		if hr := l.Headroom(o); hr.Measured {
			evs = append(evs, ev(fmt.Sprintf("CPU%d spare time (up to %.0f%% busy)", o, HeadroomBusyMaxPct), hr.Spare, "%"))
		}
	}
	b := newBudget(l)
	sentences, commands := appMoves(h, l, b, c.ID, pids)
	fix := strings.Join(sentences, " ")
	if len(commands) > 0 {
		fix += " Leave it where it is if one worker per queue shares its queue's core on purpose (`--policy colocate`)."
	}
	fix += fmt.Sprintf(" Threads used %.0f%% of CPU%d.", busy, c.ID)
	return []Finding{{
		appThreads: threads,
		ID:         IDAppOnIRQCPU, Severity: sev, CPUs: []int{c.ID},
		Summary: fmt.Sprintf("Busy application threads run on CPU%d, the CPU with the most interrupt work (%.1f%%): %s",
			c.ID, c.IRQTime(), strings.Join(names, ", ")),
		Evidence: evs,
		Why:      "Interrupts preempt the application on this CPU and the application delays the softirq work; unless this is deliberate full affinity (Intel IRQ+process affinity study, one worker per queue), both lose.",
		Fix:      fix, Moves: b.moves,
	}}
}

func irqbalanceWithManual(h *host.Host, l *Load) []Finding {
	if h == nil || !h.Irqbalance.Running {
		return nil
	}
	var manual []string
	for i := range h.NICs {
		if rpsOn(&h.NICs[i]) {
			manual = append(manual, "RPS on "+h.NICs[i].Name)
		}
	}
	if h.RPSSockFlowEntries != nil && *h.RPSSockFlowEntries > 0 {
		manual = append(manual, fmt.Sprintf("rps_sock_flow_entries=%d", *h.RPSSockFlowEntries))
	}
	if len(manual) == 0 {
		return nil
	}
	return []Finding{{
		ID: IDIrqbalanceManual, Severity: Warning, CPUs: []int{},
		Summary:  fmt.Sprintf("irqbalance (pid %d) is running alongside manual steering: %s", h.Irqbalance.PID, strings.Join(manual, "; ")),
		Evidence: []Evidence{ev("irqbalance pid", float64(h.Irqbalance.PID), "pid"), ev("manual settings", float64(len(manual)), "settings")},
		Why:      "irqbalance moves IRQs every 10 s by its own rules; hand-placed IRQs and steering designed around a fixed placement drift apart from it (the ClustrixDB core-0 write-up and AWS Graviton memcached tuning stop irqbalance first).",
		Fix:      "Stop it (`systemctl disable --now irqbalance`), or keep it off the CPUs you manage (plan `irqbalance: ban`).",
	}}
}

func managedIRQs(h *host.Host, l *Load) []Finding {
	if h == nil {
		return nil
	}
	var irqs []string
	var cpus cpuset.Set
	for i := range h.IRQs {
		q := &h.IRQs[i]
		if q.Managed != host.ManagedYes {
			continue
		}
		irqs = append(irqs, irqLabel(h, q.Number))
		if q.EffectiveAffinity != nil {
			cpus = cpus.Union(*q.EffectiveAffinity)
		}
	}
	if len(irqs) == 0 {
		return nil
	}
	return []Finding{{
		ID: IDManagedIRQs, Severity: Info, CPUs: nilIfEmpty(cpus.CPUs()),
		Summary:  fmt.Sprintf("%d kernel-managed IRQ(s): %s", len(irqs), strings.Join(irqs, ", ")),
		Evidence: []Evidence{ev("managed IRQs", float64(len(irqs)), "irqs")},
		Why:      "The driver asked the kernel to spread these queue vectors over the CPUs (one per CPU group); the kernel refuses affinity writes to them (EPERM/EIO). They need no moving: each queue's interrupt already arrives on the CPUs that submit to it.",
		Fix:      "Nothing to do; irqpilot leaves them alone. To keep them off isolated CPUs, boot with isolcpus=managed_irq,<cpus>.",
	}}
}

func softnetDrops(h *host.Host, l *Load) []Finding {
	if l == nil {
		return nil
	}
	var cpus []int
	var evs []Evidence
	var total float64
	for _, s := range l.Softnet {
		if d := s.Dropped + s.FlowLimit; d > 0 {
			cpus = append(cpus, s.CPU)
			total += d
			evs = append(evs, ev(fmt.Sprintf("CPU%d dropped", s.CPU), s.Dropped, "/s"))
			if s.FlowLimit > 0 {
				evs = append(evs, ev(fmt.Sprintf("CPU%d flow_limit drops", s.CPU), s.FlowLimit, "/s"))
			}
		}
	}
	if len(cpus) == 0 {
		return nil
	}
	return []Finding{{
		ID: IDSoftnetDrops, Severity: Warning, CPUs: cpus,
		Summary:  fmt.Sprintf("The kernel dropped %.0f packets/s because per-CPU backlogs were full", total),
		Evidence: evs,
		Why:      "Packets handed to a CPU's backlog (RPS, veth, loopback, non-NAPI drivers) are dropped when the backlog holds net.core.netdev_max_backlog packets; the sender sees loss.",
		Fix:      "Raise the backlog: `sysctl -w net.core.netdev_max_backlog=4096` (default 1000), and spread the receive work (RPS) so no single backlog overflows, " + spareCPUs(h, l) + ".",
	}}
}

func softnetSqueeze(h *host.Host, l *Load) []Finding {
	if l == nil {
		return nil
	}
	var cpus []int
	var evs []Evidence
	for _, s := range l.Softnet {
		netrx := 0.0
		if c := l.CPU(s.CPU); c != nil {
			netrx = c.NetRx
		}
		if s.TimeSqueeze >= SqueezeRate && (netrx == 0 || s.TimeSqueeze/netrx >= SqueezeRatio) {
			cpus = append(cpus, s.CPU)
			evs = append(evs, ev(fmt.Sprintf("CPU%d time_squeeze", s.CPU), s.TimeSqueeze, "/s"),
				ev(fmt.Sprintf("CPU%d NET_RX softirqs", s.CPU), netrx, "/s"))
		}
	}
	if len(cpus) == 0 {
		return nil
	}
	return []Finding{{
		ID: IDSoftnetSqueeze, Severity: Warning, CPUs: cpus,
		Summary:  fmt.Sprintf("Receive processing on CPU(s) %s ran out of budget with packets still waiting", cpuset.Of(cpus...)),
		Evidence: evs,
		Why:      "net_rx_action stops after net.core.netdev_budget packets or netdev_budget_usecs; the rest waits for ksoftirqd, adding latency and risking ring overflows.",
		Fix:      "Raise the budget: `sysctl -w net.core.netdev_budget=600 net.core.netdev_budget_usecs=4000` (defaults 300 and 2000), or spread receive work over more CPUs (RPS, more queues), " + spareCPUs(h, l) + ".",
	}}
}

// cpuIRQTime is CPU c's interrupt time in percent (CostPct: measured with
// the eBPF collector, else /proc/stat's hardirq+softirq), 0 if unknown.
func cpuIRQTime(l *Load, c int) float64 {
	if l == nil {
		return 0
	}
	if cl := l.CPU(c); cl != nil {
		return l.CostPct(cl)
	}
	return 0
}
