package main

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/irqpilot/irqpilot/internal/load"
	"github.com/irqpilot/irqpilot/internal/report"
)

// TestRolloutShares: the per-CPU share line report --prometheus prints
// with --before/--after, "-" for a window without data.
func TestRolloutShares(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	step := 5 * time.Second
	var loads []*load.Load
	for i, cpus := range [][]load.CPULoad{
		{{ID: 0, CPUTime: load.CPUTime{IRQ: 3, SoftIRQ: 3}}, {ID: 1, CPUTime: load.CPUTime{IRQ: 1, SoftIRQ: 1}}},
		{{ID: 0, CPUTime: load.CPUTime{SoftIRQ: 1}}, {ID: 1, CPUTime: load.CPUTime{SoftIRQ: 3}}},
	} {
		loads = append(loads, &load.Load{Start: t0.Add(time.Duration(i) * step), End: t0.Add(time.Duration(i+1) * step), Interval: step, CPUs: cpus})
	}
	r, err := report.RunOf("node1", "test", loads, nil)
	if err != nil {
		t.Fatal(err)
	}
	before := report.Window{Name: "before", From: t0, To: t0.Add(step)}
	after := report.Window{Name: "after", From: t0.Add(step), To: t0.Add(2 * step)}
	if d := cmp.Diff("before→after cpu0 75%→25%, cpu1 25%→75%", shares(r, before, after)); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	none := report.Window{Name: "later", From: t0.Add(time.Hour), To: t0.Add(2 * time.Hour)}
	if d := cmp.Diff("before→later cpu0 75%→-, cpu1 25%→-", shares(r, before, none)); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}
