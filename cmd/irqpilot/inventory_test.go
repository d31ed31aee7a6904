package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/livetest"
)

var updateGolden = flag.Bool("update-inventory", false, "rewrite the golden inventories of testdata/snapshots from the committed snapshots")

const (
	sharedFixtures = "../../../shared/fixtures"
	snapshotsDir   = "../../testdata/snapshots"
)

// invRun runs irqpilot and returns its standard output; any failure fails t.
func invRun(t *testing.T, args ...string) []byte {
	t.Helper()
	return invRunIn(t, nil, args...)
}

func invRunIn(t *testing.T, prefix []string, args ...string) []byte {
	t.Helper()
	stdout, stderr, err := runCmd(selfCmd(prefix, args...))
	if err != nil {
		t.Fatalf("irqpilot %s: %v\n%s", strings.Join(args, " "), err, stderr)
	}
	return []byte(stdout)
}

// inventoryJSON runs `irqpilot ARGS inventory --json` and decodes the host.
func inventoryJSON(t *testing.T, args ...string) (*host.Host, []byte) {
	t.Helper()
	out := invRun(t, append(args, "inventory", "--json")...)
	var h host.Host
	if err := json.Unmarshal(out, &h); err != nil {
		t.Fatalf("inventory --json: %v\n%.500s", err, out)
	}
	return &h, out
}

func unavailable(h *host.Host, what string) bool {
	for _, u := range h.Unavailable {
		if strings.Contains(u.What, what) {
			return true
		}
	}
	return false
}

// With a root holding only proc/interrupts, every IRQ is still listed and
// the rest is reported as unavailable.
func TestInventoryOnlyProcInterrupts(t *testing.T) {
	for _, name := range []string{"node_exporter/proc/interrupts", "node_exporter/proc/interrupts_aarch64", "sysstat/root3/proc/interrupts"} {
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(sharedFixtures, name))
			if err != nil {
				t.Fatal(err)
			}
			root := t.TempDir()
			os.MkdirAll(filepath.Join(root, "proc"), 0o755)
			os.WriteFile(filepath.Join(root, "proc/interrupts"), data, 0o644)

			// The IRQ numbers, found independently of the parser.
			var want []int
			for _, m := range regexp.MustCompile(`(?m)^\s*(\d+):`).FindAllStringSubmatch(string(data), -1) {
				n, _ := strconv.Atoi(m[1])
				want = append(want, n)
			}
			h, _ := inventoryJSON(t, "--root", root)
			if len(h.IRQs) != len(want) {
				t.Fatalf("%d IRQs, want %d", len(h.IRQs), len(want))
			}
			for i, n := range want {
				if h.IRQs[i].Number != n {
					t.Errorf("irqs[%d] = %d, want %d", i, h.IRQs[i].Number, n)
				}
				if h.IRQs[i].Affinity != nil || h.IRQs[i].Managed == host.ManagedYes {
					t.Errorf("irq %d: affinity/managed invented without /proc/irq", n)
				}
			}
			for _, what := range []string{"irq affinity", "nic", "block"} {
				if !unavailable(h, what) {
					t.Errorf("unavailable does not mention %q: %+v", what, h.Unavailable)
				}
			}
			if name != "node_exporter/proc/interrupts" {
				return
			}
			// The text lists every IRQ and counts what is unavailable.
			text := string(invRun(t, "--root", root, "inventory"))
			n := strconv.Itoa(len(want))
			wantLines(t, text, "Other IRQs: "+n+" of "+n, "Unavailable: "+strconv.Itoa(len(h.Unavailable)))
		})
	}
	// Specific values of the node_exporter laptop file.
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "proc"), 0o755)
	data, _ := os.ReadFile(filepath.Join(sharedFixtures, "node_exporter/proc/interrupts"))
	os.WriteFile(filepath.Join(root, "proc/interrupts"), data, 0o644)
	h, _ := inventoryJSON(t, "--root", root)
	if q := h.IRQ(1); q == nil || q.Counts[0] != 17960 || q.Counts[3] != 28 || strings.Join(q.Actions, ",") != "i8042" {
		t.Errorf("irq 1 = %+v, want i8042 with 17960 on cpu0 and 28 on cpu3", q)
	}
	if q := h.IRQ(0); q == nil || q.Class != host.ClassTimer {
		t.Errorf("irq 0 = %+v, want class timer", q)
	}
}

