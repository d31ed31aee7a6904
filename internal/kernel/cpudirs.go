package kernel

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"github.com/irqpilot/irqpilot/internal/cpuset"
)

// NodeDir is the directory of the NUMA nodes' sysfs files, relative to the
// root.
const NodeDir = "sys/devices/system/node"

// StatPath is /proc/stat, relative to the root (StatCPUs reads it).
const StatPath = "proc/stat"

// CPUListFile names a cpulist file of CPUDir (CPUList reads one).
type CPUListFile string

// The cpulist files of CPUDir (Documentation/ABI/testing/sysfs-devices-system-cpu).
const (
	CPUsOnline   CPUListFile = "online"    // CPUs online now
	CPUsOffline  CPUListFile = "offline"   // possible CPUs not online, empty when none
	CPUsPossible CPUListFile = "possible"  // CPUs that could ever be online (cpu_possible_mask)
	CPUsPresent  CPUListFile = "present"   // CPUs physically present
	CPUsIsolated CPUListFile = "isolated"  // isolcpus= CPUs, empty when none
	CPUsNohzFull CPUListFile = "nohz_full" // nohz_full= CPUs, "(null)" when unset
)

// Path is the file's path relative to the root
// ("sys/devices/system/cpu/online").
func (c CPUListFile) Path() string { return CPUDir + "/" + string(c) }

// CPUList reads a cpulist file of /sys/devices/system/cpu as the topology
// reads it, tolerating what captures and kernels put around the list: NUL
// bytes after it (the sysfs files of 128-CPU aarch64 hosts on 5.15 read
// "0-3\n\x00"), and "(null)", which the kernel prints for an unset mask
// (nohz_full) and which is the empty set. An empty file is the empty set.
// A missing file is an error satisfying errors.Is(err, fs.ErrNotExist); a
// list that does not parse is an error naming the file.
//
// OnlineCPUs and PossibleCPUs read the same files strictly.
func (f *FS) CPUList(file CPUListFile) (cpuset.Set, error) {
	p := file.Path()
	s, err := f.readString(p)
	if err != nil {
		return cpuset.Set{}, err
	}
	return parseCPUListValue("/"+p, s)
}

// parseCPUListValue parses the value of a cpulist file (CPUList); name is
// used in errors.
func parseCPUListValue(name, s string) (cpuset.Set, error) {
	s = trimSysValue(s)
	if s == "(null)" {
		return cpuset.Set{}, nil
	}
	set, err := cpuset.Parse(s)
	if err != nil {
		return cpuset.Set{}, fmt.Errorf("%s: %w", name, err)
	}
	return set, nil
}

// trimSysValue trims what surrounds a sysfs value: white space and NUL
// bytes.
func trimSysValue(s string) string {
	return strings.TrimFunc(s, func(r rune) bool { return r == 0 || unicode.IsSpace(r) })
}

// CPUDirs lists the ids of the cpuN directories of /sys/devices/system/cpu,
// ascending: every possible CPU has one, offline CPUs included. Entries that
// are not "cpu" and a canonical decimal id of at most cpuset.MaxCPU
// (cpufreq, cpuidle, cpu01) are left out. A missing directory is an error
// satisfying errors.Is(err, fs.ErrNotExist); a directory without cpuN
// entries gives none and no error.
func (f *FS) CPUDirs() ([]int, error) {
	names, err := f.readDir(CPUDir)
	if err != nil {
		return nil, err
	}
	return NumberedEntries(names, "cpu"), nil
}

// NumberedEntries are the ids of the names that are prefix followed by a
// canonical decimal id (NumberedEntry), ascending; nil when none is.
func NumberedEntries(names []string, prefix string) []int {
	var ids []int
	for _, n := range names {
		if id, ok := NumberedEntry(n, prefix); ok {
			ids = append(ids, id)
		}
	}
	sort.Ints(ids)
	return ids
}

// NumberedEntry parses a directory name such as "cpu12" or "node3": the
// prefix, then a decimal id without sign or leading zeros, at most
// cpuset.MaxCPU.
func NumberedEntry(name, prefix string) (int, bool) {
	rest, ok := strings.CutPrefix(name, prefix)
	if !ok || rest == "" {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	if err != nil || n < 0 || n > cpuset.MaxCPU || strconv.Itoa(n) != rest {
		return 0, false
	}
	return n, true
}

// CPUOnline reads /sys/devices/system/cpu/cpuN/online: whether CPU cpu is
// online ("1") or offline ("0"). CPUs that cannot be unplugged (usually
// cpu0) have no such file: an error satisfying errors.Is(err,
// fs.ErrNotExist). Any other value is an error naming the file.
func (f *FS) CPUOnline(cpu int) (bool, error) {
	p := fmt.Sprintf("%s/cpu%d/online", CPUDir, cpu)
	s, err := f.readString(p)
	if err != nil {
		return false, err
	}
	return parseCPUOnline("/"+p, s)
}

// parseCPUOnline parses a cpuN/online file ("0" or "1", white space and NUL
// bytes around it ignored); name is used in errors.
func parseCPUOnline(name, s string) (bool, error) {
	switch v := trimSysValue(s); v {
	case "0":
		return false, nil
	case "1":
		return true, nil
	default:
		return false, fmt.Errorf("%s: %q is not 0 or 1", name, v)
	}
}
