package tui

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/irqpilot/irqpilot/internal/load"
)

// A frame built from a measured load carries the fixed JSON fields and
// prints the per-CPU time by source with the word "measured".
func TestFrameCost(t *testing.T) {
	l := loadPair(t, "testdata/busy/a", "testdata/busy/b")
	// Pretend the collector measured: 12.5 ms/s NET_RX on CPU1, 0.4 ms/s
	// in IRQ 36 there.
	l.CostSource = load.CostBPF
	for i := range l.CPUs {
		l.CPUs[i].SoftirqTime = map[string]float64{"NET_RX": 0, "TIMER": 0.001, "TASKLET": 0.002}
		l.CPUs[i].HardirqTime = 0
	}
	l.CPU(1).SoftirqTime["NET_RX"] = 0.0125
	l.CPU(1).HardirqTime = 0.0004
	l.IRQ(36).Time = 0.0004
	f := NewFrame("vm", nil, l)
	b, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		CostSource string `json:"cost_source"`
		CPUs       []struct {
			ID          int                `json:"id"`
			SoftirqTime map[string]float64 `json:"softirq_time"`
			HardirqTime float64            `json:"hardirq_time"`
		} `json:"cpus"`
		IRQs []struct {
			IRQ  int     `json:"irq"`
			Time float64 `json:"time"`
		} `json:"irqs"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.CostSource != "bpf" {
		t.Errorf("cost_source %q", doc.CostSource)
	}
	for _, c := range doc.CPUs {
		if c.ID == 1 && (c.SoftirqTime["NET_RX"] != 0.0125 || c.HardirqTime != 0.0004) {
			t.Errorf("CPU1 %+v", c)
		}
	}
	found := false
	for _, q := range doc.IRQs {
		if q.IRQ == 36 {
			found = q.Time == 0.0004
		}
	}
	if !found {
		t.Errorf("irq 36 time missing: %s", b)
	}

	text := FormatText(f, 100, 5)
	t.Logf("\n%s", strings.Join(text, "\n"))
	if !strings.Contains(text[0], "cost measured") {
		t.Errorf("title %q does not say measured", text[0])
	}
	var row []string
	for i, ln := range text {
		if strings.Contains(ln, "ms/s measured with eBPF") {
			for _, r := range text[i+1:] {
				if f := strings.Fields(r); len(f) == 9 && f[0] == "1" {
					row = f
				}
			}
		}
	}
	// CPU hard NET_RX NET_TX BLOCK TIMER SCHED RCU other
	if row == nil || row[1] != "0.4" || row[2] != "13" || row[5] != "1.0" || row[8] != "2.0" {
		t.Errorf("CPU1 cost row %q", row)
	}
}
