package host

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/hostgen"
	"github.com/irqpilot/irqpilot/internal/kernel"
)

const topoFixtures = "../../../shared/fixtures"

// Unpacking the snapshot fixtures creates tens of thousands of small files:
// about a minute on a loaded VM disk, two seconds on tmpfs. So this package's
// tests keep temporary directories on /dev/shm unless TMPDIR is set.
func init() {
	if os.Getenv("TMPDIR") != "" {
		return
	}
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		if f, err := os.CreateTemp("/dev/shm", "probe-"); err == nil {
			f.Close()
			os.Remove(f.Name())
			os.Setenv("TMPDIR", "/dev/shm")
		}
	}
}

// openTopoFixture opens a fixture directory or snapshot archive.
func openTopoFixture(t *testing.T, rel string) *kernel.FS {
	t.Helper()
	p := filepath.Join(topoFixtures, rel)
	st, err := os.Stat(p)
	if err != nil {
		t.Fatalf("fixture %s: %v", rel, err)
	}
	if st.IsDir() {
		return kernel.New(p)
	}
	fs, cleanup, err := kernel.OpenSnapshot(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cleanup)
	return fs
}

// cpuWant is what a fixture's files say about one CPU (looked up by hand in
// the unpacked fixture).
type cpuWant struct {
	id, core, die, pkg, node int
	online                   bool
	siblings, l2, l3         string
}

