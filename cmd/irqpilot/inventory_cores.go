// The CPUs section of the text inventory: node → package → core → threads.

package main

import (
	"fmt"
	"sort"
	"strconv"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/host"
)

// coreGroup is one core of the text inventory: the online threads that
// share an SMT sibling mask, within a node and package.
type coreGroup struct {
	node, pkg int
	core      int   // core_id of its first thread, a label only (-1 unknown)
	threads   []int // ascending
}

// groupCores groups the online CPUs into cores, ordered by node, package
// and first thread. Threads belong to one core when they report the same
// sibling mask: core_id is not unique within a package on some platforms,
// so it only labels the group. CPUs whose siblings are unknown are grouped
// by core_id, and CPUs with neither stand alone.
func groupCores(cpus []host.CPU) []coreGroup {
	type key struct {
		node, pkg int
		siblings  string // the sibling mask, "" when unknown
		core      int    // core_id when siblings are unknown; -1-cpu when that is unknown too
	}
	var groups []coreGroup
	index := map[key]int{}
	for _, c := range cpus {
		if !c.Online {
			continue
		}
		k := key{node: c.Node, pkg: c.Package, siblings: c.Siblings.String()}
		if k.siblings == "" {
			k.core = c.Core
			if c.Core < 0 {
				k.core = -1 - c.ID // unknown core: one entry per CPU
			}
		}
		i, ok := index[k]
		if !ok {
			i = len(groups)
			index[k] = i
			groups = append(groups, coreGroup{node: c.Node, pkg: c.Package, core: c.Core})
		}
		groups[i].threads = append(groups[i].threads, c.ID)
	}
	for i := range groups {
		sort.Ints(groups[i].threads)
	}
	sort.SliceStable(groups, func(i, j int) bool {
		a, b := groups[i], groups[j]
		if a.node != b.node {
			return a.node < b.node
		}
		if a.pkg != b.pkg {
			return a.pkg < b.pkg
		}
		return a.threads[0] < b.threads[0]
	})
	return groups
}

func (t *inventoryText) writeCPUs() {
	w, h := t.w, t.h
	topo := h.Topology
	var online, offline cpuset.Set
	for _, c := range h.CPUs {
		if c.Online {
			online = online.Add(c.ID)
		} else {
			offline = offline.Add(c.ID)
		}
	}
	if !topo.Online.IsEmpty() {
		online = topo.Online
	}
	if !topo.Offline.IsEmpty() {
		offline = topo.Offline
	}
	if len(h.CPUs) == 0 {
		fmt.Fprintf(w, "CPUs: topology unknown")
		if ids := irqCPUs(h); !ids.IsEmpty() {
			fmt.Fprintf(w, "; /proc/interrupts has columns for CPUs %s", ids)
		}
		fmt.Fprint(w, "\n\n")
		return
	}
	fmt.Fprintf(w, "CPUs: %d online (%s), offline %s, isolated %s, nohz_full %s",
		online.Len(), t.setStr(online), t.setStr(offline), t.setStr(topo.Isolated), t.setStr(topo.NohzFull))
	if !topo.ManagedIRQIsolated.IsEmpty() {
		fmt.Fprintf(w, ", managed_irq isolated %s", topo.ManagedIRQIsolated)
	}
	fmt.Fprintln(w)

	// node → package → core → threads
	cores := groupCores(h.CPUs)
	nodes := map[int]bool{}
	for _, g := range cores {
		nodes[g.node] = true
	}
	nodeCPUs := map[int]cpuset.Set{}
	for _, n := range topo.Nodes {
		nodes[n.ID] = true
		nodeCPUs[n.ID] = n.CPUs
	}
	nodeIDs := make([]int, 0, len(nodes))
	for n := range nodes {
		nodeIDs = append(nodeIDs, n)
	}
	sort.Ints(nodeIDs)
	for _, n := range nodeIDs {
		var cpus cpuset.Set
		var pkgs []int
		perPkg := map[int][]string{}
		perPkgThreads := map[int]int{}
		for _, g := range cores {
			if g.node != n {
				continue
			}
			ids := g.threads
			cpus = cpus.Add(ids...)
			if _, ok := perPkg[g.pkg]; !ok {
				pkgs = append(pkgs, g.pkg)
			}
			label := "core ?"
			if g.core >= 0 {
				label = "core " + strconv.Itoa(g.core)
			}
			perPkg[g.pkg] = append(perPkg[g.pkg], label+": "+cpuset.Of(ids...).String())
			perPkgThreads[g.pkg] += len(ids)
		}
		if nc, ok := nodeCPUs[n]; ok && cpus.IsEmpty() {
			cpus = nc
		}
		nodeName := "node " + strconv.Itoa(n)
		if n < 0 {
			nodeName = "node ? (no NUMA information)"
		}
		fmt.Fprintf(w, "  %s  cpus %s\n", nodeName, t.setStrNamed(cpus, false))
		for _, p := range pkgs {
			pkgName := "package " + strconv.Itoa(p)
			if p < 0 {
				pkgName = "package ?"
			}
			fmt.Fprintf(w, "    %s  %d cores, %d threads\n", pkgName, len(perPkg[p]), perPkgThreads[p])
			wrap(w, "      ", perPkg[p])
		}
	}
	fmt.Fprintln(w)
}

// irqCPUs is the set of CPU ids that appear in the IRQ counts.
func irqCPUs(h *host.Host) cpuset.Set {
	var ids []int
	seen := map[int]bool{}
	for _, q := range h.IRQs {
		for c := range q.Counts {
			if !seen[c] {
				seen[c] = true
				ids = append(ids, c)
			}
		}
	}
	return cpuset.Of(ids...)
}
