package hostgen

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/kernel"
)

func TestDefaultLayout(t *testing.T) {
	L, err := Build(DefaultSpec())
	if err != nil {
		t.Fatal(err)
	}
	if L.Possible.Len() != 256 || L.Online.String() != "0-249" || L.Offline.String() != "250-255" {
		t.Fatalf("possible %s online %s offline %s", L.Possible, L.Online, L.Offline)
	}
	if len(L.Nodes) != 4 || L.Nodes[0].String() != "0-31,128-159" || L.Nodes[3].String() != "96-127,224-249" {
		t.Errorf("nodes %v", L.Nodes)
	}
	if len(L.NICs) != 2 || len(L.NICs[0].QueueIRQs) != 64 || len(L.NICs[1].QueueIRQs) != 64 {
		t.Fatalf("NICs %+v", L.NICs)
	}
	if L.NVMe == nil || len(L.NVMe.QueueIRQs) != 128 {
		t.Fatal("nvme0 does not have 128 queues")
	}
	// IRQ numbering is part of the contract tests rely on.
	fixed := map[int]string{0: "timer", 25: "nvme0q0", 26: "nvme0q1", 153: "nvme0q128",
		154: "ice-0000:00:03.0:misc", 155: "ice-eth0-TxRx-0", 218: "ice-eth0-TxRx-63",
		219: "ice-0000:00:05.0:misc", 220: "ice-eth1-TxRx-0", 283: "ice-eth1-TxRx-63"}
	for n, action := range fixed {
		if q := L.irq(n); q.Number != n || q.Actions[0] != action {
			t.Errorf("irq %d = %d %v, want %s", n, q.Number, q.Actions, action)
		}
	}
	// Managed spreading: 32 queues per node, 2 CPUs each, siblings apart.
	if got := L.NVMe.QueueCPUs[0].String(); got != "0-1" {
		t.Errorf("nvme queue 1 cpus %s", got)
	}
	if got := L.NVMe.QueueCPUs[16].String(); got != "128-129" {
		t.Errorf("nvme queue 17 cpus %s", got)
	}
	last := L.irq(153)
	if last.Affinity.String() != "254-255" || !last.Managed || last.Node != 3 || last.Total(L) != 0 {
		t.Errorf("nvme0q128 (all CPUs offline) = %+v", last)
	}
	// eth1 lives on node 3, which has 58 online CPUs: queues 58-63 spill
	// to the first CPUs of node 0, as cpumask_local_spread does.
	if q := L.irq(L.NICs[1].QueueIRQs[57]); q.Affinity.String() != "249" {
		t.Errorf("eth1 queue 57 on %s, want 249", q.Affinity)
	}
	if q := L.irq(L.NICs[1].QueueIRQs[58]); q.Affinity.String() != "0" {
		t.Errorf("eth1 queue 58 on %s, want 0", q.Affinity)
	}
}

// Total sums an IRQ's counts at the layout's Elapsed.
func (q *IRQ) Total(L *Layout) uint64 {
	var t uint64
	for c := range q.Base {
		t += L.at(q.Base[c], q.Rate[c])
	}
	return t
}

func TestBuildErrors(t *testing.T) {
	off0 := cpuset.Of(0)
	for _, s := range []Spec{
		{CPUs: 10, ThreadsPerCore: 3},
		{CPUs: 16, Packages: 3},
		{CPUs: 16, Nodes: 3},
		{CPUs: 16, Offline: &off0},
		{CPUs: 16, NVMeQueues: 17},
		{CPUs: 16, NICs: []NICSpec{{Name: "eth0", Node: 9, Queues: 4}}},
	} {
		if _, err := Build(s); err == nil {
			t.Errorf("Build(%+v) succeeded", s)
		}
	}
}

