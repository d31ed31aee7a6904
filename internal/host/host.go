// Package host is irqpilot's model of a machine's interrupt topology: CPUs
// and their caches and NUMA nodes, devices with their queues, the IRQ table
// with counts and placement, and the steering settings in force. Read builds
// it from a kernel.FS (the live machine, a snapshot or a test tree). Anything
// that cannot be read is listed in Unavailable with the reason, never guessed.
//
// The JSON field names are a documented, stable interface (docs/json.md).
package host

import (
	"strings"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/kernel"
)

// Host is everything irqpilot knows about one machine at one moment.
type Host struct {
	Hostname string `json:"hostname,omitempty"`
	Kernel   string `json:"kernel,omitempty"` // /proc/sys/kernel/osrelease

	Topology Topology `json:"-"`
	// CPUs is Topology.CPUs, exported at the top level of the JSON.
	CPUs []CPU `json:"cpus"`
	// IRQs are the numbered interrupts, ascending by number.
	IRQs []IRQ `json:"irqs"`
	// Summary holds the per-CPU summary rows of /proc/interrupts (LOC, RES,
	// CAL, TLB, NMI, IPIn …), by name.
	Summary []SummaryIRQ `json:"summary,omitempty"`
	NICs    []NIC        `json:"nics"`
	Block   []BlockDev   `json:"block"`
	// NAPI lists the NAPI instances of the NICs (netdev netlink family).
	NAPI []NAPI `json:"napi"`
	// NAPISet says whether the kernel's netdev netlink family offers
	// napi-set, the per-instance settings (probed; nil: unknown).
	NAPISet *bool `json:"napi_set,omitempty"`
	// RPSSockFlowEntries is /proc/sys/net/core/rps_sock_flow_entries (nil: unread).
	RPSSockFlowEntries *int `json:"rps_sock_flow_entries"`
	// BusyRead and BusyPoll are /proc/sys/net/core/busy_read and busy_poll,
	// µs (nil: unread).
	BusyRead   *int       `json:"busy_read"`
	BusyPoll   *int       `json:"busy_poll"`
	Irqbalance Irqbalance `json:"irqbalance"`
	// Features are what the kernel can do, each from a probe (nil: not
	// probed, as in a host built by hand; every kind is then assumed).
	Features []Feature `json:"features,omitempty"`
	// Unavailable lists what could not be read and why.
	Unavailable []Unavailable `json:"unavailable"`
}

// Topology describes the CPUs.
type Topology struct {
	CPUs     []CPU      `json:"cpus"`
	Possible cpuset.Set `json:"possible"`
	Online   cpuset.Set `json:"online"`
	Offline  cpuset.Set `json:"offline"`
	Isolated cpuset.Set `json:"isolated"`  // isolcpus= (domain isolation)
	NohzFull cpuset.Set `json:"nohz_full"` // nohz_full=
	// ManagedIRQIsolated holds CPUs named in isolcpus=managed_irq,… : the
	// kernel keeps managed IRQs off them where it can.
	ManagedIRQIsolated cpuset.Set `json:"managed_irq_isolated"`
	Nodes              []Node     `json:"nodes"`
}

// CPU is one logical CPU.
type CPU struct {
	ID       int        `json:"id"`
	Online   bool       `json:"online"`
	Core     int        `json:"core"`     // topology/core_id (-1 unknown)
	Die      int        `json:"die"`      // topology/die_id (-1 unknown)
	Package  int        `json:"package"`  // topology/physical_package_id (-1 unknown)
	Node     int        `json:"node"`     // NUMA node (-1 unknown)
	Siblings cpuset.Set `json:"siblings"` // SMT siblings including itself (thread_siblings_list)
	L2       cpuset.Set `json:"l2"`       // CPUs sharing this CPU's L2 (shared_cpu_list)
	L3       cpuset.Set `json:"l3"`       // CPUs sharing this CPU's L3
	Isolated bool       `json:"isolated"`
	NohzFull bool       `json:"nohz_full"`
}

// Node is a NUMA node.
type Node struct {
	ID   int        `json:"id"`
	CPUs cpuset.Set `json:"cpus"`
}

// Class says what kind of work an IRQ does.
type Class string

// IRQ classes.
const (
	ClassNetwork Class = "network"
	ClassStorage Class = "storage"
	ClassTimer   Class = "timer"
	ClassOther   Class = "other"
)

