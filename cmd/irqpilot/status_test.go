package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/irqpilot/irqpilot/internal/agent"
	"github.com/irqpilot/irqpilot/internal/host"
)

// regexpHexMask matches a kernel hex mask as a word ("0000000c").
var regexpHexMask = regexp.MustCompile(`\b[0-9a-f]{8}(,[0-9a-f]{8})*\b`)

// status's text shows every CPU set as a cpulist (the agent's JSON keeps
// the kernel's masks, with value_cpus and the repairs' *_cpus beside them)
// and says which enforced IRQ's move is pending.
func TestGoldenStatusText(t *testing.T) {
	at := time.Date(2026, 11, 22, 10, 45, 0, 0, time.UTC)
	st := &agent.Status{PID: 4242, Started: at, Plan: "/etc/irqpilot/plan.yaml", Interval: "30s", Passes: 12, LastPass: at.Add(6 * time.Minute),
		Enforced: []agent.Enforced{
			{Setting: "irq-affinity", Target: "irq 41 (eth0 rx queue 3)", Device: "eth0", Value: "0", Note: host.MovePendingNote},
			{Setting: "irq-affinity", Target: "irq 42 (eth0 rx queue 4)", Device: "eth0", Value: "1"},
			{Setting: "rps-cpus", Target: "eth0 rx-3", Device: "eth0", Value: "0000000c"},
			{Setting: "xps-cpus", Target: "eth0 tx-3", Device: "eth0", Value: "00000000"},
		},
		Repairs: []agent.Repair{
			{Time: at.Add(5 * time.Minute), Setting: "rps-cpus", Target: "eth0 rx-3", Device: "eth0", Old: "0000000c", Drifted: "00000000", Restored: "0000000c"},
			{Time: at.Add(5 * time.Minute), Setting: "irq-affinity", Target: "irq 42 (eth0 rx queue 4)", Device: "eth0", Old: "1", Drifted: "0-3", Restored: "1",
				Culprit: "irqbalance (pid 977) is running and not banned from any CPU"},
		},
	}
	var b bytes.Buffer
	printStatus(&b, st)
	if m := regexpHexMask.FindString(b.String()); m != "" {
		t.Errorf("status text shows a hex mask %q", m)
	}
	if !strings.Contains(b.String(), host.MovePendingNote) {
		t.Errorf("status text does not say irq 41's move is pending")
	}
	golden(t, "status.txt", b.Bytes())
}
