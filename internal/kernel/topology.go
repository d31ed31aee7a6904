package kernel

import (
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"

	"github.com/irqpilot/irqpilot/internal/cpuset"
)

// The NUMA nodes and the per-CPU topology and cache files of sysfs
// (Documentation/ABI/stable/sysfs-devices-node,
// Documentation/ABI/testing/sysfs-devices-system-cpu), read the way
// captures of many machines and kernels hold them: values padded with NUL
// bytes, files missing or empty, masks where lists are expected.

// NodeIDs lists the ids of the nodeN directories of NodeDir, ascending;
// other entries (possible, has_cpu, node01) are left out. A missing
// directory (a kernel without NUMA) is an error satisfying
// errors.Is(err, fs.ErrNotExist).
func (f *FS) NodeIDs() ([]int, error) {
	names, err := f.readDir(NodeDir)
	if err != nil {
		return nil, err
	}
	return NumberedEntries(names, "node"), nil
}

// NodeCPUs reads the CPUs of NUMA node: its cpulist, or where that cannot
// be read or parsed, its hex mask (cpumap). When neither gives a set, the
// error is the cpulist's. A node without CPUs reads as the empty set.
func (f *FS) NodeCPUs(node int) (cpuset.Set, error) {
	base := fmt.Sprintf("%s/node%d", NodeDir, node)
	set, err := f.readListFile(base + "/cpulist")
	if err == nil {
		return set, nil
	}
	if m, merr := f.readMaskFile(base + "/cpumap"); merr == nil {
		return m, nil
	}
	return cpuset.Set{}, err
}

// CPUNode finds the NUMA node of a CPU from the nodeN link in its directory
// (/sys/devices/system/cpu/cpuN/nodeM), which offline CPUs have too, unlike
// the nodes' cpulists. ok is false when the directory holds no such link or
// cannot be read.
func (f *FS) CPUNode(cpu int) (node int, ok bool) {
	names, err := f.readDir(cpuDirOf(cpu))
	if err != nil {
		return -1, false
	}
	for _, n := range names {
		if id, ok := NumberedEntry(n, "node"); ok {
			return id, true
		}
	}
	return -1, false
}

// cpuDirOf is the directory of CPU cpu, relative to the root.
func cpuDirOf(cpu int) string { return fmt.Sprintf("%s/cpu%d", CPUDir, cpu) }

// CPUTopology is what a CPU's topology directory
// (/sys/devices/system/cpu/cpuN/topology) says of it.
type CPUTopology struct {
	// Core, Die and Package are core_id, die_id and physical_package_id;
	// -1 where the file is missing or unreadable (die_id is missing before
	// Linux 5.4 and on most non-x86 machines).
	Core, Die, Package int
	// BadID is the first id file that exists but could not be read or
	// parsed (its error names it); nil when none.
	BadID error
	// Siblings are the CPU's SMT siblings (SiblingFiles); PackageCPUs the
	// CPUs of its package (PackageFiles).
	Siblings, PackageCPUs TopologySet
}

// TopologySet is a set of CPUs read from the first of several files of a
// topology directory, tried in order, that holds one.
type TopologySet struct {
	CPUs cpuset.Set
	// From names the file the set came from; "" when none held one.
	From string
	// Fails are the files tried before it (or all of them) that exist but
	// could not be read or parsed, in order. An empty file is not one: the
	// kernel never prints an empty set there (a CPU belongs to its own),
	// but captures hold files that were never read as empty placeholders.
	Fails []FileFailure
}

