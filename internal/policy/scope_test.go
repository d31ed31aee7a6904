package policy

import (
	"strings"
	"testing"

	"github.com/irqpilot/irqpilot/internal/plan"
	"github.com/irqpilot/irqpilot/internal/setting"
)

// Issue 16 item 1: `plan --policy dedicated-core --device uxv1` planned 18
// IRQ moves, eth0's among them. With --device, every entry of the plan
// belongs to the named devices, machine-wide settings only on request, and
// the plan says what it left out.
func TestDeviceBoundsEveryPolicy(t *testing.T) {
	h := synth{CPUs: 8, Balance: true, NICs: []synthNIC{{Name: "eth0", Queues: 2}, {Name: "eth1", Queues: 2}}}.Build()
	for _, name := range PolicyNames() {
		for _, machineWide := range []bool{false, true} {
			p := mustMake(t, name, h, Options{Devices: []string{"eth1"}, MachineWide: machineWide})
			ss, err := plan.Resolve(p, h)
			if err != nil {
				t.Fatalf("%s: resolve: %v", name, err)
			}
			for _, s := range ss {
				sc := setting.ScopeOf(&s)
				switch {
				case s.Kind == setting.KindIRQAffinity:
					if s.Device != "eth1" {
						t.Errorf("%s: %s (device %q) planned with --device eth1", name, s.Target, s.Device)
					}
				case sc.NetDevice != "" && sc.NetDevice != "eth1":
					t.Errorf("%s: %s planned with --device eth1", name, s.Target)
				case sc.MachineWide && !machineWide && s.Status != setting.StatusSkipped:
					t.Errorf("%s: machine-wide %s planned without --machine-wide", name, s.Target)
				}
			}
			if !machineWide && p.RPSSockFlowEntries == nil && strings.Contains(strings.Join(p.Notes, "\n"), "rps_sock_flow_entries") == false && name == "dedicated-core" {
				t.Errorf("%s: left out rps_sock_flow_entries without saying so: %v", name, p.Notes)
			}
		}
	}
	p := mustMake(t, "dedicated-core", h, Options{Devices: []string{"eth1"}})
	notes := strings.Join(p.Notes, "\n")
	if !strings.Contains(notes, "left out") || !strings.Contains(notes, "eth0") {
		t.Errorf("dedicated-core --device eth1 does not say it left eth0 out: %v", p.Notes)
	}
}