// --root on the node_exporter fixture tree.
func TestInventoryRootNodeExporter(t *testing.T) {
	h, _ := inventoryJSON(t, "--root", filepath.Join(sharedFixtures, "node_exporter"))
	if len(h.CPUs) != 4 {
		t.Fatalf("%d cpus, want 4", len(h.CPUs))
	}
	for _, c := range h.CPUs {
		wantNode := c.ID / 2 // node0 cpulist 0-1, node1 2-3
		if c.Node != wantNode || c.Core != c.ID%2 || !c.Online {
			t.Errorf("cpu %d: node %d core %d online %v, want node %d core %d", c.ID, c.Node, c.Core, c.Online, wantNode, c.ID%2)
		}
	}
	if !h.CPUs[1].Isolated || h.CPUs[2].Isolated || !h.CPUs[3].Isolated {
		t.Errorf("isolated flags wrong (isolated = 1,3-5,9): %+v", h.CPUs)
	}
	n := h.NIC("ens10f0")
	if n == nil || len(n.RxQueues) != 8 || len(n.TxQueues) != 8 {
		t.Fatalf("ens10f0 = %+v, want 8 rx and 8 tx queues", n)
	}
	if rx := n.RxQueues[7]; rx.RPSCPUs == nil || !rx.RPSCPUs.IsEmpty() || rx.RPSFlowCnt == nil || *rx.RPSFlowCnt != 0 {
		t.Errorf("rx-7 = %+v, want rps_cpus empty (256-bit zero mask) and rps_flow_cnt 0", rx)
	}
	if q := h.IRQ(43); q == nil || strings.Join(q.Actions, ",") != "ahci" || q.Counts[1] != 8092205 {
		t.Errorf("irq 43 = %+v", q)
	}
	text := string(invRun(t, "--root", filepath.Join(sharedFixtures, "node_exporter"), "inventory"))
	wantLines(t, text,
		"  node 0  cpus 0-1",
		"  node 1  cpus 2-3",
		"      core 0: 2  core 1: 3",
		"  ens10f0  driver ?  8 rx / 8 tx queues",
		"    rx 0-7  -                              off  0",
		"    tx 0-7  -                                          off",
		"    irq 43 ahci  allowed ?  lands on ?  count 29.5M (cpu1 27%)",
	)
}