func TestTopologyFixtures(t *testing.T) {
	evens56 := "0,2,4,6,8,10,12,14,16,18,20,22,24,26,28,30,32,34,36,38,40,42,44,46,48,50,52,54,56,58,60,62,64,66,68,70,72,74,76,78,80,82,84,86,88,90,92,94,96,98,100,102,104,106,108,110"
	odds56 := "1,3,5,7,9,11,13,15,17,19,21,23,25,27,29,31,33,35,37,39,41,43,45,47,49,51,53,55,57,59,61,63,65,67,69,71,73,75,77,79,81,83,85,87,89,91,93,95,97,99,101,103,105,107,109,111"
	odds40 := "1,3,5,7,9,11,13,15,17,19,21,23,25,27,29,31,33,35,37,39,41,43,45,47,49,51,53,55,57,59,61,63,65,67,69,71,73,75,77,79"
	tests := []struct {
		name                       string
		path                       string
		ncpu                       int
		online, offline            string
		isolated, nohz, managedIRQ string
		nodes                      map[int]string // node id → cpulist
		cpus                       []cpuWant
		unavailable                string // substring of some Unavailable.What ("" = none required)
		noUnavailable              bool
	}{
		{name: "ghw xeon L5640 2 nodes", path: "ghw/linux-amd64-8581cf3a529e5d8b97ea876eade2f60d.tar.gz", ncpu: 24, online: "0-23",
			nodes: map[int]string{0: "0,2,4,6,8,10,12,14,16,18,20,22", 1: "1,3,5,7,9,11,13,15,17,19,21,23"},
			cpus: []cpuWant{
				{id: 0, core: 0, die: 0, pkg: 1, node: 0, online: true, siblings: "0,12", l2: "0,12", l3: "0,2,4,6,8,10,12,14,16,18,20,22"},
				{id: 23, core: 10, die: 0, pkg: 0, node: 1, online: true, siblings: "11,23", l2: "11,23", l3: "1,3,5,7,9,11,13,15,17,19,21,23"},
			},
			unavailable: "cpu online list (derived from cpuN directories)"},
		{name: "ghw i7-1270P hybrid", path: "ghw/linux-amd64-415ee03b8c4d1c4f07ae2e9d8b3d3d6d.tar.gz", ncpu: 16, online: "0-15",
			nodes: map[int]string{0: "0-15"},
			cpus: []cpuWant{
				{id: 4, core: 8, die: 0, pkg: 0, node: 0, online: true, siblings: "4-5", l2: "4-5", l3: "0-15"},
				{id: 12, core: 20, die: 0, pkg: 0, node: 0, online: true, siblings: "12", l2: "12-15", l3: "0-15"}, // E-core cluster shares L2
			}},
		{name: "ghw ryzen 1600 two CCX", path: "ghw/linux-amd64-61797caf7c0b6bca1725ad7975ed4773.tar.gz", ncpu: 12, online: "0-11",
			cpus: []cpuWant{
				{id: 0, core: 0, die: 0, pkg: 0, node: 0, online: true, siblings: "0,6", l2: "0,6", l3: "0-2,6-8"},
				{id: 11, core: 6, die: 0, pkg: 0, node: 0, online: true, siblings: "5,11", l2: "5,11", l3: "3-5,9-11"},
			}},
		{name: "ghw offline CPUs", path: "ghw/linux-amd64-offlineCPUs.tar.gz", ncpu: 4, online: "0-1", offline: "2-3",
			nodes: map[int]string{0: "0-1"},
			cpus: []cpuWant{
				{id: 1, core: 0, die: 0, pkg: 1, node: 0, online: true, siblings: "1", l2: "1", l3: "1"},
				{id: 2, core: -1, die: -1, pkg: -1, node: 0, online: false}, // node from cpu2/node0 link
			},
			noUnavailable: true},
		{name: "ghw accel-nvidia VM", path: "ghw/linux-amd64-accel-nvidia.tar.gz", ncpu: 8, online: "0-7",
			cpus: []cpuWant{{id: 1, core: 57, die: 0, pkg: 0, node: 0, online: true, siblings: "1", l2: "1", l3: "0-7"}}},
		{name: "ghw accel VM 2 sockets", path: "ghw/linux-amd64-accel.tar.gz", ncpu: 2, online: "0-1",
			cpus: []cpuWant{{id: 1, core: 0, die: 1, pkg: 1, node: 0, online: true, siblings: "1", l2: "1", l3: "1"}}},
		{name: "ghw arm64 neoverse", path: "ghw/linux-arm64-c288e0776090cd558ef793b2a4e61939.tar.gz", ncpu: 1, online: "0",
			cpus: []cpuWant{{id: 0, core: 0, die: -1, pkg: 60, node: 0, online: true, siblings: "0", l2: "0", l3: "0"}}},
		{name: "openshift master 112 cpus", path: "cluster-node-tuning-operator/bare-metal-master.internal-sysinfo.tgz", ncpu: 112, online: "0-111",
			nodes: map[int]string{0: evens56, 1: odds56},
			cpus: []cpuWant{
				{id: 1, core: 0, die: 0, pkg: 1, node: 1, online: true, siblings: "1,57", l2: "1,57", l3: odds56},
				{id: 2, core: 14, die: 0, pkg: 0, node: 0, online: true, siblings: "2,58", l2: "2,58", l3: evens56},
				{id: 111, core: 27, die: 0, pkg: 1, node: 1, online: true, siblings: "55,111", l2: "55,111", l3: odds56},
			}},
		{name: "openshift worker1 isolcpus=managed_irq", path: "cluster-node-tuning-operator/bare-metal-worker1.internal-sysinfo.tgz", ncpu: 80, online: "0-79",
			// isolcpus=managed_irq,0-4,11-79 has no "domain" flag: the kernel
			// isolates managed IRQs only, not scheduler domains.
			isolated: "", nohz: "0-4,11-79", managedIRQ: "0-4,11-79",
			cpus: []cpuWant{{id: 79, core: 26, die: 0, pkg: 1, node: 1, online: true, siblings: "39,79", l2: "39,79", l3: odds40}}},
		{name: "openshift sno 12 vCPUs", path: "cluster-node-tuning-operator/sno-sysinfo.tgz", ncpu: 12, online: "0-11",
			nodes: map[int]string{0: "0-11"},
			cpus:  []cpuWant{{id: 11, core: 11, die: 0, pkg: 0, node: 0, online: true, siblings: "11", l2: "11", l3: "0-11"}}},
		{name: "pcp 4 numa nodes", path: "pcp/sysfs-numa-001.tgz", ncpu: 8, online: "0-7",
			nodes: map[int]string{0: "0-1", 1: "2-3", 2: "4-5", 3: "6-7"},
			cpus: []cpuWant{
				{id: 2, core: 0, die: -1, pkg: 1, node: 1, online: true, siblings: "2", l2: "2", l3: "2-3"},
				{id: 7, core: 1, die: -1, pkg: 3, node: 3, online: true, siblings: "7", l2: "7", l3: "6-7"},
			},
			noUnavailable: true},
		{name: "pcp bigsys 480 cpus from /proc/stat", path: "pcp/bigsys-root-hpbl920gen8.tgz", ncpu: 480, online: "0-479",
			cpus:        []cpuWant{{id: 479, core: -1, die: -1, pkg: -1, node: -1, online: true}},
			unavailable: "cpu online list (derived from /proc/stat)"},
		{name: "procfs tree", path: "procfs", ncpu: 3, online: "0-1", offline: "2", isolated: "1-7,9",
			nodes: map[int]string{1: "", 2: ""},
			cpus: []cpuWant{
				{id: 0, core: 0, die: -1, pkg: 0, node: -1, online: true, siblings: "0,4"},
				{id: 1, core: 1, die: -1, pkg: 0, node: -1, online: true, siblings: "1,5"},
				{id: 2, core: -1, die: -1, pkg: -1, node: -1, online: false},
			},
			unavailable: "numa node 1 cpus"},
		{name: "node_exporter tree", path: "node_exporter", ncpu: 4, online: "0-3", isolated: "1,3-5,9",
			nodes: map[int]string{0: "0-1", 1: "2-3", 2: ""},
			cpus:  []cpuWant{{id: 2, core: 0, die: -1, pkg: 1, node: 1, online: true}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := &Host{}
			readTopology(openTopoFixture(t, tc.path), h)
			tp := h.Topology
			if len(tp.CPUs) != tc.ncpu {
				t.Fatalf("%d CPUs, want %d", len(tp.CPUs), tc.ncpu)
			}
			for i := 1; i < len(tp.CPUs); i++ {
				if tp.CPUs[i].ID <= tp.CPUs[i-1].ID {
					t.Fatalf("CPUs not sorted at %d", i)
				}
			}
			topoSet(t, "online", tp.Online, tc.online)
			topoSet(t, "offline", tp.Offline, tc.offline)
			topoSet(t, "isolated", tp.Isolated, tc.isolated)
			topoSet(t, "nohz_full", tp.NohzFull, tc.nohz)
			topoSet(t, "managed_irq isolated", tp.ManagedIRQIsolated, tc.managedIRQ)
			for id, want := range tc.nodes {
				found := false
				for _, n := range tp.Nodes {
					if n.ID == id {
						found = true
						topoSet(t, "node cpus", n.CPUs, want)
					}
				}
				if !found {
					t.Errorf("node %d missing (have %+v)", id, tp.Nodes)
				}
			}
			byID := map[int]CPU{}
			for _, c := range tp.CPUs {
				byID[c.ID] = c
				if c.Isolated != tp.Isolated.Contains(c.ID) || c.NohzFull != tp.NohzFull.Contains(c.ID) {
					t.Errorf("cpu %d: isolation flags disagree with the sets", c.ID)
				}
			}
			for _, w := range tc.cpus {
				c, ok := byID[w.id]
				if !ok {
					t.Errorf("cpu %d missing", w.id)
					continue
				}
				got := cpuWant{c.ID, c.Core, c.Die, c.Package, c.Node, c.Online, c.Siblings.String(), c.L2.String(), c.L3.String()}
				if got != w {
					t.Errorf("cpu %d:\n got %+v\nwant %+v", w.id, got, w)
				}
			}
			if tc.noUnavailable && len(h.Unavailable) > 0 {
				t.Errorf("unexpected unavailable: %+v", h.Unavailable)
			}
			if tc.unavailable != "" && !topoUnavailable(h, tc.unavailable) {
				t.Errorf("no unavailable entry %q in %+v", tc.unavailable, h.Unavailable)
			}
			for _, u := range h.Unavailable {
				if strings.Contains(u.Reason, os.TempDir()) || strings.Contains(u.Reason, topoFixtures) {
					t.Errorf("reason names the on-disk path, not the kernel path: %q", u.Reason)
				}
			}
		})
	}
}

