package load

import (
	"maps"
	"slices"

	"github.com/irqpilot/irqpilot/internal/kernel/bpfcost"
)

// Cost sources (Load.CostSource).
const (
	// CostBPF: interrupt times measured by the eBPF collector.
	CostBPF = "bpf"
	// CostCounts: estimated from /proc/stat's irq and softirq time split by
	// interrupt and softirq counts (what irqbalance assumes; on kernels
	// without CONFIG_IRQ_TIME_ACCOUNTING /proc/stat's times are themselves
	// tick samples).
	CostCounts = "counts"
)

// CostReader reads the eBPF collector's maps (bpfcost.Collector).
type CostReader interface {
	Read() (*bpfcost.Snapshot, error)
}

// CostDescription is the words for a cost source: "measured" or
// "estimated from counts".
func CostDescription(source string) string {
	if source == CostBPF {
		return "measured"
	}
	return "estimated from counts"
}

// MeasuredIRQPct is the CPU's percentage in hard and soft interrupt context
// from the cost fields (measured when the load's source is CostBPF; with
// counts it equals IRQTime up to rounding).
func (c *CPULoad) MeasuredIRQPct() float64 {
	t := c.HardirqTime
	for _, v := range c.SoftirqTime {
		t += v
	}
	// The collector's counters and the sample's clock are read at slightly
	// different times: a CPU can spend no more than all of its time.
	return min(100*t, 100)
}

// CostPct is the interrupt-time percentage rules decide on: measured when
// l has eBPF cost, /proc/stat's irq+softirq otherwise.
func (l *Load) CostPct(c *CPULoad) float64 {
	if l.CostSource == CostBPF {
		return c.MeasuredIRQPct()
	}
	return c.IRQTime()
}

// costRates fills the time fields: from the eBPF counters when both samples
// carry comparable ones, else estimated from counts.
func costRates(l *Load, prev, cur *Sample) {
	if prev.Cost != nil && cur.Cost != nil {
		if c, err := bpfcost.Diff(prev.Cost, cur.Cost); err == nil {
			measuredCost(l, c)
			return
		}
	}
	estimatedCost(l)
}

func measuredCost(l *Load, c *bpfcost.Cost) {
	l.CostSource = CostBPF
	l.NAPI = c.NAPI
	for i := range l.CPUs {
		cl := &l.CPUs[i]
		cl.HardirqTime = c.Hardirq[cl.ID]
		cl.SoftirqTime = map[string]float64{}
		for name, v := range c.Softirq[cl.ID] {
			cl.SoftirqTime[name] = v
		}
	}
	byIRQ := make(map[int]*bpfcost.IRQCost, len(c.IRQs))
	for i := range c.IRQs {
		byIRQ[c.IRQs[i].IRQ] = &c.IRQs[i]
	}
	for i := range l.IRQs {
		r := &l.IRQs[i]
		r.TimePerCPU = map[int]float64{}
		q := byIRQ[r.IRQ]
		if q == nil {
			continue
		}
		for cpu := range r.PerCPU {
			r.TimePerCPU[cpu] = q.PerCPU[cpu]
			r.Time += q.PerCPU[cpu]
		}
	}
}

// estimatedCost splits each CPU's /proc/stat irq time among the numbered
// IRQs by their counts on that CPU, and its softirq time among the vectors
// by their counts.
func estimatedCost(l *Load) {
	l.CostSource = CostCounts
	for i := range l.CPUs {
		cl := &l.CPUs[i]
		cl.HardirqTime = cl.IRQ / 100
		cl.SoftirqTime = map[string]float64{}
		// Summed in name order: a float sum in map order differs in its
		// last digits from run to run, and so would the output.
		var n float64
		for _, name := range slices.Sorted(maps.Keys(cl.Softirqs)) {
			n += cl.Softirqs[name]
		}
		for name, v := range cl.Softirqs {
			if n > 0 {
				cl.SoftirqTime[name] = cl.SoftIRQ / 100 * v / n
			} else {
				cl.SoftirqTime[name] = 0
			}
		}
	}
	for i := range l.IRQs {
		r := &l.IRQs[i]
		r.TimePerCPU = map[int]float64{}
		for _, cpu := range slices.Sorted(maps.Keys(r.PerCPU)) {
			rate := r.PerCPU[cpu]
			cl := l.CPU(cpu)
			if cl == nil || cl.Interrupts <= 0 {
				continue
			}
			t := cl.HardirqTime * rate / cl.Interrupts
			r.TimePerCPU[cpu] = t
			r.Time += t
		}
	}
}
