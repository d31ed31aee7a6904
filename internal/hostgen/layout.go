// Package hostgen writes a realistic fake /proc + /sys tree for a large
// machine (by default 256 CPUs on 4 NUMA nodes with SMT, two 64-queue NICs,
// a 128-queue NVMe drive and some offline CPUs), following the layouts of the
// real kernel: the same file names, symlinks and formats as a Linux 6.x x86
// host. Tests use it for code paths the real captures in shared/fixtures do
// not reach (hundreds of CPUs with offline holes, wide hex masks, managed
// IRQs spread over nodes), and two trees generated with different
// Counts.Elapsed form a sample pair whose counters differ by known rates.
//
// Everything is deterministic for a given Spec: the Layout returned by Build
// says exactly what Generate writes, so tests can assert on it. hostgen does
// not import the host package (host's tests import hostgen).
package hostgen

import (
	"time"

	"github.com/irqpilot/irqpilot/internal/cpuset"
)

// Spec describes the machine to generate. The zero value of a field means
// "the default" (see DefaultSpec) except where noted.
type Spec struct {
	CPUs           int // possible (= present) CPUs
	Packages       int
	Nodes          int // a multiple of Packages (sub-NUMA clusters)
	ThreadsPerCore int // 1 = no SMT
	// Offline CPUs are present but not online. Nil means the default
	// (the last 6 CPUs when CPUs ≥ 64); use NoOffline for none.
	Offline    *cpuset.Set
	Isolated   cpuset.Set // isolcpus= and sys/devices/system/cpu/isolated
	NohzFull   cpuset.Set // nohz_full=
	ManagedIRQ bool       // isolcpus=managed_irq,domain,… instead of isolcpus=…
	// NICs; nil means the default two ice NICs, an empty non-nil slice none.
	NICs []NICSpec
	// NVMeQueues is the number of I/O queues of nvme0 (0: default 128;
	// negative: no NVMe device).
	NVMeQueues int
	NVMeNode   int
	// RPSCPUs and RPSFlowCnt are written to every rx queue (default: RPS off).
	RPSCPUs    cpuset.Set
	RPSFlowCnt int
	// RPSSockFlowEntries is /proc/sys/net/core/rps_sock_flow_entries.
	RPSSockFlowEntries int
	// SoftnetColumns is 13 (kernels 5.10–6.8, with the CPU index) or 15
	// (6.9+, with input_qlen/process_qlen). 0 means 13.
	SoftnetColumns int
	Hostname       string
	Kernel         string
	// Lacks names kernel files left out everywhere, to model a kernel
	// without a feature: "threaded" (before 5.12), "napi_defer_hard_irqs"
	// (before 5.10), "rps_sock_flow_entries", "rps_cpus" and
	// "rps_flow_cnt" (no CONFIG_RPS), "xps_cpus", "effective_affinity_list",
	// "busy_read" and "busy_poll" (no CONFIG_NET_RX_BUSY_POLL).
	Lacks  []string
	Counts Counts
}

// Counts sets the counters. Every counter is base + rate × Elapsed, where
// base and rate come from Seed; two trees with the same Seed and different
// Elapsed are a sample pair whose differences are exactly rate × ΔElapsed
// (for whole seconds; rates are per second).
type Counts struct {
	Seed    int64
	Elapsed time.Duration
}

// NICSpec describes one physical NIC with combined TxRx queues.
type NICSpec struct {
	Name   string // "eth0"
	Driver string // "ice"
	Slot   int    // PCI device number: 0000:00:<slot>.0
	Node   int
	Queues int
}

// NoOffline is an empty offline set for Spec.Offline.
var NoOffline = &cpuset.Set{}

// DefaultSpec is the generated large host: 256 CPUs, 2 packages, 4 nodes,
// 2 threads per core, CPUs 250-255 offline, eth0 (node 0) and eth1 (node 3)
// with 64 queues each, nvme0 (node 1) with 128 I/O queues.
func DefaultSpec() Spec {
	s := Spec{}
	s.fill()
	return s
}

