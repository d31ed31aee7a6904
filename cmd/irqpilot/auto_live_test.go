package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/irqpilot/irqpilot/internal/livetest"
)

// Issue 10, live: on this machine at rest `plan --policy auto` measures the
// load and plans no change, saying why with the numbers; if something on
// the machine is hurting right now, the plan must name the evidence.
func TestLiveAutoPlansNothingAtRest(t *testing.T) {
	livetest.NeedRoot(t) // to read every IRQ's placement
	out, errOut, err := runIrqpilot(t, "plan", "--policy", "auto", "--sample", "1s", "--json")
	if err != nil {
		t.Fatalf("plan: %v\n%s", err, errOut)
	}
	var d struct {
		Why    string         `json:"why"`
		Counts map[string]int `json:"counts"`
	}
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if d.Counts["pending"] == 0 {
		if !strings.Contains(d.Why, "no evidence of harm") || !strings.Contains(d.Why, "% busy") {
			t.Errorf("empty plan without the reason and numbers: %q", d.Why)
		}
		return
	}
	for _, ev := range []string{"interrupt-bound", "saturated", "drop", "squeeze", "remote", "isolated", "another NUMA node"} {
		if strings.Contains(d.Why, ev) {
			t.Logf("the machine is busy: auto planned %d changes from evidence: %s", d.Counts["pending"], d.Why)
			return
		}
	}
	t.Errorf("auto planned %d changes without naming evidence of harm: %q", d.Counts["pending"], d.Why)
}