// FileFailure is a file that exists but could not be read or parsed.
type FileFailure struct {
	File string // the file's name in its directory
	Err  error  // names the file's path
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

// SiblingFiles and PackageFiles name, as one path element
// ("{thread_siblings_list,…}"), the files CPUTopology reads a CPU's SMT
// siblings and its package's CPUs from.
var (
	SiblingFiles = anyOf(siblingFiles)
	PackageFiles = anyOf(packageFiles)
)

// anyOf names the files as one path element: "{a,b,c}".
func anyOf(files []setFile) string {
	names := make([]string, len(files))
	for i, f := range files {
		names[i] = f.name
	}
	return "{" + strings.Join(names, ",") + "}"
}

// CPUTopologyDir is the topology directory of CPU cpu, relative to the
// root.
func CPUTopologyDir(cpu int) string { return cpuDirOf(cpu) + "/topology" }

// CPUTopology reads CPU cpu's topology directory. A directory that cannot
// be listed (missing for offline CPUs, and in captures that left it out) is
// the error of listing it, and nothing else is read.
func (f *FS) CPUTopology(cpu int) (CPUTopology, error) {
	t := CPUTopology{Core: -1, Die: -1, Package: -1}
	dir := CPUTopologyDir(cpu)
	if _, err := f.readDir(dir); err != nil {
		return t, err
	}
	readID := func(name string) int {
		n, err := f.readIntValue(dir + "/" + name)
		if err != nil {
			if t.BadID == nil && !errors.Is(err, fs.ErrNotExist) {
				t.BadID = err
			}
			return -1
		}
		return n
	}
	t.Core = readID("core_id")
	t.Die = readID("die_id")
	t.Package = readID("physical_package_id")
	t.Siblings = f.readFirstSet(dir, siblingFiles)
	t.PackageCPUs = f.readFirstSet(dir, packageFiles)
	return t, nil
}

// readFirstSet reads the first of files (in dir) that exists and holds a
// non-empty set (TopologySet).
func (f *FS) readFirstSet(dir string, files []setFile) TopologySet {
	var ts TopologySet
	for _, sf := range files {
		rel := dir + "/" + sf.name
		s, err := f.readString(rel)
		v := trimSysValue(s)
		if errors.Is(err, fs.ErrNotExist) || (err == nil && v == "") {
			continue
		}
		var set cpuset.Set
		if err == nil {
			set, err = parseTopologySet("/"+rel, v, sf.mask)
		}
		if err == nil {
			ts.CPUs, ts.From = set, sf.name
			return ts
		}
		ts.Fails = append(ts.Fails, FileFailure{sf.name, err})
	}
	return ts
}

// parseTopologySet parses a sibling or package set, a cpulist or (mask) a
// hex mask, already trimmed; name is used in errors. An empty set is an
// error: a CPU always belongs to its own.
func parseTopologySet(name, v string, mask bool) (cpuset.Set, error) {
	var set cpuset.Set
	var err error
	if mask {
		set, err = cpuset.ParseMask(v)
	} else {
		set, err = cpuset.Parse(v)
	}
	if err == nil && set.IsEmpty() {
		err = errors.New("no CPU set (a CPU always belongs to its own set)")
	}
	if err != nil {
		return cpuset.Set{}, fmt.Errorf("%s: %w", name, err)
	}
	return set, nil
}

// CPUCaches reads the CPUs sharing CPU cpu's level-2 and level-3 caches
// (/sys/devices/system/cpu/cpuN/cache/indexI: level, type, shared_cpu_list
// or, without it, shared_cpu_map); instruction caches are left out. A CPU
// without a cache directory has empty sets and no error (unknown); bad is
// the first cache file that could not be read or parsed (its error names
// it), the other caches still read.
func (f *FS) CPUCaches(cpu int) (l2, l3 cpuset.Set, bad error) {
	dir := cpuDirOf(cpu) + "/cache"
	names, err := f.readDir(dir)
	if err != nil {
		return l2, l3, nil
	}
	note := func(err error) {
		if bad == nil {
			bad = err
		}
	}
	for _, n := range names {
		if _, ok := NumberedEntry(n, "index"); !ok {
			continue
		}
		idx := dir + "/" + n
		level, err := f.readIntValue(idx + "/level")
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				note(err)
			}
			continue
		}
		if level != 2 && level != 3 {
			continue
		}
		if typ, err := f.readString(idx + "/type"); err == nil && trimSysValue(typ) == "Instruction" {
			continue
		}
		set, err := f.readListFile(idx + "/shared_cpu_list")
		if errors.Is(err, fs.ErrNotExist) {
			set, err = f.readMaskFile(idx + "/shared_cpu_map")
		}
		if err != nil {
			note(err)
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

// readListFile reads a sysfs cpulist file as CPUList does (NUL bytes and
// "(null)" tolerated); a list that does not parse is an error naming the
// file.
func (f *FS) readListFile(rel string) (cpuset.Set, error) {
	s, err := f.readString(rel)
	if err != nil {
		return cpuset.Set{}, err
	}
	return parseCPUListValue("/"+strings.TrimPrefix(rel, "/"), s)
}

// readMaskFile reads a sysfs hex mask file (cpumap, shared_cpu_map).
func (f *FS) readMaskFile(rel string) (cpuset.Set, error) {
	s, err := f.readString(rel)
	if err != nil {
		return cpuset.Set{}, err
	}
	return parseMaskValue("/"+strings.TrimPrefix(rel, "/"), s)
}

// parseMaskValue parses the value of a hex mask file, NUL bytes and white
// space around it ignored; name is used in errors.
func parseMaskValue(name, s string) (cpuset.Set, error) {
	set, err := cpuset.ParseMask(trimSysValue(s))
	if err != nil {
		return cpuset.Set{}, fmt.Errorf("%s: %w", name, err)
	}
	return set, nil
}

// readIntValue reads a sysfs file holding one decimal integer, NUL bytes
// and white space around it ignored.
func (f *FS) readIntValue(rel string) (int, error) {
	s, err := f.readString(rel)
	if err != nil {
		return 0, err
	}
	return parseIntValue("/"+strings.TrimPrefix(rel, "/"), s)
}

// parseIntValue parses a one-integer sysfs value; name is used in errors.
func parseIntValue(name, s string) (int, error) {
	v := trimSysValue(s)
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("%s: %q is not an integer", name, v)
	}
	return n, nil
}
