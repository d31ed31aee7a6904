// Package plantest builds the hosts the plan and policy tests plan for:
// small synthetic hosts described in a few fields (Synth), the captured
// kernel files of real machines (ReadSnapshot) and generated large hosts
// (GenHost), each read by the same readers irqpilot uses.
package plantest

import (
	"fmt"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/host"
)

// Synth describes a small synthetic host for policy tests.
type Synth struct {
	CPUs     int
	Nodes    int  // NUMA nodes, CPUs split in contiguous halves (interleave false)
	SMT      bool // CPU i and i+cpus/2 are siblings
	Offline  []int
	Isolated []int
	NICs     []NIC
	Balance  bool // irqbalance running
}

// NIC is one network interface of a Synth host.
type NIC struct {
	Name    string
	Queues  int
	Node    int
	Managed bool
	Split   bool   // separate rx and tx IRQs per queue
	Kind    string // "vlan", "veth"
	Lower   string
	NoIRQs  bool
}

// Build makes a host.Host the way the readers would fill it.
func (s Synth) Build() *host.Host {
	h := &host.Host{Hostname: "synth"}
	all := cpuset.Range(0, s.CPUs-1)
	off := cpuset.Of(s.Offline...)
	iso := cpuset.Of(s.Isolated...)
	nodes := max(s.Nodes, 1)
	per := s.CPUs / nodes
	for n := range nodes {
		h.Topology.Nodes = append(h.Topology.Nodes, host.Node{ID: n, CPUs: cpuset.Range(n*per, (n+1)*per-1)})
	}
	for i := range s.CPUs {
		sib := cpuset.Of(i)
		core := i
		if s.SMT {
			half := s.CPUs / 2
			sib = cpuset.Of(i%half, i%half+half)
			core = i % half
		}
		h.CPUs = append(h.CPUs, host.CPU{ID: i, Online: !off.Contains(i), Core: core, Die: 0, Package: 0,
			Node: i / per, Siblings: sib, Isolated: iso.Contains(i)})
	}
	h.Topology.CPUs = h.CPUs
	h.Topology.Possible = all
	h.Topology.Online = all.Difference(off)
	h.Topology.Offline = off
	h.Topology.Isolated = iso
	h.Irqbalance.Running = s.Balance
	irq := 100
	h.IRQs = append(h.IRQs, host.IRQ{Number: 0, Actions: []string{"timer"}, Chip: "IO-APIC", Class: host.ClassTimer,
		Managed: host.ManagedNo, Affinity: &all})
	h.IRQs = append(h.IRQs, host.IRQ{Number: 9, Actions: []string{"acpi"}, Chip: "IO-APIC", Class: host.ClassOther,
		Managed: host.ManagedNo, Affinity: &all})
	for _, n := range s.NICs {
		nic := host.NIC{Name: n.Name, Driver: "ena", Node: n.Node, Kind: n.Kind, Lower: n.Lower,
			Virtual: n.Kind != "", LocalCPUs: h.Topology.Nodes[max(n.Node, 0)].CPUs}
		if n.Node < 0 {
			nic.LocalCPUs = cpuset.Set{}
		}
		for q := range n.Queues {
			z, fc := cpuset.Set{}, 0
			rq := host.RxQueue{Index: q, RPSCPUs: &z, RPSFlowCnt: &fc}
			tq := host.TxQueue{Index: q, XPSCPUs: &z}
			if !n.NoIRQs && n.Kind == "" {
				kinds := []string{"rxtx"}
				if n.Split {
					kinds = []string{"rx", "tx"}
				}
				for _, k := range kinds {
					m := host.ManagedNo
					if n.Managed {
						m = host.ManagedYes
					}
					a := all
					h.IRQs = append(h.IRQs, host.IRQ{Number: irq, Actions: []string{fmt.Sprintf("%s-%s-%d", n.Name, k, q)},
						Chip: "PCI-MSIX", Class: host.ClassNetwork, Managed: m, Device: n.Name, Queue: ptr(q),
						QueueKind: k, Affinity: &a})
					nic.IRQs = append(nic.IRQs, irq)
					if k != "tx" {
						rq.IRQ = ptr(irq)
					}
					if k != "rx" {
						tq.IRQ = ptr(irq)
					}
					irq++
				}
			}
			nic.RxQueues = append(nic.RxQueues, rq)
			nic.TxQueues = append(nic.TxQueues, tq)
		}
		h.NICs = append(h.NICs, nic)
	}
	fe := 0
	h.RPSSockFlowEntries = &fe
	return h
}

func ptr[T any](v T) *T { return &v }
