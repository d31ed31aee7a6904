package agent

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/irqpilot/irqpilot/internal/hostgen"
	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/livetest"
	"github.com/irqpilot/irqpilot/internal/plan"
)

// On a generated host whose eth0 has 4 queues and eth1 2: a plan naming
// eth1's queue 3 (it has 0-1) and an IRQ that does not exist resolves
// everything else; the two entries wait, each with its line and reason.
// A plan mistake (a CPU the host lacks) is still an error for New and a
// reload (resolve), and only an entry left out of passes (resolveEach).
func TestResolveEach(t *testing.T) {
	root, h := livetest.GenHost(t, hostgen.Spec{CPUs: 8, Packages: 1, Nodes: 1, Offline: hostgen.NoOffline, NVMeQueues: -1,
		NICs: []hostgen.NICSpec{{Name: "eth0", Driver: "ice", Slot: 3, Queues: 4}, {Name: "eth1", Driver: "ice", Slot: 4, Queues: 2}}})
	fs := kernel.New(root)
	text := `version: 1
irqs:
  - irq: 99999
    cpus: "1"
    reason: test
rx_queues:
  - device: eth0
    rps_cpus: "2"
    reason: test
  - device: eth1
    queue: 3
    rps_flow_cnt: 64
    reason: test
  - device: eth1
    queue: 0
    rps_cpus: "3"
    reason: test
  - device: gone0
    rps_cpus: "3"
    reason: test
`
	p, err := plan.Parse("plan.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	changes, _, waiting, bad, err := resolveEach(fs, h, p)
	if err != nil {
		t.Fatal(err)
	}
	var targets []string
	for _, c := range changes {
		targets = append(targets, c.Target)
	}
	if want := []string{"eth0 rx-0", "eth0 rx-1", "eth0 rx-2", "eth0 rx-3", "eth1 rx-0"}; !slices.Equal(targets, want) {
		t.Errorf("enforced %q, want %q", targets, want)
	}
	want := []string{"device gone0",
		"irqs entry at plan line 3 to resolve: IRQ 99999 does not exist on this host",
		"rx_queues entry at plan line 10 to resolve: eth1 has no rx queue 3 (it has 2 rx queues)"}
	if !slices.Equal(waiting, want) {
		t.Errorf("waiting\n%q\nwant\n%q", waiting, want)
	}
	if len(bad) != 2 || !bad[0].Shape || !bad[1].Shape {
		t.Errorf("unresolved %+v: want two, both about the devices' shape", bad)
	}
	if _, _, _, err := resolve(fs, h, p); err != nil {
		t.Errorf("resolve (New, reload) refused entries that wait for a device's shape: %v", err)
	}

	// A CPU this host lacks is the plan's mistake: New and reload refuse
	// it; a pass leaves that entry out and enforces the rest.
	p2, err := plan.Parse("plan.yaml", []byte(strings.Replace(text, `rps_cpus: "2"`, `rps_cpus: "4000"`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	_, _, _, err = resolve(fs, h, p2)
	var errs plan.Errors
	if !errors.As(err, &errs) || len(errs) != 1 || !strings.Contains(err.Error(), "plan.yaml:8: rx_queues[0].rps_cpus: CPU 4000 does not exist") {
		t.Errorf("resolve of a plan naming CPU 4000: %v", err)
	}
	changes, _, _, bad, err = resolveEach(fs, h, p2)
	if err != nil || len(changes) != 1 || len(bad) != 3 || bad[1].Shape {
		t.Errorf("resolveEach: %d changes, unresolved %+v, %v; want eth1 rx-0 enforced and the CPU entry left out", len(changes), bad, err)
	}
}
