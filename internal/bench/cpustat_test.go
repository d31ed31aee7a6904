package bench

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/irqpilot/irqpilot/internal/load"
)

// A report written before CPUStat held the whole split ("usr", "sys",
// "soft") reads into the split's fields, and a new one reads back as written.
func TestCPUStatReadsOldAndNewKeys(t *testing.T) {
	b, err := os.ReadFile("../../docs/evidence/campaign/memcached.json")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := ReadReport(b, "")
	if err != nil {
		t.Fatal(err)
	}
	// The file's first run, CPU 0, as written.
	want := CPUStat{ID: 0, CPUTime: load.CPUTime{User: 16.075650118203207, System: 39.95271867611762,
		SoftIRQ: 13.475177304962557, Idle: 30.496453900716617}, NetRx: 57415.27235644459, Interrupts: 0.2365065345621451}
	if d := cmp.Diff(want, rep.Runs[0].CPUs[0]); d != "" {
		t.Errorf("old report's run 0 CPU 0 (-want +got):\n%s", d)
	}

	c := CPUStat{ID: 3, CPUTime: load.CPUTime{User: 1, Nice: 2, System: 3, IOWait: 4, IRQ: 5, SoftIRQ: 6, Steal: 7,
		Guest: 8, GuestNice: 9, Idle: 10}, NetRx: 11, Interrupts: 12}
	out, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var got CPUStat
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(c, got); d != "" {
		t.Errorf("round trip of %s (-want +got):\n%s", out, d)
	}
}
