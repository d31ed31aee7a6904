package load

import (
	"encoding/json"
	"math"
	"os"
	"testing"

	"github.com/irqpilot/irqpilot/internal/kernel/bpfcost"
)

// Counts only: each CPU's /proc/stat irq time is split among its IRQs by
// their counts, its softirq time among the vectors by theirs.
func TestCostEstimatedFromCounts(t *testing.T) {
	_, _, l := pair(t, "udp-loopback")
	if l.CostSource != CostCounts {
		t.Fatalf("CostSource = %q, want counts", l.CostSource)
	}
	for _, c := range l.CPUs {
		if !near(c.HardirqTime, c.IRQ/100) {
			t.Errorf("CPU%d hardirq_time %g, want %%irq/100 = %g", c.ID, c.HardirqTime, c.IRQ/100)
		}
		var soft float64
		for _, v := range c.SoftirqTime {
			soft += v
		}
		if c.SoftIRQ > 0 && !near(soft, c.SoftIRQ/100) {
			t.Errorf("CPU%d softirq_time sums to %g, want %%soft/100 = %g", c.ID, soft, c.SoftIRQ/100)
		}
		if c.NetRx > 0 && c.SoftIRQ > 0 && c.SoftirqTime["NET_RX"] <= 0 {
			t.Errorf("CPU%d: NET_RX fired but has no estimated time", c.ID)
		}
		if !near(l.CostPct(&c), c.IRQTime()) {
			t.Errorf("CPU%d CostPct %g != IRQTime %g with counts", c.ID, l.CostPct(&c), c.IRQTime())
		}
	}
	// Per IRQ: the times of the IRQs on a CPU add up to that CPU's irq time.
	sum := map[int]float64{}
	for _, q := range l.IRQs {
		for cpu, v := range q.TimePerCPU {
			sum[cpu] += v
		}
	}
	for _, c := range l.CPUs {
		if c.Interrupts > 0 && !near(sum[c.ID], c.HardirqTime) {
			t.Errorf("CPU%d: IRQ times sum to %g, want %g", c.ID, sum[c.ID], c.HardirqTime)
		}
	}
}

// With the collector's recorded maps in both samples the times are the
// measured ones.
func TestCostMeasured(t *testing.T) {
	a, b, _ := pair(t, "udp-loopback")
	for i, s := range []*Sample{a, b} {
		raw, err := os.ReadFile([]string{"../kernel/bpfcost/testdata/snapshot-1.json", "../kernel/bpfcost/testdata/snapshot-2.json"}[i])
		if err != nil {
			t.Fatal(err)
		}
		s.Cost = &bpfcost.Snapshot{}
		if err := json.Unmarshal(raw, s.Cost); err != nil {
			t.Fatal(err)
		}
	}
	want, err := bpfcost.Diff(a.Cost, b.Cost)
	if err != nil {
		t.Fatal(err)
	}
	l, err := Rates(a, b)
	if err != nil {
		t.Fatal(err)
	}
	if l.CostSource != CostBPF {
		t.Fatalf("CostSource = %q, want bpf", l.CostSource)
	}
	for _, c := range l.CPUs {
		if c.HardirqTime != want.Hardirq[c.ID] {
			t.Errorf("CPU%d hardirq_time %g, want %g", c.ID, c.HardirqTime, want.Hardirq[c.ID])
		}
		var tot float64
		for _, v := range bpfcost.VectorNames {
			if c.SoftirqTime[v] != want.Softirq[c.ID][v] {
				t.Errorf("CPU%d %s %g, want %g", c.ID, v, c.SoftirqTime[v], want.Softirq[c.ID][v])
			}
			tot += want.Softirq[c.ID][v]
		}
		if math.Abs(l.CostPct(&c)-100*(tot+want.Hardirq[c.ID])) > 1e-9 {
			t.Errorf("CPU%d CostPct %g", c.ID, l.CostPct(&c))
		}
	}
	// A collector restarted between the samples cannot be diffed: counts.
	b.Cost.Boot++
	if l, _ := Rates(a, b); l.CostSource != CostCounts {
		t.Errorf("snapshots of two collectors: CostSource %q, want counts", l.CostSource)
	}
}

// Measured interrupt time is read a little apart from the sample's clock:
// it never says a CPU spent more than all of its time.
func TestMeasuredIRQPctAtMostTheCPU(t *testing.T) {
	c := CPULoad{HardirqTime: 0.3, SoftirqTime: map[string]float64{"NET_RX": 0.72}}
	if got := c.MeasuredIRQPct(); got != 100 {
		t.Errorf("MeasuredIRQPct = %g, want 100", got)
	}
}

// The estimate is the same to the last bit every time it is made from the
// same samples: sums run in a fixed order, not a map's, so doctor's and
// top's JSON from one capture pair never differ between runs. Map order
// changes on every range, so 50 estimates would show a difference.
func TestCostEstimateExactlyRepeatable(t *testing.T) {
	a, b, first := pair(t, "udp-loopback")
	want, err := json.Marshal(first)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50; i++ {
		l, err := Rates(a, b)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := json.Marshal(l)
		if string(got) != string(want) {
			t.Fatalf("estimate %d differs from the first", i+2)
		}
	}
}