func topoSet(t *testing.T, what string, got cpuset.Set, want string) {
	t.Helper()
	if !got.Equal(cpuset.MustParse(want)) {
		t.Errorf("%s = %q, want %q", what, got, want)
	}
}

func topoUnavailable(h *Host, what string) bool {
	for _, u := range h.Unavailable {
		if strings.Contains(u.What, what) {
			return true
		}
	}
	return false
}

func TestParseCmdlineIsolation(t *testing.T) {
	tests := []struct {
		cmdline               string
		domain, managed, nohz string
		errs                  int
	}{
		{cmdline: "ro quiet", domain: "", managed: "", nohz: ""},
		{cmdline: "isolcpus=2-5", domain: "2-5"},
		{cmdline: "isolcpus=managed_irq,domain,0-4,11-79 nohz_full=0-4,11-79", domain: "0-4,11-79", managed: "0-4,11-79", nohz: "0-4,11-79"},
		{cmdline: "isolcpus=managed_irq,0-4,11-79", managed: "0-4,11-79"},
		{cmdline: "isolcpus=nohz,domain,3", domain: "3", nohz: "3"},
		{cmdline: "isolcpus=1 isolcpus=2", domain: "2"},                  // the last one wins
		{cmdline: "root=/dev/vda -- isolcpus=1 nohz_full=1", domain: ""}, // init's arguments
		{cmdline: "isolcpus=bogus,1", domain: "1", errs: 1},
		{cmdline: "isolcpus=1-x nohz_full=z", errs: 2},
		// "N" is the last CPU (7 in this table), as bitmap_parselist reads it.
		{cmdline: "isolcpus=managed_irq,domain,2-N nohz_full=N", domain: "2-7", managed: "2-7", nohz: "7"},
	}
	for _, tc := range tests {
		params, err := topoTree(t, map[string]string{"proc/cmdline": tc.cmdline + "\n"}).Cmdline()
		if err != nil {
			t.Fatal(err)
		}
		b, errs := parseCmdlineIsolation(params, 7)
		if len(errs) != tc.errs {
			t.Errorf("%q: errors %v, want %d", tc.cmdline, errs, tc.errs)
		}
		topoSet(t, tc.cmdline+" domain", b.domain, tc.domain)
		topoSet(t, tc.cmdline+" managed_irq", b.managedIRQ, tc.managed)
		topoSet(t, tc.cmdline+" nohz_full", b.nohzFull, tc.nohz)
	}
}

