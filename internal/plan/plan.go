// Package plan describes desired interrupt placement and steering as data (a
// Plan), reads and writes it as versioned YAML or JSON with errors that name
// file, line and field, checks it against a host and resolves its selectors
// into concrete kernel settings. Making plans is package policy's job.
//
// A plan file (YAML; the same fields in JSON):
//
//	version: 1
//	policy: per-queue            # optional: what made it
//	host: db1                    # optional: the hostname it was made for
//	irqs:                        # select by irq, device+queue, or action glob
//	  - {irq: 38, cpus: "0", reason: eth0 queue 0 on CPU 0}
//	  - {device: eth0, queue: 1, cpus: "8", reason: …}
//	  - {action: "nvme0q*", cpus: 0-3, reason: …}
//	rx_queues:                   # queue omitted: every rx queue of the device
//	  - {device: eth0, queue: 0, rps_cpus: 0-7, rps_flow_cnt: 4096, reason: …}
//	tx_queues:
//	  - {device: eth0, queue: 0, xps_cpus: "0", reason: …}
//	rps_sock_flow_entries: {value: 32768, reason: …}
//	apps:                        # one of pid, comm, unit, cgroup
//	  - {comm: memcached, cpus: 1-7, reason: …}
//	irqbalance: {mode: ban, banned_cpus: 1-7, reason: …}   # leave | ban | stop
//	coalesce:
//	  - {device: eth0, rx_usecs: 50, adaptive_rx: false, reason: …}
//	napi:                        # id omitted: the device-wide sysfs values
//	  - {device: eth0, defer_hard_irqs: 2, gro_flush_timeout: 200000, reason: …}
//	  - {device: eth0, id: 8193, threaded: true, cpus: 3, reason: …}
//	busy_poll: {busy_read: 50, busy_poll: 50, reason: …}   # µs, machine-wide
//
// CPU sets are cpulists ("0-3,8", or a YAML list of numbers) or hex masks
// with an explicit 0x prefix. Counts must be powers of two (the kernel
// rounds rps_flow_cnt and rps_sock_flow_entries up and reports the rounded
// value).
//
// Everything here is pure: no file system (Load takes bytes; LoadFile is the
// one convenience that reads a file), no clock. Applying a plan is the job of
// package apply, which consumes the []Setting returned by Resolve.
package plan

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/irqpilot/irqpilot/internal/cpuset"
)

// Version is the plan file format version this package reads and writes.
const Version = 1

// Plan is the desired state of one machine. The YAML and JSON field names are
// the file format; Line and File fields are where an entry came from (for
// error messages) and are never serialised.
type Plan struct {
	Version int `yaml:"version" json:"version" plan:"version"`
	// Policy that produced the plan ("" for hand-written plans).
	Policy string `yaml:"policy,omitempty" json:"policy,omitempty"`
	// Host is the hostname the plan was made for (informational; optional).
	Host string `yaml:"host,omitempty" json:"host,omitempty"`
	// Why explains the policy's choices (auto explains which policy it chose).
	Why string `yaml:"why,omitempty" json:"why,omitempty"`
	// Notes are things the policy deliberately left alone, one line each
	// (kernel-managed IRQs, devices without queues…).
	Notes []string `yaml:"notes,omitempty" json:"notes,omitempty"`
	// AppCPUs is advice: the CPUs the policy leaves for the application when
	// no application selector was given (so nothing is pinned).
	AppCPUs *cpuset.Set `yaml:"app_cpus,omitempty" json:"app_cpus,omitempty"`

	IRQs               []IRQEntry       `yaml:"irqs,omitempty" json:"irqs,omitempty"`
	RxQueues           []RxQueueEntry   `yaml:"rx_queues,omitempty" json:"rx_queues,omitempty"`
	TxQueues           []TxQueueEntry   `yaml:"tx_queues,omitempty" json:"tx_queues,omitempty"`
	RPSSockFlowEntries *SockFlowEntry   `yaml:"rps_sock_flow_entries,omitempty" json:"rps_sock_flow_entries,omitempty"`
	Apps               []AppEntry       `yaml:"apps,omitempty" json:"apps,omitempty"`
	Irqbalance         *IrqbalanceEntry `yaml:"irqbalance,omitempty" json:"irqbalance,omitempty"`
	Coalesce           []CoalesceEntry  `yaml:"coalesce,omitempty" json:"coalesce,omitempty"`
	// NAPI and BusyPoll: interrupt mitigation.
	NAPI     []NAPIEntry    `yaml:"napi,omitempty" json:"napi,omitempty"`
	BusyPoll *BusyPollEntry `yaml:"busy_poll,omitempty" json:"busy_poll,omitempty"`

	// Prediction is the cost model's expectation of the plan on the
	// machine it was made for (prediction.go); apply --verify checks it.
	Prediction *Prediction `yaml:"prediction,omitempty" json:"prediction,omitempty"`

	// File is the file the plan was loaded from ("" for generated plans).
	File string `yaml:"-" json:"-"`
	// fieldLines is the line of every field Parse read ("irqs[2].cpus"), for
	// errors that name a field.
	fieldLines map[string]int
}

