package host

import (
	"errors"
	"fmt"
	"strings"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/kernel"
)

// readNodes fills h.Topology.Nodes from nodeN/cpulist (or cpumap) and
// returns the CPU → node map. Nodes without CPUs are kept with an empty set.
func readNodes(fs *kernel.FS, h *Host) map[int]int {
	t := &h.Topology
	nodeOf := map[int]int{}
	names, err := fs.ReadDir(nodeDir)
	if err != nil {
		h.unavailable("numa nodes", "/"+nodeDir, relErr(fs, err))
		return nodeOf
	}
	for _, id := range kernel.NumberedEntries(names, "node") {
		base := fmt.Sprintf("%s/node%d", nodeDir, id)
		set, err := readSet(fs, base+"/cpulist")
		if err != nil {
			var merr error
			if set, merr = readMaskFile(fs, base+"/cpumap"); merr != nil {
				h.unavailable(fmt.Sprintf("numa node %d cpus", id), "/"+base+"/cpulist", relErr(fs, err))
				set = cpuset.Set{}
			}
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
// for offline CPUs too, whose ids the nodes' cpulists leave out).
func nodeFromCPUDir(fs *kernel.FS, base string) int {
	names, err := fs.ReadDir(base)
	if err != nil {
		return -1
	}
	for _, n := range names {
		if id, ok := kernel.NumberedEntry(n, "node"); ok {
			return id
		}
	}
	return -1
}

// readCPUTopology reads one CPU's topology and cache files. missing reports
// that the topology directory is absent (normal for offline CPUs); bad is
// the first garbled or unreadable id or cache file. Sibling and package-mask
// files are read from the first of the kernel's files that parses, and
// what could not be read of them goes to issues; the package mask, when one
// is readable, is stored in pkgMasks.
func readCPUTopology(fs *kernel.FS, base string, c *CPU, issues *fileIssues, pkgMasks map[int]cpuset.Set) (missing bool, bad error) {
	note := func(err error) {
		if err != nil && bad == nil {
			bad = err
		}
	}
	readID := func(name string) int {
		n, err := readInt(fs, base+"/topology/"+name)
		if err != nil {
			if !isNotExist(err) {
				note(relErr(fs, err))
			}
			return -1
		}
		return n
	}
	topo := base + "/topology"
	if _, err := fs.ReadDir(topo); err != nil {
		missing = true
	} else {
		c.Core = readID("core_id")
		c.Die = readID("die_id")
		c.Package = readID("physical_package_id")

		sib, from, fails := readFirstSet(fs, topo, siblingFiles)
		for _, f := range fails {
			issues.add(siblingsWhat(from), f.file, c.ID, relErr(fs, f.err))
		}
		if from == "" && len(fails) == 0 && c.Online {
			issues.add("cpu siblings", anyOf(siblingFiles), c.ID, errors.New("no sibling file, or all empty"))
		}
		c.Siblings = sib

		pkg, from, fails := readFirstSet(fs, topo, packageFiles)
		for _, f := range fails {
			issues.add(packageWhat(from), f.file, c.ID, relErr(fs, f.err))
		}
		if from != "" {
			pkgMasks[c.ID] = pkg
		}
	}
	l2, l3, err := readCaches(fs, base+"/cache")
	note(err)
	c.L2, c.L3 = l2, l3
	return missing, bad
}

// setFile is a per-CPU topology file holding a set of CPUs, as a cpulist or
// as a hex mask.
type setFile struct {
	name string
	mask bool
}

// siblingFiles are the files naming a CPU's SMT siblings, in the order they
// are tried: the cpulists first, then the masks; core_cpus* are the names
// since Linux 5.7, thread_siblings* the older ones (still provided).
var siblingFiles = []setFile{
	{"thread_siblings_list", false}, {"core_cpus_list", false},
	{"thread_siblings", true}, {"core_cpus", true},
}

// packageFiles name the CPUs of a CPU's package (package_cpus* since 5.7,
// core_siblings* before).
var packageFiles = []setFile{
	{"package_cpus_list", false}, {"core_siblings_list", false},
	{"package_cpus", true}, {"core_siblings", true},
}

// anyOf names the files as one path element: "{a,b,c}".
func anyOf(files []setFile) string {
	names := make([]string, len(files))
	for i, f := range files {
		names[i] = f.name
	}
	return "{" + strings.Join(names, ",") + "}"
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

// fileFailure is a file that exists but could not be read or parsed.
type fileFailure struct {
	file string
	err  error
}

// readFirstSet reads the first of files (in dir) that exists and holds a
// set. It returns the set, the name of the file it came from ("" when none
// did) and the files that exist but could not be read or parsed, in order.
// An empty file is skipped silently: the kernel never prints an empty
// sibling or package set (a CPU belongs to its own), but snapshots hold
// files that were not read as empty placeholders.
func readFirstSet(fs *kernel.FS, dir string, files []setFile) (cpuset.Set, string, []fileFailure) {
	var fails []fileFailure
	for _, f := range files {
		rel := dir + "/" + f.name
		v, err := readValue(fs, rel)
		if isNotExist(err) || (err == nil && v == "") {
			continue
		}
		var set cpuset.Set
		if err == nil {
			if f.mask {
				set, err = cpuset.ParseMask(v)
			} else {
				set, err = cpuset.Parse(v)
			}
			if err == nil && set.IsEmpty() {
				err = errors.New("no CPU set (a CPU always belongs to its own set)")
			}
			if err != nil {
				err = fmt.Errorf("/%s: %w", strings.TrimPrefix(rel, "/"), err)
			}
		}
		if err == nil {
			return set, f.name, fails
		}
		fails = append(fails, fileFailure{f.name, err})
	}
	return cpuset.Set{}, "", fails
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
		issues.add("cpu package", anyOf(packageFiles), id, errors.New("no readable package mask: package unknown"))
	}
}

// readCaches returns the CPUs sharing the CPU's level-2 and level-3 data or
// unified caches (instruction caches are ignored).
func readCaches(fs *kernel.FS, dir string) (l2, l3 cpuset.Set, bad error) {
	names, err := fs.ReadDir(dir)
	if err != nil {
		return l2, l3, nil // no cache directory: unknown, not an error
	}
	for _, n := range names {
		if _, ok := kernel.NumberedEntry(n, "index"); !ok {
			continue
		}
		idx := dir + "/" + n
		level, err := readInt(fs, idx+"/level")
		if err != nil {
			if bad == nil && !isNotExist(err) {
				bad = err
			}
			continue
		}
		if level != 2 && level != 3 {
			continue
		}
		if typ, err := readValue(fs, idx+"/type"); err == nil && typ == "Instruction" {
			continue
		}
		set, err := readSet(fs, idx+"/shared_cpu_list")
		if isNotExist(err) {
			set, err = readMaskFile(fs, idx+"/shared_cpu_map")
		}
		if err != nil {
			if bad == nil {
				bad = err
			}
			continue
		}
		if level == 2 {
			l2 = l2.Union(set)
		} else {
			l3 = l3.Union(set)
		}
	}
	return l2, l3, bad
}