// topoTree writes files (path → content) below a temporary root.
func topoTree(t *testing.T, files map[string]string) *kernel.FS {
	t.Helper()
	root := t.TempDir()
	for p, c := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return kernel.New(root)
}

func TestTopologyFallbacks(t *testing.T) {
	tests := []struct {
		name   string
		files  map[string]string
		online string
		what   string
	}{
		{"interrupts header only", map[string]string{
			"proc/interrupts": "           CPU0       CPU1       CPU3\n  0:  1 2 3  IO-APIC 2-edge timer\n"},
			"0-1,3", "derived from /proc/interrupts header"},
		{"proc/stat only", map[string]string{
			"proc/stat": "cpu  1 2 3\ncpu0 1 1 1\ncpu2 1 1 1\nintr 0\n"},
			"0,2", "derived from /proc/stat"},
		{"cpu dirs with online files", map[string]string{
			cpuDir + "/cpu0/topology/core_id": "0\n",
			cpuDir + "/cpu1/online":           "0\n",
			cpuDir + "/cpu2/online":           "1\n"},
			"0,2", "derived from cpuN directories"},
		{"nothing", map[string]string{"proc/version": "Linux\n"}, "", "cpu online list"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := &Host{}
			readTopology(topoTree(t, tc.files), h)
			topoSet(t, "online", h.Topology.Online, tc.online)
			if !topoUnavailable(h, tc.what) {
				t.Errorf("no unavailable %q in %+v", tc.what, h.Unavailable)
			}
			if h.Topology.Nodes == nil {
				t.Error("Nodes is nil, want an empty list")
			}
		})
	}
}