// --snapshot on ghw and cluster-node-tuning-operator captures.
func TestInventorySnapshots(t *testing.T) {
	t.Run("ghw-xeon-L5640", func(t *testing.T) {
		// ghw snapshots hold topology but no /proc/interrupts: inventory
		// shows the CPUs and reports the IRQ table as unavailable.
		h, _ := inventoryJSON(t, "--snapshot", filepath.Join(sharedFixtures, "ghw/linux-amd64-8581cf3a529e5d8b97ea876eade2f60d.tar.gz"))
		if len(h.CPUs) != 24 {
			t.Fatalf("%d cpus, want 24", len(h.CPUs))
		}
		// 2x Xeon L5640: node 1 holds the odd CPUs; cpu1 is core 0 of
		// package 0 with SMT sibling 13 and shares L3 with the odd CPUs.
		c := h.CPUs[1]
		if c.Node != 1 || c.Core != 0 || c.Package != 0 || c.Siblings.String() != "1,13" || c.L3.String() != "1,3,5,7,9,11,13,15,17,19,21,23" {
			t.Errorf("cpu1 = %+v", c)
		}
		if len(h.IRQs) != 0 || !unavailable(h, "irqs") {
			t.Errorf("irqs %d, unavailable %v; want none and the IRQ table reported unavailable", len(h.IRQs), h.Unavailable)
		}
	})
	t.Run("cnto-sno", func(t *testing.T) {
		// A ghw-format snapshot of a KVM guest, with /proc/interrupts.
		h, _ := inventoryJSON(t, "--snapshot", filepath.Join(sharedFixtures, "cluster-node-tuning-operator/sno-sysinfo.tgz"))
		if len(h.CPUs) != 12 {
			t.Fatalf("%d cpus, want 12", len(h.CPUs))
		}
		var req []int
		for _, q := range h.IRQs {
			if len(q.Actions) == 1 && strings.HasPrefix(q.Actions[0], "virtio3-req.") {
				req = append(req, q.Number)
				if q.Class != host.ClassStorage {
					t.Errorf("irq %d %v: class %s, want storage", q.Number, q.Actions, q.Class)
				}
			}
		}
		if len(req) != 12 {
			t.Errorf("%d virtio3-req.N IRQs, want 12 (one per vCPU)", len(req))
		}
	})
	t.Run("cnto-worker1", func(t *testing.T) {
		h, _ := inventoryJSON(t, "--snapshot", filepath.Join(sharedFixtures, "cluster-node-tuning-operator/bare-metal-worker1.internal-sysinfo.tgz"))
		if len(h.CPUs) != 80 {
			t.Fatalf("%d cpus, want 80", len(h.CPUs))
		}
		q := h.IRQ(100)
		if q == nil || strings.Join(q.Actions, ",") != "megasas1-msix31" || q.Affinity == nil || q.Affinity.String() != "61" ||
			q.EffectiveAffinity == nil || q.EffectiveAffinity.String() != "61" || q.Class != host.ClassStorage {
			t.Errorf("irq 100 = %+v, want megasas1-msix31 on 61, storage", q)
		}
		// isolcpus=managed_irq,… isolates only from managed IRQs, not from
		// the scheduler's domains; nohz_full=0-4,11-79.
		if h.CPUs[0].Isolated || !h.CPUs[0].NohzFull || h.CPUs[5].NohzFull || !h.CPUs[11].NohzFull {
			t.Errorf("cmdline isolation not reflected: cpu0 %+v cpu5 %+v", h.CPUs[0], h.CPUs[5])
		}
	})
	t.Run("cnto-master-text", func(t *testing.T) {
		// 112 CPUs, 1 862 IRQs: the text must stay short and narrow.
		text := string(invRun(t, "--snapshot", filepath.Join(sharedFixtures, "cluster-node-tuning-operator/bare-metal-master.internal-sysinfo.tgz"), "inventory"))
		lines := strings.Split(text, "\n")
		if len(lines) > 150 {
			t.Errorf("%d lines for a 112-CPU host", len(lines))
		}
		for _, l := range lines {
			if len(l) > 200 {
				t.Errorf("line of %d characters: %.120s…", len(l), l)
			}
		}
		wantLines(t, text,
			"CPUs: 112 online (0-111), offline none, isolated none, nohz_full none",
			"  node 1  cpus 1-111 step 2 (56 cpus)",
			"      core 25: 47,103  core 12: 49,105  core 26: 51,107  core 13: 53,109  core 27: 55,111",
			"    228 IRQs 1783-2009,2013 (ens6f1)  allowed node 1 (56 cpus)  lands on node 1 (56 cpus)  count 64387 (cpu59 23%)",
			"    113 IRQs 144,148-259 (nvme0)  allowed 0-111  lands on 0-111  count 326 (cpu36 71%)",
		)
	})
}

func TestInventoryNAPILines(t *testing.T) {
	irq, pid := 38, 7218
	tr, f := true, false
	d, z := uint32(2), uint64(0)
	g := uint64(20000)
	cpus := cpuset.Of(1)
	h := &host.Host{
		NICs: []host.NIC{{Name: "eth0", Node: -1}, {Name: "vA", Virtual: true, Kind: "veth", Node: -1}},
		NAPI: []host.NAPI{
			{ID: 257, Device: "eth0", Queues: host.NAPIQueues{RX: []int{0}, TX: []int{0}}, IRQ: &irq, PID: &pid, CPUs: &cpus,
				Threaded: &tr, DeferHardIRQs: &d, GROFlushTimeout: &g, IRQSuspendTimeout: &z},
			{ID: 274, Device: "vA", Queues: host.NAPIQueues{RX: []int{}, TX: []int{}}, Threaded: &f, DeferHardIRQs: &d, GROFlushTimeout: &z, IRQSuspendTimeout: &z},
			{ID: 9, Device: "vA"}, // a kernel that reports ids only
		},
	}
	var b bytes.Buffer
	writeInventory(&b, h, "test")
	out := b.String()
	wantLines(t, out,
		"    napi 257: rx 0  tx 0  irq 38  threaded (pid 7218 on cpus 1)  defer-hard-irqs 2  gro-flush-timeout 20000ns  irq-suspend-timeout 0ns",
		"    napi 274: softirq  defer-hard-irqs 2  gro-flush-timeout 0ns  irq-suspend-timeout 0ns",
		"    napi 9: (no details reported)",
	)
	// Each under its own NIC.
	if i, j := strings.Index(out, "napi 257"), strings.Index(out, "  vA  "); i < 0 || j < 0 || i > j {
		t.Errorf("napi 257 not under eth0:\n%s", out)
	}
}

