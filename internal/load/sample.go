// Package load measures: it turns the kernel's interrupt and CPU-time
// counters into rates and per-CPU utilisation, busy threads and interrupt
// cost. It judges nothing: package diagnose finds what the measurement
// shows, package policy decides and predicts from it.
//
// Data flows one way: a Sampler reads raw counters (a Sample) through a
// kernel.FS; Rates turns two Samples into a Load. Rates is pure: no file
// system and no clock, so it is tested on captured pairs.
package load

import (
	"errors"
	"fmt"
	iofs "io/fs"
	"time"

	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/kernel/bpfcost"
)

// Clock sources for Sample.Clock.
const (
	// ClockMonotonic: the process's monotonic clock (live machine).
	ClockMonotonic = "monotonic"
	// ClockUptime: /proc/uptime of the sampled root (snapshots, test trees),
	// which is the only clock two captured trees share.
	ClockUptime = "uptime"
)

// Sample is one reading of the raw counters. Counts are as the kernel
// printed them; nothing is derived.
type Sample struct {
	// Time is the wall-clock time the sample was taken (for recordings).
	Time time.Time `json:"time"`
	// Clock is a monotonic position used to measure the interval between two
	// samples; ClockSource says which clock (samples from different sources
	// cannot be compared).
	Clock       time.Duration `json:"clock_ns"`
	ClockSource string        `json:"clock_source"`

	// CPUs are the per-CPU lines of /proc/stat (online CPUs), ascending id.
	CPUs []CPUTimes `json:"cpus"`
	// Interrupts is /proc/interrupts.
	Interrupts *kernel.Interrupts `json:"interrupts"`
	// Softirqs is /proc/softirqs (nil: unreadable).
	Softirqs *kernel.Softirqs `json:"softirqs,omitempty"`
	// Softnet is /proc/net/softnet_stat, one entry per CPU row (nil: unreadable).
	Softnet []SoftnetCounters `json:"softnet,omitempty"`
	// NetDevRx is each network device's received packets (/proc/net/dev,
	// this network namespace's devices; nil: unreadable).
	NetDevRx map[string]uint64 `json:"netdev_rx,omitempty"`
	// QueuePackets are the per-queue packet counters of this network
	// namespace's multi-queue hardware devices (kernel.NetQueuePackets;
	// nil: not read).
	QueuePackets map[string]kernel.QueuePackets `json:"queue_packets,omitempty"`
	// Tasks are every thread's CPU times (only when Sampler.Tasks is set).
	Tasks []TaskTimes `json:"tasks,omitempty"`
	// Unavailable names optional sources that could not be read, with the reason.
	Unavailable []string `json:"unavailable,omitempty"`
	// Cost is the eBPF collector's counters (nil: not measured; rates
	// then estimate interrupt time from counts, see cost.go).
	Cost *bpfcost.Snapshot `json:"cost,omitempty"`
}

// CPUTimes is one cpuN line of /proc/stat, in seconds (kernel.CPUStat).
// As in the kernel, User includes Guest and Nice includes GuestNice.
type CPUTimes struct {
	ID int `json:"id"`
	CPUTime
}

// SoftnetCounters is one row of /proc/net/softnet_stat. The kernel keeps
// these as 32-bit counters; they wrap.
type SoftnetCounters struct {
	CPU         int    `json:"cpu"`
	Processed   uint32 `json:"processed"`
	Dropped     uint32 `json:"dropped"`
	TimeSqueeze uint32 `json:"time_squeeze"`
	ReceivedRPS uint32 `json:"received_rps"`
	FlowLimit   uint32 `json:"flow_limit"`
	Backlog     uint32 `json:"backlog"` // a gauge (input_pkt_queue + process_queue), not a counter
	// Columns is how many columns the kernel printed (9, 10, 11 or 13).
	// With fewer than 13 there is no CPU column and CPU was derived from the
	// row's position among the online CPUs (see Sampler.Sample).
	Columns int `json:"columns"`
}

// Sampler reads counters from one kernel.FS.
type Sampler struct {
	// Tasks makes Sample read every thread's /proc/PID/task/TID/stat too
	// (for doctor's app-on-irq-cpu); costly on busy hosts, off by default.
	Tasks bool
	// TaskPIDs, when set and Tasks is not, names the processes whose
	// threads Sample reads (the application the agent places): a few
	// files instead of every thread on the machine.
	TaskPIDs func() []int
	// NetDevPID, when set, is a process whose network namespace's devices
	// are counted (/proc/PID/net/dev) instead of this process's: the
	// devices a plan steers may live in another namespace (bench's server
	// veth).
	NetDevPID int
	// Cost, when set, is read with every sample (the eBPF collector).
	Cost CostReader

	fs   *kernel.FS
	base time.Time // monotonic origin for ClockMonotonic
	now  func() time.Time
}

// NewSampler returns a sampler reading below fs's root. Every file it reads
// goes through fs, so a recording FS (capture) keeps all of them.
func NewSampler(fs *kernel.FS) *Sampler {
	return &Sampler{fs: fs, base: time.Now(), now: time.Now}
}

