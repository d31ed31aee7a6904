package host

import (
	"fmt"
	"maps"
	"strings"
	"testing"
)

// quirkTree is a 4-CPU host (2 packages × 2 SMT threads, one core each) in
// the files every case shares; cases add or override the per-CPU topology
// files. isolated, nohz_full and /proc/cmdline are present so that a clean
// read reports nothing unavailable.
func quirkTree(extra map[string]string) map[string]string {
	files := map[string]string{
		cpuDir + "/online":         "0-3\n",
		cpuDir + "/possible":       "0-3\n",
		cpuDir + "/present":        "0-3\n",
		cpuDir + "/offline":        "\n",
		cpuDir + "/isolated":       "\n",
		cpuDir + "/nohz_full":      "(null)\n",
		nodeDir + "/node0/cpulist": "0-3\n",
		"proc/cmdline":             "ro quiet\n",
	}
	for id := 0; id < 4; id++ {
		files[topoFile(id, "core_id")] = "0\n"
	}
	maps.Copy(files, extra)
	for p, c := range files {
		if c == "<absent>" {
			delete(files, p)
		}
	}
	return files
}

func topoFile(cpu int, name string) string {
	return fmt.Sprintf("%s/cpu%d/topology/%s", cpuDir, cpu, name)
}

// perCPU sets one topology file of each CPU (values by CPU id).
func perCPU(name string, values ...string) map[string]string {
	m := map[string]string{}
	for id, v := range values {
		m[topoFile(id, name)] = v
	}
	return m
}

func merge(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		maps.Copy(out, m)
	}
	return out
}

// quirkUnavail is an Unavailable entry expected by TestTopologyQuirks: What
// and Path exactly, Reason by substring.
type quirkUnavail struct{ what, path, reason string }