// Clone copies p so that entries added to, removed from or replaced in the
// copy's lists, notes and irqbalance entry leave p as it was. The entries'
// own pointers (CPU sets, queue numbers) and the prediction are shared.
func (p *Plan) Clone() *Plan {
	c := *p
	c.Notes = slices.Clone(p.Notes)
	c.IRQs = slices.Clone(p.IRQs)
	c.RxQueues = slices.Clone(p.RxQueues)
	c.TxQueues = slices.Clone(p.TxQueues)
	c.Apps = slices.Clone(p.Apps)
	c.Coalesce = slices.Clone(p.Coalesce)
	c.NAPI = slices.Clone(p.NAPI)
	if p.Irqbalance != nil {
		ib := *p.Irqbalance
		c.Irqbalance = &ib
	}
	return &c
}

// IRQEntry sets the affinity of the IRQs it selects. Exactly one selector:
// IRQ (a number), Device+Queue (the queue's IRQs, rx and tx), or Action (a
// glob, path.Match syntax, over the IRQ's action names as in /proc/interrupts).
type IRQEntry struct {
	IRQ    *int       `yaml:"irq,omitempty" json:"irq,omitempty" plan:"irq"`
	Device string     `yaml:"device,omitempty" json:"device,omitempty"`
	Queue  *int       `yaml:"queue,omitempty" json:"queue,omitempty" plan:"queue"`
	Action string     `yaml:"action,omitempty" json:"action,omitempty"`
	CPUs   cpuset.Set `yaml:"cpus" json:"cpus"`
	Reason string     `yaml:"reason" json:"reason"`
	Line   int        `yaml:"-" json:"-"`
}

// RxQueueEntry sets RPS on one rx queue of a device, or on all of them when
// Queue is nil. At least one of RPSCPUs and RPSFlowCnt is set; an empty
// RPSCPUs turns RPS off.
type RxQueueEntry struct {
	Device     string      `yaml:"device" json:"device"`
	Queue      *int        `yaml:"queue,omitempty" json:"queue,omitempty" plan:"queue"`
	RPSCPUs    *cpuset.Set `yaml:"rps_cpus,omitempty" json:"rps_cpus,omitempty" plan:"empty"`
	RPSFlowCnt *int        `yaml:"rps_flow_cnt,omitempty" json:"rps_flow_cnt,omitempty" plan:"flows"`
	Reason     string      `yaml:"reason" json:"reason"`
	Line       int         `yaml:"-" json:"-"`
}

// TxQueueEntry sets XPS on one tx queue of a device, or on all of them when
// Queue is nil. An empty XPSCPUs turns XPS off.
type TxQueueEntry struct {
	Device  string     `yaml:"device" json:"device"`
	Queue   *int       `yaml:"queue,omitempty" json:"queue,omitempty" plan:"queue"`
	XPSCPUs cpuset.Set `yaml:"xps_cpus" json:"xps_cpus" plan:"empty,required"`
	Reason  string     `yaml:"reason" json:"reason"`
	Line    int        `yaml:"-" json:"-"`
}

