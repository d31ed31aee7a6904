package diagnose

import (
	"fmt"
	"sort"
	"strings"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/load"
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
	// Ref names the finding among those of one diagnosis: its ID and its
	// subject (a CPU, a device or an IRQ), "interrupt-bound-cpu:cpu0",
	// "nic-irqs-one-cpu:eth1", "irq-remote-numa:irq42".
	Ref string `json:"ref"`
	// Device is the device the finding is about, when one is: the NIC
	// whose IRQs land on an interrupt-bound CPU, the NIC of a NIC or NAPI
	// rule, the device of a remote IRQ.
	Device string `json:"device,omitempty"`
	// IRQs are the IRQs the finding is about, busiest first.
	IRQs []int `json:"irqs,omitempty"`
	// PIDs are the application processes with busy threads on the
	// finding's CPU, first seen first.
	PIDs []int `json:"pids,omitempty"`

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
func Diagnose(h *host.Host, l *load.Load) []Finding {
	var fs []Finding
	for _, rule := range []func(*host.Host, *load.Load) []Finding{
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
		fs[i].Ref = ref(fs[i])
	}
	sort.SliceStable(fs, func(i, j int) bool {
		if a, b := fs[i].Severity.rank(), fs[j].Severity.rank(); a != b {
			return a > b
		}
		return fs[i].ID < fs[j].ID
	})
	return fs
}

// ref is f's Ref: its ID and subject. Rules about one IRQ name the IRQ,
// rules about a NIC the NIC, the others their CPUs.
func ref(f Finding) string {
	switch {
	case f.ID == IDIRQRemoteNUMA && len(f.IRQs) == 1:
		return fmt.Sprintf("%s:irq%d", f.ID, f.IRQs[0])
	case (f.ID == IDNICOneCPU || f.ID == IDFewQueuesNoRPS || f.ID == IDIRQStormDeferral) && f.Device != "":
		return f.ID + ":" + f.Device
	case len(f.CPUs) > 0:
		return f.ID + ":cpu" + cpuset.Of(f.CPUs...).String()
	}
	return f.ID
}

// Find returns the finding of fs that ref names: its Ref, or its ID when
// only one finding has it. ok is false when none or several match.
func Find(fs []Finding, ref string) (Finding, bool) {
	var byID []Finding
	for _, f := range fs {
		if f.Ref == ref {
			return f, true
		}
		if f.ID == ref {
			byID = append(byID, f)
		}
	}
	if len(byID) == 1 {
		return byID[0], true
	}
	return Finding{}, false
}

// Refs lists the findings' refs, for a message naming what there is.
func Refs(fs []Finding) string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Ref)
	}
	return strings.Join(out, ", ")
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
func onlineCount(h *host.Host, l *load.Load) int {
	if h != nil && !h.Topology.Online.IsEmpty() {
		return h.Topology.Online.Len()
	}
	return len(l.CPUs)
}

func interruptBound(h *host.Host, l *load.Load) []Finding {
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
				ev(fmt.Sprintf("CPU%d interrupt time, %s", c.ID, load.CostDescription(l.CostSource)), l.CostPct(c), "%"),
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
		for k, x := range hots {
			f.IRQs = append(f.IRQs, x.irq)
			if k >= 5 {
				continue
			}
			f.Evidence = append(f.Evidence, ev(irqLabel(h, x.irq)+fmt.Sprintf(" on CPU%d", c.ID), x.rate, "/s"))
			if r := l.IRQ(x.irq); r != nil && l.CostSource == load.CostBPF {
				f.Evidence = append(f.Evidence, ev(irqLabel(h, x.irq)+fmt.Sprintf(" handler time on CPU%d, measured", c.ID), 1000*r.TimePerCPU[c.ID], "ms/s"))
			}
		}
		f.Device = cpuNIC(h, l, c.ID)
		f.PIDs, _, _, _ = busyApps(l, c.ID)
		out = append(out, f)
	}
	return out
}

// cpuIRQTime is CPU c's interrupt time in percent (CostPct: measured with
// the eBPF collector, else /proc/stat's hardirq+softirq), 0 if unknown.
func cpuIRQTime(l *load.Load, c int) float64 {
	if l == nil {
		return 0
	}
	if cl := l.CPU(c); cl != nil {
		return l.CostPct(cl)
	}
	return 0
}