func (s *Spec) fill() {
	if s.CPUs == 0 {
		s.CPUs = 256
	}
	if s.Packages == 0 {
		s.Packages = 2
	}
	if s.Nodes == 0 {
		s.Nodes = 4
	}
	if s.ThreadsPerCore == 0 {
		s.ThreadsPerCore = 2
	}
	if s.Offline == nil {
		off := cpuset.Set{}
		if s.CPUs >= 64 {
			off = cpuset.Range(s.CPUs-6, s.CPUs-1)
		}
		s.Offline = &off
	}
	if s.NICs == nil {
		s.NICs = []NICSpec{
			{Name: "eth0", Driver: "ice", Slot: 3, Node: 0, Queues: 64},
			{Name: "eth1", Driver: "ice", Slot: 5, Node: s.Nodes - 1, Queues: 64},
		}
	}
	if s.NVMeQueues == 0 {
		s.NVMeQueues = 128
		if s.NVMeNode == 0 && s.Nodes > 1 {
			s.NVMeNode = 1
		}
	}
	if s.SoftnetColumns == 0 {
		s.SoftnetColumns = 13
	}
	if s.Hostname == "" {
		s.Hostname = "bighost"
	}
	if s.Kernel == "" {
		s.Kernel = "6.1.0-generated"
	}
}

// Layout is what Generate writes, computed from a Spec.
type Layout struct {
	Spec     Spec
	Possible cpuset.Set
	Online   cpuset.Set
	Offline  cpuset.Set
	CPUs     []CPU        // every possible CPU, by id
	Nodes    []cpuset.Set // online CPUs per node (what nodeN/cpulist shows)
	IRQs     []IRQ        // ascending by number
	NICs     []NIC
	NVMe     *NVMe
	// Ticks are /proc/stat's per-CPU times (USER_HZ) base and per-second
	// rate, columns user nice system idle iowait irq softirq steal guest guest_nice.
	TicksBase, TicksRate map[int][10]uint64
	// Softirqs per row name (HI, TIMER, NET_TX, NET_RX, BLOCK, …) per CPU.
	SoftirqBase, SoftirqRate map[string]map[int]uint64
	// Summary rows of /proc/interrupts (LOC, RES, …) per CPU.
	SummaryBase, SummaryRate map[string]map[int]uint64
	// Softnet processed-packet counters per online CPU (printed mod 2^32).
	SoftnetBase, SoftnetRate map[int]uint64
}

// CPU is one generated CPU.
type CPU struct {
	ID, Core, Package, Node int
	Online                  bool
	Siblings                cpuset.Set // online SMT siblings (empty when offline)
	L3                      cpuset.Set // online CPUs of the package
}

// IRQ is one generated interrupt.
type IRQ struct {
	Number    int
	Chip      string // "IR-PCI-MSIX-0000:00:03.0", "IO-APIC"
	HWIRQ     int
	Trigger   string // "edge", "fasteoi"
	Actions   []string
	Affinity  cpuset.Set
	Effective cpuset.Set
	Node      int
	// Managed: a write of the IRQ's affinity is refused (managed NVMe I/O
	// queues, and the timer with IRQF_NOBALANCING).
	Managed bool
	Device  string // "eth0", "nvme0", "" for platform IRQs
	Queue   int    // queue index, -1 for non-queue IRQs
	// Base and Rate give the per-CPU count: Base + Rate × seconds.
	Base, Rate map[int]uint64
}

// NIC is one generated NIC.
type NIC struct {
	Spec    NICSpec
	PCI     string // "0000:00:03.0"
	Local   cpuset.Set
	MiscIRQ int
	// QueueIRQs[i] serves combined queue i (rx-i and tx-i).
	QueueIRQs []int
}

// NVMe is the generated NVMe controller and its namespace nvme0n1.
type NVMe struct {
	PCI      string
	Node     int
	AdminIRQ int
	// QueueIRQs[i] serves I/O queue i+1 (blk-mq hardware queue i).
	QueueIRQs []int
	QueueCPUs []cpuset.Set
}

// At is the counter value base + rate × elapsed (whole milliseconds).
func At(base, rate uint64, elapsed time.Duration) uint64 {
	return base + rate*uint64(elapsed/time.Millisecond)/1000
}

// uptime is how long the generated machine has run at Elapsed = 0; base
// counters are rate × uptime plus seeded noise.
const uptime = 3600