// Managed says whether the kernel manages an IRQ's affinity.
type Managed string

// Managed states. Unknown when we could neither probe nor read it (snapshot
// without our probe file, non-root).
const (
	ManagedYes     Managed = "yes"
	ManagedNo      Managed = "no"
	ManagedUnknown Managed = "unknown"
)

// IRQ is one numbered interrupt.
type IRQ struct {
	Number  int      `json:"irq"`
	Actions []string `json:"actions"`
	Chip    string   `json:"chip"`
	HWIRQ   string   `json:"hwirq,omitempty"`
	Trigger string   `json:"trigger,omitempty"`
	// Counts per online CPU id (JSON object keyed by decimal CPU id).
	Counts            map[int]uint64 `json:"counts"`
	Affinity          *cpuset.Set    `json:"affinity"`           // smp_affinity_list (nil: unread)
	EffectiveAffinity *cpuset.Set    `json:"effective_affinity"` // effective_affinity_list (nil: unread)
	Node              *int           `json:"node"`               // /proc/irq/N/node (nil: unread)
	Managed           Managed        `json:"managed"`
	Class             Class          `json:"class"`
	Device            string         `json:"device"` // "eth0", "nvme0", "vda" or "" when unknown
	// Queue is the device queue index the IRQ serves, nil when not a queue IRQ.
	Queue *int `json:"queue"`
	// QueueKind is "rx", "tx", "rxtx" (combined channel) or "" (block queues and others).
	QueueKind string `json:"queue_kind,omitempty"`
	// ByName is true when Class (network or storage) and Device come from
	// the action names alone: nothing in /sys ties the IRQ to the device
	// (a bare /proc/interrupts, or a driver whose vectors sysfs does not list).
	ByName bool `json:"by_name,omitempty"`
	// SharedWith are the other devices whose handlers share this line (a
	// legacy INTx line: "eth1, eth2"; another driver's handler by its
	// action name, "uhci_hcd:usb1"), sorted; moving it moves their
	// interrupts too. The IRQ is in each network device's NIC.IRQs.
	SharedWith []string `json:"shared_with,omitempty"`
}

// Total is the IRQ's count summed over CPUs.
func (q *IRQ) Total() uint64 {
	var t uint64
	for _, c := range q.Counts {
		t += c
	}
	return t
}

// Movable reports whether irqpilot may write this IRQ's affinity: not when
// the kernel manages it, and never a timer or another per-CPU IRQ, whose
// every CPU has its own (a plan that moved one would take a CPU's tick away).
func (q *IRQ) Movable() bool {
	return q.Managed != ManagedYes && q.Class != ClassTimer && !q.PerCPU()
}

// PerCPU reports whether the IRQ is per-CPU by its flow or chip: each CPU
// has its own instance ("percpu", "percpu_devid" flow; Xen's per-vCPU
// event channels), so it has no affinity to set.
func (q *IRQ) PerCPU() bool {
	switch q.Trigger {
	case "percpu", "percpu_devid":
		return true
	}
	return strings.HasPrefix(q.Chip, "xen-percpu")
}

// SummaryIRQ is a summary row of /proc/interrupts (NMI, LOC, RES, IPI0 …).
type SummaryIRQ struct {
	Name        string         `json:"name"`
	Description string         `json:"description,omitempty"`
	Counts      map[int]uint64 `json:"counts"`
}

