package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/host"
)

func TestInventoryNAPILines(t *testing.T) {
	irq, pid := 38, 7218
	tr, f := true, false
	d, z := uint32(2), uint64(0)
	g := uint64(20000)
	cpus := cpuset.Of(1)
	h := &host.Host{
		NICs: []host.NIC{{Name: "eth0", Node: -1}, {Name: "vA", Virtual: true, Kind: "veth", Node: -1}},
		NAPI: []host.NAPI{
			{ID: 257, Device: "eth0", Queues: host.NAPIQueues{RX: []int{0}, TX: []int{0}}, IRQ: &irq, PID: &pid, CPUs: &cpus,
				Threaded: &tr, DeferHardIRQs: &d, GROFlushTimeout: &g, IRQSuspendTimeout: &z},
			{ID: 274, Device: "vA", Queues: host.NAPIQueues{RX: []int{}, TX: []int{}}, Threaded: &f, DeferHardIRQs: &d, GROFlushTimeout: &z, IRQSuspendTimeout: &z},
			{ID: 9, Device: "vA"}, // a kernel that reports ids only
		},
	}
	var b bytes.Buffer
	writeInventory(&b, h, "test")
	out := b.String()
	for _, want := range []string{
		"    napi 257: rx 0  tx 0  irq 38  threaded (pid 7218 on cpus 1)  defer-hard-irqs 2  gro-flush-timeout 20000ns  irq-suspend-timeout 0ns\n",
		"    napi 274: softirq  defer-hard-irqs 2  gro-flush-timeout 0ns  irq-suspend-timeout 0ns\n",
		"    napi 9: (no details reported)\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("inventory lacks %q:\n%s", want, out)
		}
	}
	// Each under its own NIC.
	if i, j := strings.Index(out, "napi 257"), strings.Index(out, "  vA  "); i < 0 || j < 0 || i > j {
		t.Errorf("napi 257 not under eth0:\n%s", out)
	}
}
