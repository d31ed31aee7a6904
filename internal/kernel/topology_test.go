package kernel

import (
	"errors"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Captures of whole machines (PROVENANCE.md in the fixtures): ghw's 2-socket
// Xeon L5640 (24 CPUs, node1 the odd ones) and PCP's 8-CPU guest with four
// nodes whose cpuN directories hold their nodeM links.
const (
	ghwXeon = "ghw/linux-amd64-8581cf3a529e5d8b97ea876eade2f60d.tar.gz"
	pcpNUMA = "pcp/sysfs-numa-001.tgz"
)

// odds24 are the odd CPUs of the 24-CPU Xeon: node1, and CPU 3's package.
const odds24 = "1,3,5,7,9,11,13,15,17,19,21,23"

func TestNodesFixtures(t *testing.T) {
	xeon := openSnapshotFixture(t, filepath.Join(fixtures, ghwXeon))
	if ids, err := xeon.NodeIDs(); err != nil || !slices.Equal(ids, []int{0, 1}) {
		t.Errorf("ghw Xeon NodeIDs = %v, %v", ids, err)
	}
	for node, want := range map[int]string{0: "0,2,4,6,8,10,12,14,16,18,20,22", 1: odds24} {
		if s, err := xeon.NodeCPUs(node); err != nil || s.String() != want {
			t.Errorf("ghw Xeon NodeCPUs(%d) = %q, %v; want %q", node, s, err, want)
		}
	}

	pcp := openSnapshotFixture(t, filepath.Join(fixtures, pcpNUMA))
	if ids, err := pcp.NodeIDs(); err != nil || !slices.Equal(ids, []int{0, 1, 2, 3}) {
		t.Errorf("pcp NodeIDs = %v, %v", ids, err)
	}
	if s, err := pcp.NodeCPUs(3); err != nil || s.String() != "6-7" {
		t.Errorf("pcp NodeCPUs(3) = %q, %v", s, err)
	}
	// The node links in the cpuN directories.
	for cpu, want := range map[int]int{1: 0, 5: 2, 7: 3} {
		if n, ok := pcp.CPUNode(cpu); !ok || n != want {
			t.Errorf("pcp CPUNode(%d) = %d, %v; want %d", cpu, n, ok, want)
		}
	}
	// ghw kept no node links in the cpuN directories.
	if n, ok := xeon.CPUNode(3); ok || n != -1 {
		t.Errorf("ghw Xeon CPUNode(3) = %d, %v; want -1, false", n, ok)
	}

	// node_exporter's node2 has no CPUs; procfs's nodes hold vmstat only.
	ne := New(filepath.Join(fixtures, "node_exporter"))
	if s, err := ne.NodeCPUs(2); err != nil || !s.IsEmpty() {
		t.Errorf("node_exporter NodeCPUs(2) = %q, %v; want empty", s, err)
	}
	if s, err := ne.NodeCPUs(1); err != nil || s.String() != "2-3" {
		t.Errorf("node_exporter NodeCPUs(1) = %q, %v", s, err)
	}
	pf := New(filepath.Join(fixtures, "procfs"))
	if ids, err := pf.NodeIDs(); err != nil || !slices.Equal(ids, []int{1, 2}) {
		t.Errorf("procfs NodeIDs = %v, %v", ids, err)
	}
	if _, err := pf.NodeCPUs(1); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("procfs NodeCPUs(1): %v, want not-exist", err)
	}
	if _, err := New(t.TempDir()).NodeIDs(); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("NodeIDs of an empty tree: %v, want not-exist", err)
	}
}

// A cpulist that does not parse falls back to the mask (PCP's node3 mask);
// when both fail, the error is the cpulist's.
func TestNodeCPUsMask(t *testing.T) {
	f := New(tree(t, map[string]string{
		"sys/devices/system/node/node3/cpulist": "6-x\n",
		"sys/devices/system/node/node3/cpumap":  "c0\n",
		"sys/devices/system/node/node4/cpulist": "6-x\n",
		"sys/devices/system/node/node4/cpumap":  "zz\n",
		"sys/devices/system/node/node5/cpumap":  "0f\x00\n",
	}))
	if s, err := f.NodeCPUs(3); err != nil || s.String() != "6-7" {
		t.Errorf("NodeCPUs(3) = %q, %v; want 6-7 from cpumap", s, err)
	}
	if _, err := f.NodeCPUs(4); err == nil || !strings.HasPrefix(err.Error(), "/sys/devices/system/node/node4/cpulist: ") {
		t.Errorf("NodeCPUs(4): %v, want the cpulist's error", err)
	}
	if s, err := f.NodeCPUs(5); err != nil || s.String() != "0-3" {
		t.Errorf("NodeCPUs(5) = %q, %v; want 0-3 from cpumap", s, err)
	}
}