// Sample reads all counters once. /proc/stat and /proc/interrupts are
// required; softirqs and softnet_stat are optional (listed in Unavailable).
//
// On the live machine the interval clock is the process's monotonic clock;
// below any other root it is that root's /proc/uptime, so that two captured
// trees taken some seconds apart give the right interval.
func (s *Sampler) Sample() (*Sample, error) {
	now := s.now()
	smp := &Sample{Time: now}
	if s.fs.IsLive() {
		smp.Clock, smp.ClockSource = now.Sub(s.base), ClockMonotonic
	} else {
		up, err := s.uptime()
		if err != nil {
			return nil, err
		}
		smp.Clock, smp.ClockSource = up, ClockUptime
	}

	// /proc/stat: all columns, or fewer on old kernels (missing ones are 0).
	st, err := s.fs.StatCPUs()
	if err != nil {
		return nil, err
	}
	smp.CPUs = make([]CPUTimes, 0, len(st))
	for _, c := range st { // ascending id
		smp.CPUs = append(smp.CPUs, CPUTimes{ID: c.CPU, CPUTime: CPUTime{
			User: c.User, Nice: c.Nice, System: c.System, Idle: c.Idle, IOWait: c.IOWait,
			IRQ: c.IRQ, SoftIRQ: c.SoftIRQ, Steal: c.Steal, Guest: c.Guest, GuestNice: c.GuestNice,
		}})
	}
	if len(smp.CPUs) == 0 {
		return nil, errors.New("/proc/stat: no per-CPU lines")
	}

	if smp.Interrupts, err = s.fs.Interrupts(); err != nil {
		return nil, err
	}

	if smp.Softirqs, err = s.fs.Softirqs(); err != nil {
		smp.Unavailable = append(smp.Unavailable, unavailable("/proc/softirqs", err))
	}

	if rows, err := s.fs.Softnet(); err != nil {
		smp.Unavailable = append(smp.Unavailable, unavailable("/proc/net/softnet_stat", err))
	} else {
		online := make([]int, len(smp.CPUs))
		for i, c := range smp.CPUs {
			online[i] = c.ID
		}
		if smp.Softnet, err = softnetRows(rows, online); err != nil {
			smp.Unavailable = append(smp.Unavailable, err.Error())
		}
	}
	// Captures made before irqpilot read /proc/net/dev lack it: an absent
	// file is no news (the model then splits virtual devices' work evenly).
	if s.NetDevPID > 0 {
		smp.NetDevRx, err = s.fs.NetDevRxOf(s.NetDevPID)
	} else {
		smp.NetDevRx, err = s.fs.NetDevRx()
	}
	if err != nil && !errors.Is(err, iofs.ErrNotExist) {
		smp.Unavailable = append(smp.Unavailable, unavailable("/proc/net/dev", err))
	}
	// Captures made before irqpilot read the drivers' statistics lack them:
	// the model then splits a device's work over its queues by interrupts.
	if s.NetDevPID == 0 {
		smp.QueuePackets, err = s.fs.NetQueuePackets()
		if err != nil && !errors.Is(err, iofs.ErrNotExist) {
			smp.Unavailable = append(smp.Unavailable, "per-queue packets (ethtool -S): "+err.Error())
		}
	}
	if s.Cost != nil {
		if smp.Cost, err = s.Cost.Read(); err != nil {
			smp.Unavailable = append(smp.Unavailable, "eBPF cost maps: "+err.Error())
		}
	}
	if !s.Tasks && s.TaskPIDs != nil {
		if smp.Tasks, err = readTasksOf(s.fs, s.TaskPIDs()); err != nil {
			return nil, err
		}
	}
	if s.Tasks {
		if smp.Tasks, err = readTasks(s.fs); err != nil {
			smp.Unavailable = append(smp.Unavailable, "threads: "+err.Error())
		}
	}
	return smp, nil
}

func (s *Sampler) uptime() (time.Duration, error) {
	up, err := s.fs.Uptime()
	if errors.As(err, new(*iofs.PathError)) {
		return 0, fmt.Errorf("interval clock below %s: %w", s.fs.Root(), err)
	}
	return up, err
}

// unavailable says why an optional source is missing: a parse error names
// its file and line, a read error gets the file's name in front.
func unavailable(path string, err error) string {
	var pe *kernel.ParseError
	if errors.As(err, &pe) {
		return err.Error()
	}
	return path + ": " + err.Error()
}

// softnetRows converts parsed rows and fixes the CPU id of rows without an
// index column.
//
// Kernels before 5.10 print no CPU column. Their seq_file iterator
// (softnet_get_online in net/core/net-procfs.c) skips CPUs that are not
// online, so row k belongs to the k-th online CPU — not to CPU k (which is
// what prometheus/procfs assumes). We map rows onto the online CPUs of the
// same sample (/proc/stat lists exactly the online CPUs). If the counts
// disagree (a CPU changed state between the two reads) the rows cannot be
// attributed.
func softnetRows(rows []kernel.SoftnetStat, online []int) ([]SoftnetCounters, error) {
	out := make([]SoftnetCounters, len(rows))
	for i, r := range rows {
		c := SoftnetCounters{
			CPU: r.CPU, Processed: r.Processed, Dropped: r.Dropped,
			TimeSqueeze: r.TimeSqueeze, ReceivedRPS: r.ReceivedRPS,
			FlowLimit: r.FlowLimit, Backlog: r.Backlog, Columns: r.Columns,
		}
		if r.CPU < 0 {
			if len(rows) != len(online) {
				return nil, fmt.Errorf("/proc/net/softnet_stat: %d rows without a CPU column but %d online CPUs; rows cannot be attributed", len(rows), len(online))
			}
			c.CPU = online[i]
		}
		out[i] = c
	}
	return out, nil
}