// NIC is a network interface.
type NIC struct {
	Name      string     `json:"name"`
	Driver    string     `json:"driver"`
	BusAddr   string     `json:"bus_address"`    // PCI address, "" for virtual devices
	Node      int        `json:"node"`           // device NUMA node, -1 unknown/none
	LocalCPUs cpuset.Set `json:"local_cpus"`     // device/local_cpulist
	Virtual   bool       `json:"virtual"`        // no backing device (veth, lo, bridge…)
	Kind      string     `json:"kind,omitempty"` // "vlan", "veth", "bond", "bridge"… for virtual devices
	// Lower is the device this one is stacked on (VLAN → its parent), "" if none.
	Lower    string    `json:"lower,omitempty"`
	RxQueues []RxQueue `json:"rx_queues"`
	TxQueues []TxQueue `json:"tx_queues"`
	// IRQs serving this NIC (queue and non-queue), ascending.
	IRQs     []int     `json:"irqs"`
	Channels *Channels `json:"channels"` // ethtool -l (nil: unsupported or unread)
	Coalesce *Coalesce `json:"coalesce"` // ethtool -c (nil: unsupported or unread)
	// DefaultRoute: a default route (IPv4 or IPv6, main table) leaves
	// through this interface — normally the management link.
	DefaultRoute bool `json:"default_route,omitempty"`
	// Threaded, DeferHardIRQs and GROFlushTimeout (ns) are the device-wide
	// NAPI files sys/class/net/DEV/{threaded,napi_defer_hard_irqs,
	// gro_flush_timeout} (nil: absent or unreadable).
	Threaded        *uint64 `json:"threaded,omitempty"`
	DeferHardIRQs   *uint64 `json:"napi_defer_hard_irqs,omitempty"`
	GROFlushTimeout *uint64 `json:"gro_flush_timeout,omitempty"`
}

// RxQueue is a receive queue and its steering.
type RxQueue struct {
	Index      int         `json:"index"`
	RPSCPUs    *cpuset.Set `json:"rps_cpus"`     // nil: not readable (no CONFIG_RPS)
	RPSFlowCnt *int        `json:"rps_flow_cnt"` // nil: not readable
	IRQ        *int        `json:"irq"`          // nil: no dedicated IRQ known
}

// TxQueue is a transmit queue and its steering.
type TxQueue struct {
	Index   int         `json:"index"`
	XPSCPUs *cpuset.Set `json:"xps_cpus"` // nil: not readable
	IRQ     *int        `json:"irq"`
}

// Channels are the NIC's queue counts (ethtool -l).
type Channels struct {
	MaxRx       uint32 `json:"max_rx"`
	MaxTx       uint32 `json:"max_tx"`
	MaxOther    uint32 `json:"max_other"`
	MaxCombined uint32 `json:"max_combined"`
	Rx          uint32 `json:"rx"`
	Tx          uint32 `json:"tx"`
	Other       uint32 `json:"other"`
	Combined    uint32 `json:"combined"`
}

// Coalesce is the NIC's interrupt coalescing (ethtool -c), the fields drivers
// commonly support.
type Coalesce struct {
	RxUsecs       uint32 `json:"rx_usecs"`
	RxFrames      uint32 `json:"rx_frames"`
	TxUsecs       uint32 `json:"tx_usecs"`
	TxFrames      uint32 `json:"tx_frames"`
	AdaptiveRx    bool   `json:"adaptive_rx"`
	AdaptiveTx    bool   `json:"adaptive_tx"`
	RxUsecsIRQ    uint32 `json:"rx_usecs_irq"`
	RxFramesIRQ   uint32 `json:"rx_frames_irq"`
	TxUsecsIRQ    uint32 `json:"tx_usecs_irq"`
	TxFramesIRQ   uint32 `json:"tx_frames_irq"`
	RateSampleInt uint32 `json:"rate_sample_interval"`
}

// BlockDev is a block device with hardware queues (blk-mq).
type BlockDev struct {
	Name    string       `json:"name"`
	Driver  string       `json:"driver,omitempty"`
	BusAddr string       `json:"bus_address,omitempty"`
	Node    int          `json:"node"`
	Queues  []BlockQueue `json:"queues"`
	IRQs    []int        `json:"irqs"`
}

// BlockQueue is one blk-mq hardware queue: the CPUs that submit to it and the IRQ that completes it.
type BlockQueue struct {
	Index int        `json:"index"`
	CPUs  cpuset.Set `json:"cpus"` // mq/N/cpu_list
	IRQ   *int       `json:"irq"`
}

// Irqbalance describes the irqbalance daemon.
type Irqbalance struct {
	Running bool `json:"running"`
	PID     int  `json:"pid,omitempty"`
	// BannedCPUs from IRQBALANCE_BANNED_CPULIST / IRQBALANCE_BANNED_CPUS in
	// its environment or configuration file.
	BannedCPUs cpuset.Set `json:"banned_cpus"`
	// ConfigFile is the configuration file read, "" if none.
	ConfigFile string `json:"config_file,omitempty"`
}

// Unavailable records something that could not be read.
type Unavailable struct {
	What   string `json:"what"`   // "topology", "nic eth0 channels", …
	Path   string `json:"path"`   // the file or interface involved
	Reason string `json:"reason"` // the error
}