func TestCPUTopologyFixtures(t *testing.T) {
	xeon := openSnapshotFixture(t, filepath.Join(fixtures, ghwXeon))
	topo, err := xeon.CPUTopology(3)
	if err != nil {
		t.Fatal(err)
	}
	if topo.Core != 1 || topo.Die != 0 || topo.Package != 0 || topo.BadID != nil {
		t.Errorf("ghw Xeon cpu3 core/die/package = %d/%d/%d (%v); want 1/0/0", topo.Core, topo.Die, topo.Package, topo.BadID)
	}
	if s := topo.Siblings; s.CPUs.String() != "3,15" || s.From != "thread_siblings_list" || len(s.Fails) > 0 {
		t.Errorf("ghw Xeon cpu3 siblings = %+v", s)
	}
	if s := topo.PackageCPUs; s.CPUs.String() != odds24 || s.From != "package_cpus_list" || len(s.Fails) > 0 {
		t.Errorf("ghw Xeon cpu3 package = %+v", s)
	}
	l2, l3, err := xeon.CPUCaches(3) // index0 and index1 are level 1
	if err != nil || l2.String() != "3,15" || l3.String() != odds24 {
		t.Errorf("ghw Xeon CPUCaches(3) = %q, %q, %v", l2, l3, err)
	}

	// A 2019 kernel: no die_id, no package_cpus* (core_siblings_list).
	pcp := openSnapshotFixture(t, filepath.Join(fixtures, pcpNUMA))
	topo, err = pcp.CPUTopology(7)
	if err != nil {
		t.Fatal(err)
	}
	if topo.Core != 1 || topo.Die != -1 || topo.Package != 3 || topo.BadID != nil {
		t.Errorf("pcp cpu7 core/die/package = %d/%d/%d (%v); want 1/-1/3", topo.Core, topo.Die, topo.Package, topo.BadID)
	}
	if s := topo.Siblings; s.CPUs.String() != "7" || s.From != "thread_siblings_list" {
		t.Errorf("pcp cpu7 siblings = %+v", s)
	}
	if s := topo.PackageCPUs; s.CPUs.String() != "6-7" || s.From != "core_siblings_list" || len(s.Fails) > 0 {
		t.Errorf("pcp cpu7 package = %+v", s)
	}
	if l2, l3, err := pcp.CPUCaches(7); err != nil || l2.String() != "7" || l3.String() != "6-7" {
		t.Errorf("pcp CPUCaches(7) = %q, %q, %v", l2, l3, err)
	}

	// Offline CPUs have no topology directory.
	off := openSnapshotFixture(t, filepath.Join(fixtures, ghwOffline))
	if _, err := off.CPUTopology(2); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ghw offline CPUTopology(2): %v, want not-exist", err)
	}
	if n, ok := off.CPUNode(2); !ok || n != 0 {
		t.Errorf("ghw offline CPUNode(2) = %d, %v; want 0", n, ok)
	}
}

