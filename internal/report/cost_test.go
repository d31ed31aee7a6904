package report

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/irqpilot/irqpilot/internal/kernel/bpfcost"
	"github.com/irqpilot/irqpilot/internal/load"
)

func TestCostChart(t *testing.T) {
	runs := testRuns(t)
	// Counts only: the chart says the times are estimated.
	p, err := CostChart(runs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(p.Title.Text, "Interrupt time per CPU by source (estimated from counts)") {
		t.Errorf("title %q", p.Title.Text)
	}
	// The udp-loopback run spends softirq time on NET_RX: a series for it.
	var netrx bool
	for _, s := range runs[1].CostSeries() {
		if s.Source == "NET_RX" && s.Mean > 0 {
			netrx = true
		}
	}
	if !netrx {
		t.Error("no NET_RX time series in the UDP loopback run")
	}

	// With the collector's recorded snapshots in the samples: measured.
	var snaps [2]*bpfcost.Snapshot
	for i, name := range []string{"snapshot-1.json", "snapshot-2.json"} {
		b, err := os.ReadFile("../kernel/bpfcost/testdata/" + name)
		if err != nil {
			t.Fatal(err)
		}
		snaps[i] = &bpfcost.Snapshot{}
		if err := json.Unmarshal(b, snaps[i]); err != nil {
			t.Fatal(err)
		}
	}
	c, err := bpfcost.Diff(snaps[0], snaps[1])
	if err != nil {
		t.Fatal(err)
	}
	l := runs[0].Loads[0]
	l.CostSource = load.CostBPF
	for i := range l.CPUs {
		l.CPUs[i].HardirqTime = c.Hardirq[l.CPUs[i].ID]
		l.CPUs[i].SoftirqTime = c.Softirq[l.CPUs[i].ID]
	}
	if p, err = CostChart(runs[:1], Options{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(p.Title.Text, "(measured with eBPF)") {
		t.Errorf("title %q", p.Title.Text)
	}
	if m, e := runs[0].CostSources(); m != 1 || e != 0 {
		t.Errorf("CostSources = %d, %d", m, e)
	}
}