// Options tune Read.
type Options struct {
	// ProbeManaged lets Read find kernel-managed IRQs on the live machine by
	// writing each IRQ's current affinity back (the kernel refuses the write
	// for managed IRQs). Requires root; ignored for snapshots. Without it
	// Read writes nothing: the managed state comes from debugfs
	// (/sys/kernel/debug/irq/irqs/N, root), from the record in StateDir, or
	// is unknown.
	ProbeManaged bool
	// StateDir is apply's state directory, whose managed.json (written by
	// RecordManaged) lists the IRQs whose writes the kernel refused or
	// accepted in this boot. Read on the live machine only; "" skips it.
	StateDir string
}

func (h *Host) unavailable(what, path string, err error) {
	h.Unavailable = append(h.Unavailable, Unavailable{What: what, Path: path, Reason: err.Error()})
}

// IRQ returns the IRQ with the given number, or nil.
func (h *Host) IRQ(n int) *IRQ {
	for i := range h.IRQs {
		if h.IRQs[i].Number == n {
			return &h.IRQs[i]
		}
	}
	return nil
}

// NIC returns the NIC with the given name, or nil.
func (h *Host) NIC(name string) *NIC {
	for i := range h.NICs {
		if h.NICs[i].Name == name {
			return &h.NICs[i]
		}
	}
	return nil
}

// CPUNode is the NUMA node of CPU cpu, -1 when unknown.
func (h *Host) CPUNode(cpu int) int {
	for i := range h.CPUs {
		if h.CPUs[i].ID == cpu {
			return h.CPUs[i].Node
		}
	}
	return -1
}

// IRQNode is the NUMA node of the device IRQ q serves (a NIC's or a block
// device's, else the IRQ's own node), -1 when unknown.
func (h *Host) IRQNode(q *IRQ) int {
	if q == nil {
		return -1
	}
	if q.Device != "" {
		if n := h.NIC(q.Device); n != nil && n.Node >= 0 {
			return n.Node
		}
		for _, b := range h.Block {
			if b.Name == q.Device && b.Node >= 0 {
				return b.Node
			}
		}
	}
	if q.Node != nil && *q.Node >= 0 {
		return *q.Node
	}
	return -1
}

// Read builds the model of the machine behind fs. It fails only when nothing
// useful can be read; partial failures are recorded in Unavailable.
func Read(fs *kernel.FS, opts Options) (*Host, error) {
	h := &Host{}
	readIdentity(fs, h)
	readTopology(fs, h)
	h.CPUs = h.Topology.CPUs
	if err := readIRQs(fs, h, opts); err != nil {
		return nil, err
	}
	readNICs(fs, h)
	readDefaultRoute(fs, h)
	readDevNAPIFiles(fs, h)
	readNAPI(fs, h)
	readBlock(fs, h)
	classifyIRQs(h)
	readSteeringGlobals(fs, h)
	readIrqbalance(fs, h)
	if FeatureProbe != nil {
		h.Features = FeatureProbe(fs, h)
	}
	if h.Unavailable == nil {
		h.Unavailable = []Unavailable{}
	}
	if h.NAPI == nil {
		h.NAPI = []NAPI{}
	}
	return h, nil
}

func readIdentity(fs *kernel.FS, h *Host) {
	if s, err := fs.Hostname(); err == nil {
		h.Hostname = s
	}
	if s, err := fs.OSRelease(); err == nil {
		h.Kernel = s
	}
}

func readSteeringGlobals(fs *kernel.FS, h *Host) {
	n, err := fs.NetCore("rps_sock_flow_entries")
	if err != nil {
		h.unavailable("rps_sock_flow_entries", "/"+kernel.NetCorePath("rps_sock_flow_entries"), err)
		return
	}
	v := int(n)
	h.RPSSockFlowEntries = &v
	// Busy polling's sysctls: read so that a plan shows the value in force,
	// as apply's diff does, not "unknown".
	for _, s := range []struct {
		name string
		dst  **int
	}{{"busy_read", &h.BusyRead}, {"busy_poll", &h.BusyPoll}} {
		if n, err := fs.NetCore(s.name); err == nil {
			v := int(n)
			*s.dst = &v
		}
	}
}
