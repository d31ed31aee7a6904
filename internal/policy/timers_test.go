package policy

import (
	"slices"
	"testing"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/plan"
	"github.com/irqpilot/irqpilot/internal/setting"
)

// TestNoPolicyPlansPerCPUTimers: a per-CPU timer (ARM's arch_timer, Xen's
// per-vCPU timerN event channel) and Xen's per-CPU IPIs are never written
// by any policy's plan; a plan that moved one would take a CPU's tick away.
func TestNoPolicyPlansPerCPUTimers(t *testing.T) {
	h := synth{CPUs: 8, NICs: []synthNIC{{Name: "eth0", Queues: 4}}}.Build()
	all := cpuset.Range(0, 7)
	perCPU := map[int]bool{}
	for i, q := range []host.IRQ{
		{Number: 11, Actions: []string{"arch_timer"}, Chip: "GICv3", HWIRQ: "30", Trigger: "Level", Class: host.ClassTimer},
		{Number: 25, Actions: []string{"rk_timer"}, Chip: "GICv3", HWIRQ: "321", Trigger: "Level", Class: host.ClassTimer},
		{Number: 64, Actions: []string{"timer0"}, Chip: "xen-percpu-virq", Class: host.ClassTimer},
		{Number: 65, Actions: []string{"resched0"}, Chip: "xen-percpu-ipi", Class: host.ClassOther},
	} {
		q.Managed, q.Affinity, q.EffectiveAffinity = host.ManagedNo, &all, ptr(cpuset.Of(i%8))
		h.IRQs = append(h.IRQs, q)
		perCPU[q.Number] = true
	}
	sortIRQs(h)
	for _, name := range PolicyNames() {
		t.Run(name, func(t *testing.T) {
			p, err := Make(name, h, Options{App: "comm:memcached", Devices: nil})
			if err != nil {
				t.Skipf("policy does not plan this host: %v", err)
			}
			changes, err := plan.Resolve(p, h)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range changes {
				if c.Kind == setting.KindIRQAffinity && c.IRQ != nil && perCPU[*c.IRQ] && c.Status != setting.StatusSkipped {
					t.Errorf("plan writes per-CPU irq %d: %s = %s (%s)", *c.IRQ, c.Target, c.Value, c.Reason)
				}
			}
		})
	}
	for n := range perCPU {
		if h.IRQ(n).Movable() {
			t.Errorf("irq %d is movable", n)
		}
	}
}

// TestResolveSkipsPerCPUTimers: a hand-written plan that names a per-CPU
// timer (by number or by an action pattern) resolves to a skipped change.
func TestResolveSkipsPerCPUTimers(t *testing.T) {
	h := synth{CPUs: 4}.Build()
	all := cpuset.Range(0, 3)
	h.IRQs = append(h.IRQs, host.IRQ{Number: 64, Actions: []string{"timer0"}, Chip: "xen-percpu-virq",
		Class: host.ClassTimer, Managed: host.ManagedNo, Affinity: &all})
	sortIRQs(h)
	n := 64
	p := &plan.Plan{Version: 1, IRQs: []plan.IRQEntry{{IRQ: &n, CPUs: cpuset.Of(1), Reason: "test"}, {Action: "timer", CPUs: cpuset.Of(2), Reason: "test"}}}
	changes, err := plan.Resolve(p, h)
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 2 {
		t.Fatalf("%d changes, want 2: %+v", len(changes), changes)
	}
	for _, c := range changes {
		if c.Status != setting.StatusSkipped || c.Note != plan.PerCPUSkip {
			t.Errorf("%s: status %q note %q, want skipped as per-CPU", c.Target, c.Status, c.Note)
		}
	}
}

// sortIRQs keeps h.IRQs in number order, as the readers leave them.
func sortIRQs(h *host.Host) {
	slices.SortFunc(h.IRQs, func(a, b host.IRQ) int { return a.Number - b.Number })
}