// testdata/snapshots/pending-move.tar.gz is this project's 2-CPU VM
// captured (capture --redact) right after IRQ 24 (ACPI:Ged, IO-APIC, last
// fired on CPU 0) was written to CPU 1: x86 moves it at its next interrupt,
// so it is allowed on 1 and still lands on 0. inventory says the move is
// pending, for that IRQ only.
func TestInventoryPendingMove(t *testing.T) {
	snap := filepath.Join(snapshotsDir, "pending-move.tar.gz")
	h, _ := inventoryJSON(t, "--snapshot", snap)
	var pending []int
	for i := range h.IRQs {
		if h.IRQs[i].MovePending() {
			pending = append(pending, h.IRQs[i].Number)
		}
	}
	if len(pending) != 1 || pending[0] != 24 {
		t.Fatalf("IRQs with a pending move: %v, want [24]", pending)
	}
	text := string(invRun(t, "--snapshot", snap, "inventory"))
	var lines []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, host.MovePendingNote) {
			lines = append(lines, strings.TrimSpace(l))
		}
	}
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "irq 24 ACPI:Ged  allowed 1  lands on 0 (move pending until its next interrupt)") {
		t.Errorf("lines saying a move is pending: %q, want irq 24's only\n%s", lines, text)
	}
}

// A group of like IRQs summarised on one line counts its pending moves; a
// device queue's row says it in its "lands" cell.
func TestInventoryPendingGroupAndRow(t *testing.T) {
	set := func(s string) *cpuset.Set { v := cpuset.MustParse(s); return &v }
	var qs []*host.IRQ
	for i := 0; i < 6; i++ {
		q := &host.IRQ{Number: 100 + i, Actions: []string{fmt.Sprintf("irdma-ceq%d", i)}, Chip: "PCI-MSIX", Affinity: set("0-3"), EffectiveAffinity: set("1")}
		if i < 2 {
			q.Affinity = set("2") // written, still on 1
		}
		qs = append(qs, q)
	}
	h := &host.Host{}
	for _, q := range qs {
		h.IRQs = append(h.IRQs, *q)
	}
	tx := &inventoryText{h: h}
	if got := tx.groupLine(qs); !strings.HasSuffix(got, "  2 moves pending until their next interrupt") {
		t.Errorf("group line %q does not count its 2 pending moves", got)
	}
	if got := tx.groupLine(qs[2:]); strings.Contains(got, "pending") {
		t.Errorf("group line %q: nothing is pending", got)
	}
	n := 100
	if cells := tx.irqCells(&n); cells[2] != "1 (move pending until its next interrupt)" {
		t.Errorf("queue row cells %q: the lands cell does not say the move is pending", cells)
	}
}

