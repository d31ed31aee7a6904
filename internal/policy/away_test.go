package policy

import (
	"strings"
	"testing"

	"github.com/irqpilot/irqpilot/internal/hostgen"
	"github.com/irqpilot/irqpilot/internal/livetest"
)

// On the lab's server shape (32 CPUs, 4 nodes, an 8-queue NIC on node 2)
// per-queue gives the NIC's node to its queue IRQs and the application the
// other nodes: the plan says so, with the CPUs, and how to keep the
// application near instead. A plan whose application stays on the NIC's
// node says nothing of it.
func TestPlanSaysWhenAppIsAwayFromNIC(t *testing.T) {
	_, h := livetest.GenHost(t, hostgen.Spec{CPUs: 32, Packages: 2, Nodes: 4, ThreadsPerCore: 2, Offline: hostgen.NoOffline,
		NICs: []hostgen.NICSpec{{Name: "eth1", Node: 2, Queues: 8}}, NVMeQueues: -1, Hostname: "server"})
	p := mustMake(t, "per-queue", h, Options{Devices: []string{"eth1"}})
	var note string
	for _, n := range p.Notes {
		if strings.Contains(n, "away from the NIC's NUMA node 2") {
			note = n
		}
	}
	if p.AppCPUs == nil {
		t.Fatalf("no app_cpus advice: %+v", p)
	}
	node2 := h.Topology.Nodes[2].CPUs
	if away := p.AppCPUs.Difference(node2); away.IsEmpty() {
		t.Fatalf("per-queue kept the application on node 2 (%s): the scenario is gone", p.AppCPUs)
	} else if note == "" || !strings.Contains(note, "CPUs "+away.String()) {
		t.Fatalf("app_cpus %s (%s off node 2) without the note; notes: %q", p.AppCPUs, away, p.Notes)
	}
	q := mustMake(t, "per-queue", h, Options{Devices: []string{"eth1"}, AppCPUs: &node2})
	for _, n := range q.Notes {
		if strings.Contains(n, "away from the NIC") {
			t.Errorf("--app-cpus on the NIC's node, yet: %s", n)
		}
	}
}
