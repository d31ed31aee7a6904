package policy

import (
	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/host"
)

// The CPU choices the policies share: SMT siblings, physical cores, the
// CPUs local to a NIC, and the orders in which IRQ CPUs are picked.

// siblings returns c's SMT siblings including c.
func (b *builder) siblings(c int) cpuset.Set {
	if s, ok := b.sib[c]; ok {
		return s
	}
	return cpuset.Of(c)
}

// siblingsOf is the union of the siblings of every CPU in s.
func (b *builder) siblingsOf(s cpuset.Set) cpuset.Set {
	out := s
	for _, c := range s.CPUs() {
		out = out.Union(b.siblings(c))
	}
	return out
}

// cores counts distinct physical cores (SMT sibling groups) in s.
func (b *builder) cores(s cpuset.Set) int {
	seen := cpuset.Set{}
	n := 0
	for _, c := range s.CPUs() {
		if seen.Contains(c) {
			continue
		}
		n++
		seen = seen.Union(b.siblings(c))
	}
	return n
}

// nodeCPUs returns the usable CPUs NUMA-local to a NIC and whether they are
// local (false: the NIC's node is unknown or has no usable CPU, so every
// usable CPU is returned).
func (b *builder) nodeCPUs(nic *host.NIC) (cpuset.Set, bool) {
	node := nic.Node
	local := nic.LocalCPUs
	if node < 0 && local.IsEmpty() && nic.Lower != "" {
		if lower := b.h.NIC(nic.Lower); lower != nil {
			node, local = lower.Node, lower.LocalCPUs
		}
	}
	var s cpuset.Set
	if node >= 0 {
		for _, n := range b.h.Topology.Nodes {
			if n.ID == node {
				s = n.CPUs
			}
		}
		if s.IsEmpty() {
			var ids []int
			for _, c := range b.h.CPUs {
				if c.Node == node {
					ids = append(ids, c.ID)
				}
			}
			s = cpuset.Of(ids...)
		}
	}
	if s.IsEmpty() {
		s = local
	}
	s = s.Intersect(b.usable)
	// A single-node machine is local whatever the NIC reports.
	if s.IsEmpty() {
		return b.usable, len(b.h.Topology.Nodes) <= 1
	}
	return s, true
}

// usableNodes counts the NUMA nodes with a usable CPU.
func (b *builder) usableNodes() int {
	n := 0
	for _, nd := range b.h.Topology.Nodes {
		if !nd.CPUs.Intersect(b.usable).IsEmpty() {
			n++
		}
	}
	return n
}

// groupsAround splits P among the IRQ CPUs in irq: each gets itself, its
// SMT siblings in P that take no IRQ, and an equal contiguous share (in
// ascending order) of the remaining CPUs of P that take no IRQ.
func (b *builder) groupsAround(P, irq cpuset.Set) map[int]cpuset.Set {
	out := map[int]cpuset.Set{}
	owners := irq.CPUs()
	taken := irq
	for _, c := range owners {
		sib := b.siblings(c).Intersect(P).Difference(taken)
		out[c] = cpuset.Of(c).Union(sib)
		taken = taken.Union(sib)
	}
	rest := P.Difference(taken).CPUs()
	k := len(owners)
	for j, o := range owners {
		out[o] = out[o].Union(cpuset.Of(rest[j*len(rest)/k : (j+1)*len(rest)/k]...))
	}
	return out
}

// pickCPU chooses an IRQ CPU from block: the first CPU that is no SMT
// sibling of a CPU in used, else the first not in used, else the first.
func (b *builder) pickCPU(block []int, used cpuset.Set) int {
	avoid := b.siblingsOf(used)
	for _, c := range block {
		if !avoid.Contains(c) {
			return c
		}
	}
	for _, c := range block {
		if !used.Contains(c) {
			return c
		}
	}
	return block[0]
}

// coreOrder lists P for one-queue-per-core placement: one CPU of each
// physical core first, then the remaining SMT siblings; within each, CPUs
// not already used (by another NIC) before used ones.
func (b *builder) coreOrder(P, used cpuset.Set) []int {
	var first, second []int
	taken := cpuset.Set{}
	for _, c := range P.CPUs() {
		if taken.Intersect(b.siblings(c)).IsEmpty() {
			first = append(first, c)
			taken = taken.Add(c)
		} else {
			second = append(second, c)
		}
	}
	avoid := b.siblingsOf(used)
	var out []int
	for _, list := range [][]int{first, second} {
		var fresh, old []int
		for _, c := range list {
			if avoid.Contains(c) {
				old = append(old, c)
			} else {
				fresh = append(fresh, c)
			}
		}
		out = append(out, fresh...)
		out = append(out, old...)
	}
	return out
}