func TestInventoryCoreGrouping(t *testing.T) {
	cpu := func(id, node, pkg, core int, siblings string) host.CPU {
		return host.CPU{ID: id, Online: true, Node: node, Package: pkg, Core: core, Siblings: cpuset.MustParse(siblings)}
	}
	tests := []struct {
		name string
		cpus []host.CPU
		want string // groups as "node/pkg/core:threads", space separated
	}{
		{"SMT pairs", []host.CPU{cpu(0, 0, 0, 0, "0,2"), cpu(1, 0, 0, 1, "1,3"), cpu(2, 0, 0, 0, "0,2"), cpu(3, 0, 0, 1, "1,3")},
			"0/0/0:0,2 0/0/1:1,3"},
		// core_id is not unique within a package on some platforms: the
		// sibling masks tell the cores apart.
		{"core_id repeated within a package", []host.CPU{
			cpu(0, 0, 0, 0, "0,4"), cpu(1, 0, 0, 0, "1,5"), cpu(2, 0, 0, 1, "2,6"), cpu(3, 0, 0, 1, "3,7"),
			cpu(4, 0, 0, 0, "0,4"), cpu(5, 0, 0, 0, "1,5"), cpu(6, 0, 0, 1, "2,6"), cpu(7, 0, 0, 1, "3,7")},
			"0/0/0:0,4 0/0/0:1,5 0/0/1:2,6 0/0/1:3,7"},
		{"same mask in two packages stays apart", []host.CPU{cpu(0, 0, 0, 0, "0-1"), cpu(1, 0, 1, 0, "0-1")},
			"0/0/0:0 0/1/0:1"},
		// Without siblings, core_id groups (the node_exporter tree); with
		// neither, each CPU stands alone.
		{"siblings unknown", []host.CPU{cpu(0, 0, 0, 0, ""), cpu(1, 0, 0, 0, ""), cpu(2, 0, 0, -1, ""), cpu(3, 0, 0, -1, "")},
			"0/0/0:0-1 0/0/-1:2 0/0/-1:3"},
		{"offline CPUs left out, order by node then package", []host.CPU{
			cpu(0, 1, 0, 0, "0"), {ID: 1, Node: 0, Package: 0, Core: 0, Siblings: cpuset.MustParse("1")}, cpu(2, 0, 3, 0, "2"), cpu(3, 0, 1, 0, "3")},
			"0/1/0:3 0/3/0:2 1/0/0:0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, g := range groupCores(tc.cpus) {
				got = append(got, fmt.Sprintf("%d/%d/%d:%s", g.node, g.pkg, g.core, cpuset.Of(g.threads...)))
			}
			if s := strings.Join(got, " "); s != tc.want {
				t.Errorf("groups %s, want %s", s, tc.want)
			}
		})
	}
}

// The text inventory of a sysfs tree whose core_id repeats within the
// package (two cores report core_id 0, two core_id 1) lists four cores.
func TestInventoryCoresBySiblings(t *testing.T) {
	cpu := "sys/devices/system/cpu"
	files := map[string]string{
		cpu + "/online":                         "0-7\n",
		cpu + "/possible":                       "0-7\n",
		"sys/devices/system/node/node0/cpulist": "0-7\n",
	}
	for id := 0; id < 8; id++ {
		core := id % 4 / 2 // 0,0,1,1 for threads 0-3 and again for 4-7
		topo := fmt.Sprintf("%s/cpu%d/topology/", cpu, id)
		files[topo+"core_id"] = fmt.Sprintf("%d\n", core)
		files[topo+"physical_package_id"] = "0\n"
		files[topo+"thread_siblings_list"] = fmt.Sprintf("%d,%d\n", id%4, id%4+4)
	}
	root := livetest.WriteTree(t, files)
	text := string(invRun(t, "--root", root, "inventory"))
	wantLines(t, text, "    package 0  4 cores, 8 threads", "      core 0: 0,4  core 0: 1,5  core 1: 2,6  core 1: 3,7")
}

// TestInventoryByNameAlone: on a bare /proc/interrupts (a vendor NIC's
// "eth0-0" … "eth0-6" vectors) inventory says which IRQs it classed by
// their names alone, in the text and as by_name in --json.
func TestInventoryByNameAlone(t *testing.T) {
	data, err := os.ReadFile("../../testdata/interrupts/rtl-eth-n/interrupts")
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "proc"), 0o755)
	os.WriteFile(filepath.Join(root, "proc/interrupts"), data, 0o644)
	h, raw := inventoryJSON(t, "--root", root)
	for _, q := range h.IRQs {
		if q.Class != host.ClassNetwork || q.Device != "eth0" || !q.ByName {
			t.Errorf("irq %d %v: class %s device %q by_name %v, want network eth0 by name", q.Number, q.Actions, q.Class, q.Device, q.ByName)
		}
	}
	// The field's documented name, on every IRQ.
	var doc struct {
		IRQs []struct {
			ByName *bool `json:"by_name"`
		} `json:"irqs"`
	}
	decodeJSON(t, string(raw), &doc)
	for i, q := range doc.IRQs {
		if q.ByName == nil || !*q.ByName {
			t.Errorf("irqs[%d]: no \"by_name\": true in --json", i)
		}
	}
	if len(doc.IRQs) != 7 {
		t.Errorf("%d IRQs in --json, want 7", len(doc.IRQs))
	}
	text := string(invRun(t, "--root", root, "inventory"))
	wantLines(t, text, "Classed by name alone (nothing in /sys ties them to a device): 7 of 7 IRQs", "  eth0 (network) irq 30-36")
}
