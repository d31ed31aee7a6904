package host

import (
	"errors"
	"fmt"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/kernel"
)

// readNodes fills h.Topology.Nodes from nodeN/cpulist (or cpumap) and
// returns the CPU → node map. Nodes without CPUs are kept with an empty set.
func readNodes(fs *kernel.FS, h *Host) map[int]int {
	t := &h.Topology
	nodeOf := map[int]int{}
	ids, err := fs.NodeIDs()
	if err != nil {
		h.unavailable("numa nodes", "/"+nodeDir, relErr(fs, err))
		return nodeOf
	}
	for _, id := range ids {
		set, err := fs.NodeCPUs(id)
		if err != nil {
			h.unavailable(fmt.Sprintf("numa node %d cpus", id), fmt.Sprintf("/%s/node%d/cpulist", nodeDir, id), relErr(fs, err))
			set = cpuset.Set{}
		}
		t.Nodes = append(t.Nodes, Node{ID: id, CPUs: set})
		for _, c := range set.CPUs() {
			if _, dup := nodeOf[c]; !dup {
				nodeOf[c] = id
			}
		}
	}
	return nodeOf
}

// nodeFromCPUDir finds the nodeN link inside a CPU's directory (present
// for offline CPUs too, whose ids the nodes' cpulists leave out); -1 when
// there is none.
func nodeFromCPUDir(fs *kernel.FS, cpu int) int {
	if id, ok := fs.CPUNode(cpu); ok {
		return id
	}
	return -1
}

// readCPUTopology reads one CPU's topology and cache files. missing reports
// that the topology directory is absent (normal for offline CPUs); bad is
// the first garbled or unreadable id or cache file. Sibling and package-mask
// files are read from the first of the kernel's files that parses, and
// what could not be read of them goes to issues; the package mask, when one
// is readable, is stored in pkgMasks.
func readCPUTopology(fs *kernel.FS, c *CPU, issues *fileIssues, pkgMasks map[int]cpuset.Set) (missing bool, bad error) {
	topo, err := fs.CPUTopology(c.ID)
	if err != nil {
		missing = true
	} else {
		if topo.BadID != nil {
			bad = relErr(fs, topo.BadID)
		}
		c.Core, c.Die, c.Package = topo.Core, topo.Die, topo.Package

		sib := topo.Siblings
		for _, f := range sib.Fails {
			issues.add(siblingsWhat(sib.From), f.File, c.ID, relErr(fs, f.Err))
		}
		if sib.From == "" && len(sib.Fails) == 0 && c.Online {
			issues.add("cpu siblings", kernel.SiblingFiles, c.ID, errors.New("no sibling file, or all empty"))
		}
		c.Siblings = sib.CPUs

		pkg := topo.PackageCPUs
		for _, f := range pkg.Fails {
			issues.add(packageWhat(pkg.From), f.File, c.ID, relErr(fs, f.Err))
		}
		if pkg.From != "" {
			pkgMasks[c.ID] = pkg.CPUs
		}
	}
	l2, l3, err := fs.CPUCaches(c.ID)
	if err != nil && bad == nil {
		bad = err
	}
	c.L2, c.L3 = l2, l3
	return missing, bad
}

func siblingsWhat(from string) string {
	if from == "" {
		return "cpu siblings"
	}
	return "cpu siblings (read from " + from + " instead)"
}

func packageWhat(from string) string {
	if from == "" {
		return "cpu package mask"
	}
	return "cpu package mask (read from " + from + " instead)"
}

// fileIssues gathers, per topology file and outcome, the CPUs whose copy of
// the file could not be read, so that a host with hundreds of CPUs gets one
// Unavailable entry per file, not one per CPU.
type fileIssues struct {
	order []string
	byKey map[string]*fileIssue
}

type fileIssue struct {
	what, file string
	cpus       []int
	first      error
}

func (fi *fileIssues) add(what, file string, cpu int, err error) {
	key := what + "\x00" + file
	if fi.byKey == nil {
		fi.byKey = map[string]*fileIssue{}
	}
	is, ok := fi.byKey[key]
	if !ok {
		is = &fileIssue{what: what, file: file, first: err}
		fi.byKey[key] = is
		fi.order = append(fi.order, key)
	}
	is.cpus = append(is.cpus, cpu)
}

// report adds one Unavailable entry per file and outcome: the file's path
// when one CPU is concerned, else a cpu* pattern with the CPUs listed and
// the first CPU's error (which names its file).
func (fi *fileIssues) report(fs *kernel.FS, h *Host) {
	for _, key := range fi.order {
		is := fi.byKey[key]
		if len(is.cpus) == 1 {
			h.unavailable(is.what, fmt.Sprintf("/%s/cpu%d/topology/%s", cpuDir, is.cpus[0], is.file), is.first)
			continue
		}
		h.unavailable(is.what, "/"+cpuDir+"/cpu*/topology/"+is.file,
			fmt.Errorf("CPUs %s: %w", cpuset.Of(is.cpus...), is.first))
	}
}

// packagesFromMasks replaces the package ids by ids derived from the
// package masks when physical_package_id cannot tell packages apart: it is
// -1 on s390 and on POWER guests, and old ia64 kernels report one id for
// CPUs of different packages. Each distinct mask then gets its lowest CPU
// as id, stable across reads; a CPU without a readable mask gets -1. When
// the ids are usable they are kept as the kernel gave them.
func packagesFromMasks(h *Host, masks map[int]cpuset.Set, issues *fileIssues) {
	cpus := h.Topology.CPUs
	var unknown []int              // online CPUs with physical_package_id -1 and a mask
	maskOf := map[int]cpuset.Set{} // package id → the first mask seen for it
	var clash string
	for _, c := range cpus {
		m, ok := masks[c.ID]
		if !ok || !c.Online {
			continue
		}
		if c.Package < 0 {
			unknown = append(unknown, c.ID)
			continue
		}
		if prev, seen := maskOf[c.Package]; !seen {
			maskOf[c.Package] = m
		} else if !prev.Equal(m) && clash == "" {
			clash = fmt.Sprintf("package id %d is reported for CPUs of different packages (%s and %s)", c.Package, prev, m)
		}
	}
	if len(unknown) == 0 && clash == "" {
		return
	}
	var noMask []int
	for i := range cpus {
		c := &cpus[i]
		if m, ok := masks[c.ID]; ok {
			c.Package = m.Min()
			continue
		}
		if c.Online {
			noMask = append(noMask, c.ID)
		}
		c.Package = -1
	}
	reason := clash
	if reason == "" {
		reason = fmt.Sprintf("physical_package_id is -1 for CPUs %s", cpuset.Of(unknown...))
	}
	h.unavailable("cpu package ids (derived from package masks: lowest CPU of each)",
		"/"+cpuDir+"/cpu*/topology/physical_package_id", errors.New(reason))
	for _, id := range noMask {
		issues.add("cpu package", kernel.PackageFiles, id, errors.New("no readable package mask: package unknown"))
	}
}