// Garbled files must give Unavailable entries naming the file, never a panic.
func TestTopologyGarbled(t *testing.T) {
	fs := topoTree(t, map[string]string{
		cpuDir + "/online":                             "0-1\n",
		cpuDir + "/possible":                           "0-1\n",
		cpuDir + "/isolated":                           "banana\n",
		cpuDir + "/nohz_full":                          "  (null)\n",
		cpuDir + "/cpu0/topology/core_id":              "zero\n",
		cpuDir + "/cpu0/topology/physical_package_id":  "0\n",
		cpuDir + "/cpu0/topology/thread_siblings_list": "0-\n",
		cpuDir + "/cpu1/topology/core_id":              "1\n",
		cpuDir + "/cpu1/topology/thread_siblings_list": "1\n",
		cpuDir + "/cpu1/cache/index2/level":            "2\n",
		cpuDir + "/cpu1/cache/index2/type":             "Unified\n",
		cpuDir + "/cpu1/cache/index2/shared_cpu_list":  "99999999999\n",
		nodeDir + "/node0/cpulist":                     "0-1x\n",
		"proc/cmdline":                                 "isolcpus=managed_irq,1-0\n",
	})
	h := &Host{}
	readTopology(fs, h)
	if len(h.Topology.CPUs) != 2 {
		t.Fatalf("%d CPUs, want 2", len(h.Topology.CPUs))
	}
	c0, c1 := h.Topology.CPUs[0], h.Topology.CPUs[1]
	if c0.Core != -1 || c0.Package != 0 || !c0.Siblings.IsEmpty() {
		t.Errorf("cpu0 = %+v, want core -1 (garbled), package 0, no siblings", c0)
	}
	if c1.Core != 1 || !c1.L2.IsEmpty() {
		t.Errorf("cpu1 = %+v, want core 1 and unknown L2", c1)
	}
	if !h.Topology.NohzFull.IsEmpty() {
		t.Errorf("nohz_full (null) = %s, want empty", h.Topology.NohzFull)
	}
	all := ""
	for _, u := range h.Unavailable {
		all += u.What + " | " + u.Path + " | " + u.Reason + "\n"
	}
	for _, want := range []string{
		cpuDir + "/isolated",
		cpuDir + "/cpu0/topology/core_id",
		cpuDir + "/cpu1/cache/index2/shared_cpu_list",
		nodeDir + "/node0/cpulist",
		"isolcpus=managed_irq,1-0",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("unavailable does not name %s:\n%s", want, all)
		}
	}
}

// TestTopologyGeneratedHost reads the generated 256-CPU host (see package
// hostgen): an example of testing against a tree no real capture provides.
func TestTopologyGeneratedHost(t *testing.T) {
	dir, cleanup, err := hostgen.ScratchDir()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cleanup)
	spec := hostgen.DefaultSpec()
	spec.Isolated = cpuset.MustParse("8-15,136-143")
	spec.NohzFull = spec.Isolated
	spec.ManagedIRQ = true
	if err := hostgen.Generate(dir, spec); err != nil {
		t.Fatal(err)
	}
	h := &Host{}
	readTopology(kernel.New(dir), h)
	tp := h.Topology
	if len(h.Unavailable) > 0 {
		t.Errorf("unavailable: %+v", h.Unavailable)
	}
	if len(tp.CPUs) != 256 || len(tp.Nodes) != 4 {
		t.Fatalf("%d CPUs on %d nodes, want 256 on 4", len(tp.CPUs), len(tp.Nodes))
	}
	topoSet(t, "online", tp.Online, "0-249")
	topoSet(t, "offline", tp.Offline, "250-255")
	topoSet(t, "possible", tp.Possible, "0-255")
	topoSet(t, "isolated", tp.Isolated, "8-15,136-143")
	topoSet(t, "managed_irq", tp.ManagedIRQIsolated, "8-15,136-143")
	topoSet(t, "nohz_full", tp.NohzFull, "8-15,136-143")
	topoSet(t, "node3", tp.Nodes[3].CPUs, "96-127,224-249")
	want := []cpuWant{
		{id: 5, core: 5, die: 0, pkg: 0, node: 0, online: true, siblings: "5,133", l2: "5,133", l3: "0-63,128-191"},
		{id: 200, core: 8, die: 0, pkg: 1, node: 2, online: true, siblings: "72,200", l2: "72,200", l3: "64-127,192-249"},
		// cpu250 (its sibling) is offline: the kernel drops it from the masks.
		{id: 122, core: 58, die: 0, pkg: 1, node: 3, online: true, siblings: "122", l2: "122", l3: "64-127,192-249"},
		{id: 250, core: -1, die: -1, pkg: -1, node: 3, online: false},
	}
	for _, w := range want {
		c := tp.CPUs[w.id]
		got := cpuWant{c.ID, c.Core, c.Die, c.Package, c.Node, c.Online, c.Siblings.String(), c.L2.String(), c.L3.String()}
		if got != w {
			t.Errorf("cpu %d:\n got %+v\nwant %+v", w.id, got, w)
		}
	}
	if !tp.CPUs[9].Isolated || tp.CPUs[16].Isolated || !tp.CPUs[140].NohzFull {
		t.Error("per-CPU isolation flags wrong")
	}
}