func readFile(t *testing.T, dir, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// resolveIn follows the symlinks of rel below root on disk and returns the
// real path relative to root, with a leading "/".
func resolveIn(root, rel string) (string, error) {
	r, err := filepath.EvalSymlinks(root)
	if err != nil {
		return "", err
	}
	real, err := filepath.EvalSymlinks(filepath.Join(r, rel))
	if err != nil {
		return "", err
	}
	got, err := filepath.Rel(r, real)
	if err != nil {
		return "", err
	}
	return "/" + got, nil
}

func TestGenerateDefault(t *testing.T) {
	dir, cleanup, err := ScratchDir()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cleanup)
	L, err := Build(DefaultSpec())
	if err != nil {
		t.Fatal(err)
	}
	if err := L.Write(dir); err != nil {
		t.Fatal(err)
	}
	fs := kernel.New(dir)

	in, err := fs.Interrupts()
	if err != nil {
		t.Fatal(err)
	}
	if len(in.CPUs) != 250 || in.CPUs[249] != 249 {
		t.Fatalf("header has %d CPUs", len(in.CPUs))
	}
	found := false
	for _, l := range in.Lines {
		if l.IRQ == 155 {
			found = true
			cpu := L.irq(155).Effective.Min()
			if l.Chip != "IR-PCI-MSIX-0000:00:03.0" || l.Actions[0] != "ice-eth0-TxRx-0" ||
				l.Counts[cpu] != At(L.irq(155).Base[cpu], L.irq(155).Rate[cpu], 0) || l.Counts[cpu] == 0 {
				t.Errorf("irq 155 line %+v", l)
			}
		}
	}
	if !found {
		t.Error("irq 155 not in /proc/interrupts")
	}

	// Symlinks resolve the way they do in real sysfs.
	for link, want := range map[string]string{
		"sys/class/net/eth0":                  "/sys/devices/pci0000:00/0000:00:03.0/net/eth0",
		"sys/class/net/eth0/device/driver":    "/sys/bus/pci/drivers/ice",
		"sys/block/nvme0n1":                   "/sys/devices/pci0000:00/0000:00:04.0/nvme/nvme0/nvme0n1",
		"sys/block/nvme0n1/device/device":     "/sys/devices/pci0000:00/0000:00:04.0",
		"sys/devices/system/cpu/cpu250/node3": "/sys/devices/system/node/node3",
	} {
		if got, err := resolveIn(dir, link); err != nil || got != want {
			t.Errorf("%s → %s (%v), want %s", link, got, err, want)
		}
	}
	for rel, want := range map[string]string{
		"sys/class/net/eth0/queues/rx-3/rps_cpus":                     "00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000000\n",
		"sys/class/net/eth0/queues/tx-3/xps_cpus":                     "00000000,00000000,00000000,00000000,00000000,00000000,00000000,00000008\n",
		"sys/class/net/eth1/device/numa_node":                         "3\n",
		"sys/class/net/eth1/device/local_cpulist":                     "96-127,224-249\n",
		"sys/block/nvme0n1/mq/0/cpu_list":                             "0, 1\n",
		"proc/irq/155/smp_affinity_list":                              "0\n",
		"proc/irq/153/effective_affinity_list":                        "254\n",
		"proc/irq/25/smp_affinity_list":                               "0-255\n",
		"sys/devices/system/cpu/online":                               "0-249\n",
		"sys/devices/system/cpu/cpu122/topology/thread_siblings_list": "122\n",
		"sys/kernel/irq/155/actions":                                  "ice-eth0-TxRx-0\n",
	} {
		if got := readFile(t, dir, rel); got != want {
			t.Errorf("%s = %q, want %q", rel, got, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "sys/devices/system/cpu/cpu250/topology")); err == nil {
		t.Error("offline cpu250 has a topology directory")
	}
	if d, err := fs.ReadDevice("sys/class/net/eth0/device"); err != nil {
		t.Errorf("eth0 device: %v", err)
	} else if len(d.MSIIRQs) != 65 {
		t.Errorf("eth0 has %d msi_irqs, want 65", len(d.MSIIRQs))
	}
	pc := strings.Split(strings.TrimSpace(readFile(t, dir, "sys/kernel/irq/155/per_cpu_count")), ",")
	if len(pc) != 256 {
		t.Errorf("per_cpu_count has %d entries, want one per possible CPU", len(pc))
	}

	var m struct{ Managed, Movable []int }
	if err := json.Unmarshal([]byte(readFile(t, dir, "irqpilot/managed.json")), &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Managed) != 129 || m.Managed[0] != 0 || m.Managed[1] != 26 || m.Managed[128] != 153 {
		t.Errorf("managed = %v", m.Managed)
	}
	if len(m.Managed)+len(m.Movable) != len(L.IRQs) {
		t.Errorf("managed.json lists %d IRQs, want %d", len(m.Managed)+len(m.Movable), len(L.IRQs))
	}

	softnet := strings.Split(strings.TrimSpace(readFile(t, dir, "proc/net/softnet_stat")), "\n")
	if len(softnet) != 250 {
		t.Fatalf("softnet_stat has %d rows", len(softnet))
	}
	if f := strings.Fields(softnet[249]); len(f) != 13 || f[12] != "000000f9" {
		t.Errorf("last softnet row %q", softnet[249])
	}
	head := strings.Fields(strings.SplitN(readFile(t, dir, "proc/softirqs"), "\n", 2)[0])
	if len(head) != 256 {
		t.Errorf("softirqs header has %d CPUs, want all 256 possible", len(head))
	}
	if n := strings.Count(readFile(t, dir, "proc/stat"), "\ncpu"); n != 250 {
		t.Errorf("proc/stat has %d cpuN lines", n)
	}
}

// A sample pair differs by exactly rate × elapsed.
func TestSamplePair(t *testing.T) {
	a, ca, err := ScratchDir()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ca)
	b, cb, err := ScratchDir()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cb)
	none := cpuset.Set{}
	spec := Spec{CPUs: 16, Nodes: 2, Packages: 2, Offline: &none, NVMeQueues: 8,
		NICs: []NICSpec{{Name: "eth0", Driver: "ice", Slot: 3, Node: 1, Queues: 4}}, Counts: Counts{Seed: 7}}
	L, err := SamplePair(a, b, spec, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	parse := func(dir string) map[int]kernel.InterruptLine {
		in, err := kernel.New(dir).Interrupts()
		if err != nil {
			t.Fatal(err)
		}
		m := map[int]kernel.InterruptLine{}
		for _, l := range in.Lines {
			m[l.IRQ] = l
		}
		return m
	}
	ia, ib := parse(a), parse(b)
	q := L.irq(L.NICs[0].QueueIRQs[0])
	cpu := q.Effective.Min()
	if cpu != 4 { // node 1 of 16 CPUs, 2 threads: 4-7,12-15
		t.Errorf("eth0 queue 0 on cpu %d, want 4", cpu)
	}
	if d := ib[q.Number].Counts[cpu] - ia[q.Number].Counts[cpu]; d != 10*q.Rate[cpu] || d == 0 {
		t.Errorf("irq %d delta %d, want %d", q.Number, d, 10*q.Rate[cpu])
	}
	stat := func(dir string) []uint64 {
		for _, l := range strings.Split(readFile(t, dir, "proc/stat"), "\n") {
			if f := strings.Fields(l); len(f) > 0 && f[0] == "cpu4" {
				var v []uint64
				for _, s := range f[1:] {
					n, _ := strconv.ParseUint(s, 10, 64)
					v = append(v, n)
				}
				return v
			}
		}
		t.Fatal("no cpu4 line")
		return nil
	}
	sa, sb := stat(a), stat(b)
	var total uint64
	for i := range sa {
		total += sb[i] - sa[i]
	}
	if total != 1000 { // USER_HZ 100 × 10 s
		t.Errorf("cpu4 advanced %d ticks in 10 s, want 1000", total)
	}
	if sb[6]-sa[6] == 0 {
		t.Error("cpu4 handles eth0 queue 0 but shows no softirq time")
	}
}

// ExampleBuild shows the generated large host's shape.
func ExampleBuild() {
	L, err := Build(DefaultSpec())
	if err != nil {
		panic(err)
	}
	fmt.Println("online:", L.Online, "offline:", L.Offline)
	fmt.Println("cpu 5 siblings:", L.CPUs[5].Siblings, "node:", L.CPUs[5].Node)
	fmt.Println("eth0 queue 0 irq:", L.NICs[0].QueueIRQs[0], "nvme0 queues:", len(L.NVMe.QueueIRQs))
	// Output:
	// online: 0-249 offline: 250-255
	// cpu 5 siblings: 5,133 node: 0
	// eth0 queue 0 irq: 155 nvme0 queues: 128
}