// missing says why a tx queue entry needs the key (plan:"required").
func (TxQueueEntry) missing(string) string {
	return `missing (a tx queue entry sets xps_cpus; "" turns XPS off)`
}

// SockFlowEntry sets net.core.rps_sock_flow_entries (0 turns RFS off).
type SockFlowEntry struct {
	Value  int    `yaml:"value" json:"value" plan:"sockflows"`
	Reason string `yaml:"reason" json:"reason"`
	Line   int    `yaml:"-" json:"-"`
}

// AppEntry pins every thread of the selected processes to CPUs. Exactly one
// selector: PID, Comm (process name as in /proc/PID/comm), Unit (a systemd
// unit) or Cgroup (a cgroup path below /sys/fs/cgroup).
type AppEntry struct {
	PID    int    `yaml:"pid,omitempty" json:"pid,omitempty" plan:"pid"`
	Comm   string `yaml:"comm,omitempty" json:"comm,omitempty"`
	Unit   string `yaml:"unit,omitempty" json:"unit,omitempty"`
	Cgroup string `yaml:"cgroup,omitempty" json:"cgroup,omitempty"`
	// All lets a comm selector match more than one process (each is
	// pinned); without it a name that matches several is refused.
	All    bool       `yaml:"all,omitempty" json:"all,omitempty"`
	CPUs   cpuset.Set `yaml:"cpus" json:"cpus"`
	Reason string     `yaml:"reason" json:"reason"`
	Line   int        `yaml:"-" json:"-"`
}

// Selector describes the entry's process selector, e.g. "comm memcached".
func (a AppEntry) Selector() string {
	switch {
	case a.PID != 0:
		return "pid " + itoa(a.PID)
	case a.Comm != "":
		return "comm " + a.Comm
	case a.Unit != "":
		return "unit " + a.Unit
	case a.Cgroup != "":
		return "cgroup " + a.Cgroup
	}
	return "(no selector)"
}

// ParseAppSelector reads "comm:NAME", "pid:N", "unit:NAME" or "cgroup:PATH"
// (a bare word is a comm).
func ParseAppSelector(s string) (AppEntry, error) {
	kind, val, ok := strings.Cut(s, ":")
	if !ok {
		kind, val = "comm", s
	}
	if val == "" {
		return AppEntry{}, fmt.Errorf("application selector %q: empty value", s)
	}
	switch kind {
	case "comm":
		return AppEntry{Comm: val}, nil
	case "pid":
		n, err := strconv.Atoi(val)
		if err != nil || n <= 0 {
			return AppEntry{}, fmt.Errorf("application selector %q: %q is not a process id", s, val)
		}
		return AppEntry{PID: n}, nil
	case "unit":
		return AppEntry{Unit: val}, nil
	case "cgroup":
		return AppEntry{Cgroup: val}, nil
	}
	return AppEntry{}, fmt.Errorf("application selector %q: want comm:NAME, pid:N, unit:NAME or cgroup:PATH", s)
}

// IrqbalanceMode says what to do with the irqbalance daemon.
type IrqbalanceMode string

// Irqbalance modes.
const (
	// IrqbalanceLeave: do not touch irqbalance.
	IrqbalanceLeave IrqbalanceMode = "leave"
	// IrqbalanceBan: write BannedCPUs to its banned-CPU list and reload it
	// (as cri-o does), so it keeps IRQs off those CPUs.
	IrqbalanceBan IrqbalanceMode = "ban"
	// IrqbalanceStop: stop the daemon so it cannot undo the placement.
	IrqbalanceStop IrqbalanceMode = "stop"
)

