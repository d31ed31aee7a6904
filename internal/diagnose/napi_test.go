package diagnose

import (
	"strings"
	"testing"

	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/load"
	"github.com/irqpilot/irqpilot/internal/load/loadtest"
)

// napiHost is nicHost with one NAPI instance per queue of eth0 (ids 100…,
// IRQ 40+q), deferral off, not threaded.
func napiHost(n, queues int, deferral uint32) *host.Host {
	h := nicHost(n, queues, "")
	for q := 0; q < queues; q++ {
		irq, d, g, f := 40+q, deferral, uint64(0), false
		h.NAPI = append(h.NAPI, host.NAPI{ID: uint32(100 + q), Device: "eth0", IRQ: &irq, DeferHardIRQs: &d, GROFlushTimeout: &g, Threaded: &f})
	}
	return h
}

func TestNAPIBudget(t *testing.T) {
	h := napiHost(4, 2, 0)
	c := loadtest.Craft(4).IRQ(40, 0, 5000).IRQ(41, 0, 0, 50).Softirq("NET_RX", 1, 5000).Softnet(1, 100000, 0, 200, 0).Softnet(2, 1000, 0, 200, 0).Softirq("NET_RX", 2, 5000)
	fs := find(Diagnose(h, c.Load(t)), IDNAPIBudget)
	// CPU2 squeezes too, but no NAPI instance is polled there (IRQ 41 at
	// 50/s is below ActiveIRQRate): only CPU1.
	if len(fs) != 1 || fs[0].CPUs[0] != 1 || !strings.Contains(fs[0].Summary, "eth0") || fs[0].Device != "eth0" {
		t.Fatalf("%+v", fs)
	}
	if v := evidence(t, fs[0], "CPU1 time_squeeze"); v != 200 {
		t.Errorf("squeeze %v", v)
	}
	// The same counters on a host without NAPI facts: silent (softnet-squeeze speaks).
	if fs := find(Diagnose(nicHost(4, 2, ""), c.Load(t)), IDNAPIBudget); len(fs) != 0 {
		t.Errorf("no NAPI facts: %+v", fs)
	}
	// No squeeze: silent.
	if fs := find(Diagnose(h, loadtest.Craft(4).IRQ(40, 0, 5000).Load(t)), IDNAPIBudget); len(fs) != 0 {
		t.Errorf("no squeeze: %+v", fs)
	}
	// A busy NAPI thread on the squeezing CPU: evidence, and the fix is the budget.
	l := c.Load(t)
	l.Tasks = []load.TaskLoad{{PID: 900, TID: 900, Comm: "napi/eth0-100", CPU: 2, Busy: 60, Kernel: true}}
	fs = find(Diagnose(h, l), IDNAPIBudget)
	if len(fs) != 2 || fs[1].CPUs[0] != 2 || fs[1].Device != "eth0" {
		t.Errorf("threaded: %+v", fs)
	}
}

func TestIRQStormDeferral(t *testing.T) {
	h := napiHost(4, 2, 0)
	c := loadtest.Craft(4).CPU(1, 0, 0, 20, 30, 50).IRQ(40, 0, 60000)
	fs := find(Diagnose(h, c.Load(t)), IDIRQStormDeferral)
	if len(fs) != 1 || fs[0].CPUs[0] != 1 || fs[0].Device != "eth0" || fs[0].Ref != "irq-storm-deferrable:eth0" {
		t.Fatalf("%+v", fs)
	}
	if v := evidence(t, fs[0], "irq 40 (eth0 queue 0) on CPU1"); v != 60000 {
		t.Errorf("rate %v", v)
	}
	// Deferral already on: silent.
	if fs := find(Diagnose(napiHost(4, 2, 2), c.Load(t)), IDIRQStormDeferral); len(fs) != 0 {
		t.Errorf("deferring: %+v", fs)
	}
	// The rate without harm (an idle CPU): silent.
	if fs := find(Diagnose(h, loadtest.Craft(4).IRQ(40, 0, 60000).Load(t)), IDIRQStormDeferral); len(fs) != 0 {
		t.Errorf("no harm: %+v", fs)
	}
	// Below the storm rate: silent.
	if fs := find(Diagnose(h, loadtest.Craft(4).CPU(1, 0, 0, 20, 30, 50).IRQ(40, 0, 5000).Load(t)), IDIRQStormDeferral); len(fs) != 0 {
		t.Errorf("low rate: %+v", fs)
	}
}

func TestNAPIThreadShared(t *testing.T) {
	h := napiHost(4, 1, 0)
	c := loadtest.Craft(4).CPU(3, 40, 55, 0, 0, 5)
	tasks := []load.TaskLoad{
		{PID: 900, TID: 900, Comm: "napi/eth0-100", CPU: 3, Busy: 45, Kernel: true},
		{PID: 1234, TID: 1240, Comm: "memcached", CPU: 3, Busy: 50},
	}
	l := c.Load(t)
	l.Tasks = tasks
	fs := find(Diagnose(h, l), IDNAPIThreadShared)
	if len(fs) != 1 || fs[0].CPUs[0] != 3 || !strings.Contains(fs[0].Summary, "napi/eth0-100[900], memcached[1240]") {
		t.Fatalf("%+v", fs)
	}
	// A CPU with room to spare: no harm, silent.
	l2 := loadtest.Craft(4).CPU(3, 40, 10, 0, 0, 50).Load(t)
	l2.Tasks = tasks
	if fs := find(Diagnose(h, l2), IDNAPIThreadShared); len(fs) != 0 {
		t.Errorf("idle CPU: %+v", fs)
	}
	// Different CPUs: silent.
	l3 := c.Load(t)
	l3.Tasks = []load.TaskLoad{tasks[0], {PID: 1234, TID: 1240, Comm: "memcached", CPU: 2, Busy: 50}}
	if fs := find(Diagnose(h, l3), IDNAPIThreadShared); len(fs) != 0 {
		t.Errorf("apart: %+v", fs)
	}
}