func TestTopologyQuirks(t *testing.T) {
	pair := perCPU("thread_siblings_list", "0-1\n", "0-1\n", "2-3\n", "2-3\n")
	tests := []struct {
		name     string
		files    map[string]string
		packages []int    // by CPU id
		siblings []string // by CPU id
		unavail  []quirkUnavail
	}{
		{
			// s390 and POWER guests: physical_package_id is -1, the
			// package masks tell the packages apart. Mask files only
			// (package_cpus), as hex.
			name: "package id -1 with package_cpus masks",
			files: merge(pair,
				perCPU("physical_package_id", "-1\n", "-1\n", "-1\n", "-1\n"),
				perCPU("package_cpus", "00000000,00000003\n", "00000000,00000003\n", "00000000,0000000c\n", "00000000,0000000c\n")),
			packages: []int{0, 0, 2, 2},
			siblings: []string{"0-1", "0-1", "2-3", "2-3"},
			unavail: []quirkUnavail{{"cpu package ids (derived from package masks: lowest CPU of each)",
				"/" + cpuDir + "/cpu*/topology/physical_package_id", "physical_package_id is -1 for CPUs 0-3"}},
		},
		{
			name: "package id -1 with package_cpus_list",
			files: merge(pair,
				perCPU("physical_package_id", "-1\n", "-1\n", "-1\n", "-1\n"),
				perCPU("package_cpus_list", "0-1\n", "0-1\n", "2-3\n", "2-3\n")),
			packages: []int{0, 0, 2, 2},
			siblings: []string{"0-1", "0-1", "2-3", "2-3"},
			unavail:  []quirkUnavail{{what: "cpu package ids (derived from package masks: lowest CPU of each)"}},
		},
		{
			// Old ia64 kernels: one id for CPUs whose package masks differ
			// (pre-5.7 names: core_siblings_list).
			name: "duplicate package id with different masks",
			files: merge(pair,
				perCPU("physical_package_id", "0\n", "0\n", "0\n", "0\n"),
				perCPU("core_siblings_list", "0-1\n", "0-1\n", "2-3\n", "2-3\n")),
			packages: []int{0, 0, 2, 2},
			siblings: []string{"0-1", "0-1", "2-3", "2-3"},
			unavail: []quirkUnavail{{"cpu package ids (derived from package masks: lowest CPU of each)",
				"/" + cpuDir + "/cpu*/topology/physical_package_id", "package id 0 is reported for CPUs of different packages (0-1 and 2-3)"}},
		},
		{
			// One CPU of a renumbered host without a readable mask: its
			// reported id cannot be trusted, so it is unknown.
			name: "duplicate package id, one CPU without mask",
			files: merge(pair,
				perCPU("physical_package_id", "7\n", "7\n", "7\n", "7\n"),
				perCPU("package_cpus_list", "0-1\n", "0-1\n", "2-3\n", "<absent>")),
			packages: []int{0, 0, 2, -1},
			siblings: []string{"0-1", "0-1", "2-3", "2-3"},
			unavail: []quirkUnavail{
				{what: "cpu package ids (derived from package masks: lowest CPU of each)"},
				{"cpu package", "/" + cpuDir + "/cpu3/topology/{package_cpus_list,core_siblings_list,package_cpus,core_siblings}", "no readable package mask"}},
		},
		{
			// Ids that agree with the masks are kept as the kernel gave them
			// (the Xeon L5640 capture numbers its packages 1, 0).
			name: "consistent package ids kept",
			files: merge(pair,
				perCPU("physical_package_id", "1\n", "1\n", "0\n", "0\n"),
				perCPU("package_cpus_list", "0-1\n", "0-1\n", "2-3\n", "2-3\n")),
			packages: []int{1, 1, 0, 0},
			siblings: []string{"0-1", "0-1", "2-3", "2-3"},
		},
		{
			// 128-CPU aarch64 hosts on 5.15 print "0\n\0".
			name: "values with trailing NUL",
			files: merge(
				map[string]string{
					cpuDir + "/online":                            "0-3\n\x00",
					cpuDir + "/cpu0/cache/index2/level":           "2\n\x00",
					cpuDir + "/cpu0/cache/index2/type":            "Unified\n\x00",
					cpuDir + "/cpu0/cache/index2/shared_cpu_list": "0-1\n\x00",
					nodeDir + "/node0/cpulist":                    "0-3\n\x00",
				},
				perCPU("core_id", "0\n\x00", "0\n\x00", "1\n\x00", "1\n\x00"),
				perCPU("physical_package_id", "0\n\x00", "0\n\x00", "0\n\x00", "0\n\x00"),
				perCPU("thread_siblings_list", "0-1\n\x00", "0-1\n\x00", "2-3\x00\x00", "2-3\n\x00"),
				perCPU("package_cpus_list", "0-3\n\x00", "0-3\n\x00", "0-3\n\x00", "0-3\n\x00")),
			packages: []int{0, 0, 0, 0},
			siblings: []string{"0-1", "0-1", "2-3", "2-3"},
		},
		{
			name: "garbled thread_siblings_list falls back to core_cpus_list",
			files: merge(pair,
				perCPU("physical_package_id", "0\n", "0\n", "1\n", "1\n"),
				map[string]string{
					topoFile(1, "thread_siblings_list"): "0-\n",
					topoFile(1, "core_cpus_list"):       "0-1\n",
				}),
			packages: []int{0, 0, 1, 1},
			siblings: []string{"0-1", "0-1", "2-3", "2-3"},
			unavail: []quirkUnavail{{"cpu siblings (read from core_cpus_list instead)",
				"/" + cpuDir + "/cpu1/topology/thread_siblings_list", "/" + cpuDir + "/cpu1/topology/thread_siblings_list: cpulist \"0-\""}},
		},
		{
			// Every CPU garbled: one entry for all, naming the first file.
			name: "garbled lists on every CPU fall back to masks",
			files: merge(
				perCPU("physical_package_id", "0\n", "0\n", "1\n", "1\n"),
				perCPU("thread_siblings_list", "x\n", "x\n", "x\n", "x\n"),
				perCPU("thread_siblings", "3\n", "3\n", "c\n", "c\n")),
			packages: []int{0, 0, 1, 1},
			siblings: []string{"0-1", "0-1", "2-3", "2-3"},
			unavail: []quirkUnavail{{"cpu siblings (read from thread_siblings instead)",
				"/" + cpuDir + "/cpu*/topology/thread_siblings_list", "CPUs 0-3: /" + cpuDir + "/cpu0/topology/thread_siblings_list"}},
		},
		{
			name: "only thread_siblings masks",
			files: merge(
				perCPU("physical_package_id", "0\n", "0\n", "1\n", "1\n"),
				perCPU("thread_siblings", "3\n", "3\n", "0000000c\n", "0000000c\n"),
				perCPU("core_siblings", "3\n", "3\n", "c\n", "c\n")),
			packages: []int{0, 0, 1, 1},
			siblings: []string{"0-1", "0-1", "2-3", "2-3"},
		},
		{
			name: "only core_cpus masks",
			files: merge(
				perCPU("physical_package_id", "-1\n", "-1\n", "-1\n", "-1\n"),
				perCPU("core_cpus", "3\n", "3\n", "c\n", "c\n"),
				perCPU("package_cpus", "f\n", "f\n", "f\n", "f\n")),
			packages: []int{0, 0, 0, 0},
			siblings: []string{"0-1", "0-1", "2-3", "2-3"},
			unavail:  []quirkUnavail{{what: "cpu package ids (derived from package masks: lowest CPU of each)"}},
		},
		{
			// Nothing readable: siblings unknown, every failed file named.
			name: "all sibling files garbled",
			files: merge(pair,
				perCPU("physical_package_id", "0\n", "0\n", "0\n", "0\n"),
				map[string]string{
					topoFile(2, "thread_siblings_list"): "2-3-4\n",
					topoFile(2, "core_cpus_list"):       "?\n",
					topoFile(2, "thread_siblings"):      "xyz\n",
					topoFile(2, "core_cpus"):            "00000000\n",
				}),
			packages: []int{0, 0, 0, 0},
			siblings: []string{"0-1", "0-1", "", "2-3"},
			unavail: []quirkUnavail{
				{"cpu siblings", "/" + cpuDir + "/cpu2/topology/thread_siblings_list", "cpu2/topology/thread_siblings_list"},
				{"cpu siblings", "/" + cpuDir + "/cpu2/topology/core_cpus_list", "cpu2/topology/core_cpus_list"},
				{"cpu siblings", "/" + cpuDir + "/cpu2/topology/thread_siblings", "cpu2/topology/thread_siblings"},
				{"cpu siblings", "/" + cpuDir + "/cpu2/topology/core_cpus", "no CPU set"},
			},
		},
		{
			// Snapshots hold unread files as empty placeholders: skipped
			// without a report while a later file has the set.
			name: "empty placeholders skipped",
			files: merge(
				perCPU("physical_package_id", "0\n", "0\n", "1\n", "1\n"),
				perCPU("thread_siblings_list", "", "", "", ""),
				perCPU("core_cpus_list", "0-1\n", "0-1\n", "2-3\n", "2-3\n"),
				perCPU("package_cpus_list", "", "", "", "")),
			packages: []int{0, 0, 1, 1},
			siblings: []string{"0-1", "0-1", "2-3", "2-3"},
		},
		{
			name:     "no sibling file",
			files:    perCPU("physical_package_id", "0\n", "0\n", "1\n", "1\n"),
			packages: []int{0, 0, 1, 1},
			siblings: []string{"", "", "", ""},
			unavail: []quirkUnavail{{"cpu siblings",
				"/" + cpuDir + "/cpu*/topology/{thread_siblings_list,core_cpus_list,thread_siblings,core_cpus}", "CPUs 0-3: no sibling file"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := &Host{}
			readTopology(topoTree(t, quirkTree(tc.files)), h)
			tp := h.Topology
			if len(tp.CPUs) != 4 {
				t.Fatalf("%d CPUs, want 4", len(tp.CPUs))
			}
			topoSet(t, "online", tp.Online, "0-3")
			for i, c := range tp.CPUs {
				if c.Package != tc.packages[i] || c.Siblings.String() != tc.siblings[i] || c.Node != 0 {
					t.Errorf("cpu %d: package %d siblings %q node %d, want package %d siblings %q node 0",
						c.ID, c.Package, c.Siblings, c.Node, tc.packages[i], tc.siblings[i])
				}
			}
			if len(h.Unavailable) != len(tc.unavail) {
				t.Errorf("%d unavailable entries, want %d:\n%s", len(h.Unavailable), len(tc.unavail), dumpUnavailable(h))
			}
			for _, w := range tc.unavail {
				found := false
				for _, u := range h.Unavailable {
					if u.What == w.what && (w.path == "" || u.Path == w.path) && strings.Contains(u.Reason, w.reason) {
						found = true
					}
				}
				if !found {
					t.Errorf("no unavailable %+v in:\n%s", w, dumpUnavailable(h))
				}
			}
		})
	}
}

// The NUL-terminated values of TestTopologyQuirks also reach the cache
// sets and the core ids.
func TestTopologyTrailingNUL(t *testing.T) {
	h := &Host{}
	readTopology(topoTree(t, quirkTree(merge(
		map[string]string{
			cpuDir + "/cpu0/cache/index2/level":           "2\n\x00",
			cpuDir + "/cpu0/cache/index2/type":            "Unified\n\x00",
			cpuDir + "/cpu0/cache/index2/shared_cpu_list": "0-1\n\x00",
			cpuDir + "/cpu0/cache/index3/level":           "3\x00",
			cpuDir + "/cpu0/cache/index3/shared_cpu_map":  "f\n\x00\x00",
		},
		perCPU("core_id", "5\n\x00", "5\n\x00", "9\n\x00", "9\n\x00"),
		perCPU("die_id", "0\n\x00", "0\n\x00", "0\n\x00", "0\n\x00"),
		perCPU("thread_siblings_list", "0-1\n\x00", "0-1\n\x00", "2-3\n\x00", "2-3\n\x00"),
	))), h)
	if len(h.Unavailable) > 0 {
		t.Errorf("unavailable:\n%s", dumpUnavailable(h))
	}
	c0, c3 := h.Topology.CPUs[0], h.Topology.CPUs[3]
	if c0.Core != 5 || c0.Die != 0 || c0.L2.String() != "0-1" || c0.L3.String() != "0-3" || c3.Core != 9 {
		t.Errorf("cpu0 = %+v, cpu3 = %+v; want core 5 die 0 l2 0-1 l3 0-3, core 9", c0, c3)
	}
}

func dumpUnavailable(h *Host) string {
	var b strings.Builder
	for _, u := range h.Unavailable {
		fmt.Fprintf(&b, "  %s | %s | %s\n", u.What, u.Path, u.Reason)
	}
	return b.String()
}