// What captures and kernels put in topology files: NUL padding, empty
// placeholders (skipped), garbled lists (a failure, then the next file),
// masks only; a garbled id is BadID, a missing one -1.
func TestCPUTopologyValues(t *testing.T) {
	const d = "sys/devices/system/cpu/cpu4/"
	f := New(tree(t, map[string]string{
		d + "topology/core_id":              "2\n\x00",
		d + "topology/physical_package_id":  "one\n",
		d + "topology/thread_siblings_list": "",
		d + "topology/core_cpus_list":       "4-x\n",
		d + "topology/thread_siblings":      "30\n",
		d + "topology/package_cpus_list":    "\n",
		d + "cache/index2/level":            "2\n",
		d + "cache/index2/shared_cpu_map":   "30\n",
		d + "cache/index3/level":            "3\n",
		d + "cache/index3/shared_cpu_list":  "0-z\n",
		d + "cache/index4/level":            "2\n",
		d + "cache/index4/type":             "Instruction\n",
		d + "cache/index4/shared_cpu_list":  "0-7\n",
	}))
	topo, err := f.CPUTopology(4)
	if err != nil {
		t.Fatal(err)
	}
	if topo.Core != 2 || topo.Die != -1 || topo.Package != -1 {
		t.Errorf("core/die/package = %d/%d/%d; want 2/-1/-1", topo.Core, topo.Die, topo.Package)
	}
	if topo.BadID == nil || !strings.Contains(topo.BadID.Error(), "/"+d+"topology/physical_package_id") {
		t.Errorf("BadID = %v, want physical_package_id's error", topo.BadID)
	}
	s := topo.Siblings
	if s.CPUs.String() != "4-5" || s.From != "thread_siblings" || len(s.Fails) != 1 || s.Fails[0].File != "core_cpus_list" {
		t.Errorf("siblings = %+v; want 4-5 from thread_siblings after core_cpus_list failed", s)
	}
	if p := topo.PackageCPUs; !p.CPUs.IsEmpty() || p.From != "" || len(p.Fails) > 0 {
		t.Errorf("package = %+v; want nothing (an empty file is skipped)", p)
	}
	l2, l3, bad := f.CPUCaches(4)
	if l2.String() != "4-5" || !l3.IsEmpty() {
		t.Errorf("CPUCaches = %q, %q", l2, l3)
	}
	if bad == nil || !strings.HasPrefix(bad.Error(), "/"+d+"cache/index3/shared_cpu_list: ") {
		t.Errorf("CPUCaches bad = %v, want index3's shared_cpu_list", bad)
	}
	if l2, l3, bad := f.CPUCaches(5); !l2.IsEmpty() || !l3.IsEmpty() || bad != nil {
		t.Errorf("CPUCaches of a CPU without a cache directory = %q, %q, %v", l2, l3, bad)
	}
	if SiblingFiles != "{thread_siblings_list,core_cpus_list,thread_siblings,core_cpus}" {
		t.Errorf("SiblingFiles = %q", SiblingFiles)
	}
}

func TestBlockQueuesFixture(t *testing.T) {
	f := openSnapshotFixture(t, labSmall61)
	for _, c := range []struct {
		dev  string
		want map[int]string
		n    int
	}{
		// blk-mq prints "4, 5": virtio-blk, 4 queues of 2 CPUs.
		{"vda", map[int]string{0: "4-5", 1: "6-7", 2: "0-1", 3: "2-3"}, 4},
		{"nvme0n1", map[int]string{0: "4", 3: "7", 7: "3"}, 8},
	} {
		qs, err := f.BlockQueues(c.dev)
		if err != nil || len(qs) != c.n || qs[0] != 0 || qs[len(qs)-1] != c.n-1 {
			t.Errorf("BlockQueues(%s) = %v, %v; want 0…%d", c.dev, qs, err, c.n-1)
		}
		for q, want := range c.want {
			if s, err := f.BlockQueueCPUs(c.dev, q); err != nil || s.String() != want {
				t.Errorf("BlockQueueCPUs(%s, %d) = %q, %v; want %q", c.dev, q, s, err, want)
			}
		}
	}
	if _, err := f.BlockQueues("loop0"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("BlockQueues(loop0): %v, want not-exist", err)
	}

	tr := New(tree(t, map[string]string{
		"sys/block/sda/mq/0/cpu_list": "0-x\n",
		"sys/block/sda/mq/10/":        "",
		"sys/block/sda/mq/2/":         "",
		"sys/block/sda/mq/02/":        "",
		"sys/block/sda/mq/uevent":     "",
	}))
	if qs, err := tr.BlockQueues("sda"); err != nil || !slices.Equal(qs, []int{0, 2, 10}) {
		t.Errorf("BlockQueues(sda) = %v, %v; want [0 2 10]", qs, err)
	}
	if _, err := tr.BlockQueueCPUs("sda", 0); err == nil || !strings.HasPrefix(err.Error(), "/sys/block/sda/mq/0/cpu_list: ") {
		t.Errorf("BlockQueueCPUs of 0-x: %v, want an error naming the file", err)
	}
}