// IrqbalanceEntry is the plan's irqbalance handling.
type IrqbalanceEntry struct {
	Mode       IrqbalanceMode `yaml:"mode" json:"mode"`
	BannedCPUs *cpuset.Set    `yaml:"banned_cpus,omitempty" json:"banned_cpus,omitempty"` // mode ban only
	Reason     string         `yaml:"reason" json:"reason"`
	Line       int            `yaml:"-" json:"-"`
}

// CoalesceEntry sets a NIC's interrupt coalescing (ethtool -C). Nil fields
// are left as they are.
type CoalesceEntry struct {
	Device     string  `yaml:"device" json:"device"`
	RxUsecs    *uint32 `yaml:"rx_usecs,omitempty" json:"rx_usecs,omitempty"`
	RxFrames   *uint32 `yaml:"rx_frames,omitempty" json:"rx_frames,omitempty"`
	TxUsecs    *uint32 `yaml:"tx_usecs,omitempty" json:"tx_usecs,omitempty"`
	TxFrames   *uint32 `yaml:"tx_frames,omitempty" json:"tx_frames,omitempty"`
	AdaptiveRx *bool   `yaml:"adaptive_rx,omitempty" json:"adaptive_rx,omitempty"`
	AdaptiveTx *bool   `yaml:"adaptive_tx,omitempty" json:"adaptive_tx,omitempty"`
	Reason     string  `yaml:"reason" json:"reason"`
	Line       int     `yaml:"-" json:"-"`
}

// NAPIEntry sets interrupt mitigation of a device's NAPI instances: without
// ID the device-wide sysfs values (threaded, napi_defer_hard_irqs,
// gro_flush_timeout; CPUs places every NAPI thread of the device), with ID
// one instance through netlink napi-set. Nil fields are left as they are.
//
//	napi:
//	  - {device: eth0, defer_hard_irqs: 2, gro_flush_timeout: 200000, reason: …}
//	  - {device: eth0, id: 8193, threaded: true, irq_suspend_timeout: 20000000, reason: …}
//	  - {device: eth0, id: 8193, cpus: 3, reason: …}
type NAPIEntry struct {
	Device string  `yaml:"device" json:"device"`
	ID     *uint32 `yaml:"id,omitempty" json:"id,omitempty" plan:"napi-id"`
	// Threaded runs the instance(s) in a kernel thread of their own.
	Threaded *bool `yaml:"threaded,omitempty" json:"threaded,omitempty"`
	// DeferHardIRQs is how many empty polls keep the IRQ masked.
	DeferHardIRQs *uint32 `yaml:"defer_hard_irqs,omitempty" json:"defer_hard_irqs,omitempty" plan:"defer"`
	// GROFlushTimeout (ns) holds GRO batches and polls on a timer.
	GROFlushTimeout *uint64 `yaml:"gro_flush_timeout,omitempty" json:"gro_flush_timeout,omitempty" plan:"ns"`
	// IRQSuspendTimeout (ns, per instance only) keeps the IRQ suspended
	// while an application that opted in (SO_PREFER_BUSY_POLL, epoll
	// busy-poll parameters) keeps finding events.
	IRQSuspendTimeout *uint64 `yaml:"irq_suspend_timeout,omitempty" json:"irq_suspend_timeout,omitempty" plan:"ns"`
	// CPUs places the instance's kernel thread (threaded only).
	CPUs   *cpuset.Set `yaml:"cpus,omitempty" json:"cpus,omitempty"`
	Reason string      `yaml:"reason" json:"reason"`
	Line   int         `yaml:"-" json:"-"`
}

// BusyPollEntry sets the machine-wide busy-polling defaults (µs; 0 = off):
// net.core.busy_read for blocking reads, net.core.busy_poll for
// poll/select/epoll.
type BusyPollEntry struct {
	BusyRead *int   `yaml:"busy_read,omitempty" json:"busy_read,omitempty" plan:"usecs"`
	BusyPoll *int   `yaml:"busy_poll,omitempty" json:"busy_poll,omitempty" plan:"usecs"`
	Reason   string `yaml:"reason" json:"reason"`
	Line     int    `yaml:"-" json:"-"`
}

func ptr[T any](v T) *T { return &v }
