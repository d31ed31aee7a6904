package plan

import (
	"fmt"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/host"
)

// synth describes a small synthetic host for policy tests.
type synth struct {
	cpus     int
	nodes    int  // NUMA nodes, CPUs split in contiguous halves (interleave false)
	smt      bool // CPU i and i+cpus/2 are siblings
	offline  []int
	isolated []int
	nics     []synthNIC
	balance  bool // irqbalance running
}

type synthNIC struct {
	name    string
	queues  int
	node    int
	managed bool
	split   bool   // separate rx and tx IRQs per queue
	kind    string // "vlan", "veth"
	lower   string
	noIRQs  bool
}

// build makes a host.Host the way the readers would fill it.
func (s synth) build() *host.Host {
	h := &host.Host{Hostname: "synth"}
	all := cpuset.Range(0, s.cpus-1)
	off := cpuset.Of(s.offline...)
	iso := cpuset.Of(s.isolated...)
	nodes := max(s.nodes, 1)
	per := s.cpus / nodes
	for n := range nodes {
		h.Topology.Nodes = append(h.Topology.Nodes, host.Node{ID: n, CPUs: cpuset.Range(n*per, (n+1)*per-1)})
	}
	for i := range s.cpus {
		sib := cpuset.Of(i)
		core := i
		if s.smt {
			half := s.cpus / 2
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
	h.Irqbalance.Running = s.balance
	irq := 100
	h.IRQs = append(h.IRQs, host.IRQ{Number: 0, Actions: []string{"timer"}, Chip: "IO-APIC", Class: host.ClassTimer,
		Managed: host.ManagedNo, Affinity: &all})
	h.IRQs = append(h.IRQs, host.IRQ{Number: 9, Actions: []string{"acpi"}, Chip: "IO-APIC", Class: host.ClassOther,
		Managed: host.ManagedNo, Affinity: &all})
	for _, n := range s.nics {
		nic := host.NIC{Name: n.name, Driver: "ena", Node: n.node, Kind: n.kind, Lower: n.lower,
			Virtual: n.kind != "", LocalCPUs: h.Topology.Nodes[max(n.node, 0)].CPUs}
		if n.node < 0 {
			nic.LocalCPUs = cpuset.Set{}
		}
		for q := range n.queues {
			z, fc := cpuset.Set{}, 0
			rq := host.RxQueue{Index: q, RPSCPUs: &z, RPSFlowCnt: &fc}
			tq := host.TxQueue{Index: q, XPSCPUs: &z}
			if !n.noIRQs && n.kind == "" {
				kinds := []string{"rxtx"}
				if n.split {
					kinds = []string{"rx", "tx"}
				}
				for _, k := range kinds {
					m := host.ManagedNo
					if n.managed {
						m = host.ManagedYes
					}
					a := all
					h.IRQs = append(h.IRQs, host.IRQ{Number: irq, Actions: []string{fmt.Sprintf("%s-%s-%d", n.name, k, q)},
						Chip: "PCI-MSIX", Class: host.ClassNetwork, Managed: m, Device: n.name, Queue: ptr(q),
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
