package load

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/kernel/bpfcost"
)

// Load is what happened between two samples: per-CPU utilisation in percent
// of that CPU's time, and event rates per second.
type Load struct {
	Start    time.Time     `json:"start"`
	End      time.Time     `json:"end"`
	Interval time.Duration `json:"interval_ns"`
	// CPUs present in both samples, ascending id.
	CPUs []CPULoad `json:"cpus"`
	// Absent lists CPUs present in only one of the two samples (went offline
	// or came online): no rates are reported for them.
	Absent []int `json:"absent_cpus"`
	// IRQs are the numbered interrupts present in both samples, ascending.
	IRQs []IRQRate `json:"irqs"`
	// Summary are the summary rows of /proc/interrupts (LOC, RES, CAL, TLB,
	// NMI, IPI0…), in file order. Rows printed with a single total (ERR,
	// MIS) have only Rate.
	Summary []IRQRate `json:"summary"`
	// AbsentIRQs names /proc/interrupts rows present in only one sample.
	AbsentIRQs []string `json:"absent_irqs,omitempty"`
	// SoftirqTypes are the softirq names in /proc/softirqs order.
	SoftirqTypes []string `json:"softirq_types"`
	// Softnet holds per-CPU softnet_stat rates (empty when unreadable).
	Softnet []SoftnetRate `json:"softnet"`
	// NetDevRx is each network device's received packets per second, for
	// the devices present in both samples (nil when /proc/net/dev was
	// unreadable). A counter that went backwards (the device re-created)
	// counts 0 and is listed in Resets.
	NetDevRx map[string]float64 `json:"netdev_rx_pps,omitempty"`
	// QueueRx and QueueTx are each multi-queue hardware device's packets
	// per second by queue (the drivers' statistics), for the queues
	// counted in both samples; nil when they were not read.
	QueueRx map[string]map[int]float64 `json:"queue_rx_pps,omitempty"`
	QueueTx map[string]map[int]float64 `json:"queue_tx_pps,omitempty"`
	// Tasks are threads that used at least MinTaskBusy % of a CPU, busiest
	// first (only when both samples read tasks).
	Tasks []TaskLoad `json:"tasks,omitempty"`
	// Consumers are the processes that serve network traffic (SetConsumers,
	// from the sockets of the live machine); nil when they were not read,
	// and then no remedy moves an application.
	Consumers []kernel.SocketOwner `json:"consumers,omitempty"`
	// Resets lists counters that went backwards (reset or re-created) or
	// wrapped. A reset counter contributes a rate of 0 for the interval; a
	// 32-bit wrap is recognised and counted (Wrapped).
	Resets []Reset `json:"resets,omitempty"`
	// CostSource says where the interrupt times (CPULoad.HardirqTime,
	// SoftirqTime, IRQRate.Time) come from: CostBPF (measured) or
	// CostCounts (estimated from counts).
	CostSource string `json:"cost_source"`
	// NAPI are the NAPI instances that polled (measured only).
	NAPI []bpfcost.NAPIRate `json:"napi,omitempty"`
}

// CPULoad is one CPU over the interval. The times (CPUTime) are percent of
// the CPU's ticks in the interval (as mpstat computes them: User excludes
// Guest, Nice excludes GuestNice), the rest are per second.
type CPULoad struct {
	ID int `json:"id"`
	CPUTime
	// NoTicks is set when the CPU's counters did not advance at all (the
	// interval was shorter than a tick, or the counters went backwards):
	// the percentages are then all 0.
	NoTicks bool `json:"no_ticks,omitempty"`

	// Softirqs per second by type ("NET_RX", "NET_TX", "BLOCK", …).
	Softirqs map[string]float64 `json:"softirqs"`
	NetRx    float64            `json:"net_rx"`
	NetTx    float64            `json:"net_tx"`
	Block    float64            `json:"block"`
	// Interrupts is the rate of numbered (device) IRQs handled on this CPU.
	Interrupts float64 `json:"interrupts"`
	// Reschedule and FunctionCall are the inter-processor interrupts received
	// (x86 RES and CAL; arm64 "Rescheduling"/"Function call" IPIs). RPS
	// kicks remote CPUs with function-call IPIs.
	Reschedule   float64 `json:"reschedule_ipi"`
	FunctionCall float64 `json:"function_call_ipi"`

	// HardirqTime is CPU seconds per second in hardirq handlers, and
	// SoftirqTime the same per softirq vector ("NET_RX"): measured or
	// estimated, see Load.CostSource.
	HardirqTime float64            `json:"hardirq_time"`
	SoftirqTime map[string]float64 `json:"softirq_time"`
}

// IPI is the rate of reschedule plus function-call IPIs.
func (c *CPULoad) IPI() float64 { return c.Reschedule + c.FunctionCall }

// IRQRate is one /proc/interrupts row over the interval.
type IRQRate struct {
	// IRQ is the number, -1 for summary rows.
	IRQ         int      `json:"irq"`
	Name        string   `json:"name"` // row label: "38", "RES", "IPI0"
	Actions     []string `json:"actions,omitempty"`
	Description string   `json:"description,omitempty"`
	// Rate is per second over all CPUs present in both samples.
	Rate float64 `json:"rate"`
	// PerCPU is the rate per CPU id (CPUs with a zero rate included).
	PerCPU map[int]float64 `json:"per_cpu,omitempty"`
	// CPUs are the CPUs where it fired during the interval.
	CPUs cpuset.Set `json:"cpus"`
	// Time is CPU seconds per second in its handlers, all CPUs, and
	// TimePerCPU by CPU (numbered IRQs; see Load.CostSource).
	Time       float64         `json:"time"`
	TimePerCPU map[int]float64 `json:"time_per_cpu,omitempty"`
}

// SoftnetRate is one CPU's /proc/net/softnet_stat over the interval.
type SoftnetRate struct {
	CPU         int     `json:"cpu"`
	Processed   float64 `json:"processed"`    // packets/s taken off the backlog/NAPI
	Dropped     float64 `json:"dropped"`      // packets/s dropped: backlog full (netdev_max_backlog)
	TimeSqueeze float64 `json:"time_squeeze"` // net_rx_action runs/s that ran out of budget or time
	ReceivedRPS float64 `json:"received_rps"` // RPS IPIs/s received
	FlowLimit   float64 `json:"flow_limit"`   // packets/s dropped by the flow limit
	Backlog     uint32  `json:"backlog"`      // queue length at the end (gauge)
}

// Reset records a counter that went backwards or wrapped.
type Reset struct {
	Source  string `json:"source"`  // "stat", "interrupts", "softirqs", "softnet", "net/dev"
	Counter string `json:"counter"` // "irq 36", "NET_RX", "processed", "idle"
	CPU     int    `json:"cpu"`
	Prev    uint64 `json:"prev"`
	Cur     uint64 `json:"cur"`
	// Wrapped: a 32-bit counter passed 2^32 and was counted modulo 2^32.
	// Otherwise the counter was reset and contributed 0 to the rate.
	Wrapped bool `json:"wrapped,omitempty"`
}

// CPU returns the CPU with the given id, or nil.
func (l *Load) CPU(id int) *CPULoad {
	i := sort.Search(len(l.CPUs), func(i int) bool { return l.CPUs[i].ID >= id })
	if i < len(l.CPUs) && l.CPUs[i].ID == id {
		return &l.CPUs[i]
	}
	return nil
}

// IRQ returns the rate of numbered IRQ n, or nil.
func (l *Load) IRQ(n int) *IRQRate {
	i := sort.Search(len(l.IRQs), func(i int) bool { return l.IRQs[i].IRQ >= n })
	if i < len(l.IRQs) && l.IRQs[i].IRQ == n {
		return &l.IRQs[i]
	}
	return nil
}

// SummaryRow returns the summary row with the given label ("RES"), or nil.
func (l *Load) SummaryRow(name string) *IRQRate {
	for i := range l.Summary {
		if l.Summary[i].Name == name {
			return &l.Summary[i]
		}
	}
	return nil
}

// SoftnetCPU returns the softnet rates of one CPU, or nil.
func (l *Load) SoftnetCPU(id int) *SoftnetRate {
	for i := range l.Softnet {
		if l.Softnet[i].CPU == id {
			return &l.Softnet[i]
		}
	}
	return nil
}

// ErrInterval is returned when two samples do not span a positive interval
// on the same clock.
var ErrInterval = errors.New("samples do not span a positive interval")

// Rates turns two samples of the same machine into a Load. It is pure.
//
// Counter rules. /proc/interrupts, /proc/softirqs and softnet_stat counts are
// 32-bit in the kernel (unsigned int / u32) and wrap. When a count is lower
// than before, the difference modulo 2^32 is taken as a wrap if it is below
// 2^31 (serial-number arithmetic, RFC 1982); otherwise the counter was reset
// (a device re-created its IRQ, a module was reloaded) and it contributes 0.
// /proc/stat times are 64-bit; a field that went backwards (idle/iowait can,
// with NO_HZ accounting) contributes 0. Either way the event is listed in
// Load.Resets. CPUs present in only one sample are in Load.Absent.
func Rates(prev, cur *Sample) (*Load, error) {
	if prev == nil || cur == nil {
		return nil, errors.New("rates: need two samples")
	}
	if prev.ClockSource != cur.ClockSource {
		return nil, fmt.Errorf("rates: samples use different clocks (%s, %s)", prev.ClockSource, cur.ClockSource)
	}
	dt := cur.Clock - prev.Clock
	if dt <= 0 {
		return nil, fmt.Errorf("rates: %w (%s clock went from %v to %v)", ErrInterval, cur.ClockSource, prev.Clock, cur.Clock)
	}
	sec := dt.Seconds()
	l := &Load{Start: prev.Time, End: cur.Time, Interval: dt}

	// CPUs in both samples.
	prevCPU := make(map[int]*CPUTimes, len(prev.CPUs))
	for i := range prev.CPUs {
		prevCPU[prev.CPUs[i].ID] = &prev.CPUs[i]
	}
	inCur := make(map[int]bool, len(cur.CPUs))
	for i := range cur.CPUs {
		c := &cur.CPUs[i]
		inCur[c.ID] = true
		p, ok := prevCPU[c.ID]
		if !ok {
			l.Absent = append(l.Absent, c.ID)
			continue
		}
		l.CPUs = append(l.CPUs, cpuPercent(p, c, &l.Resets))
	}
	for id := range prevCPU {
		if !inCur[id] {
			l.Absent = append(l.Absent, id)
		}
	}
	sort.Ints(l.Absent)
	sort.Slice(l.CPUs, func(i, j int) bool { return l.CPUs[i].ID < l.CPUs[j].ID })
	cpuIdx := make(map[int]int, len(l.CPUs))
	for i := range l.CPUs {
		cpuIdx[l.CPUs[i].ID] = i
		l.CPUs[i].Softirqs = map[string]float64{}
	}

	if prev.Interrupts != nil && cur.Interrupts != nil {
		interruptRates(l, prev.Interrupts, cur.Interrupts, cpuIdx, sec)
	}
	if prev.Softirqs != nil && cur.Softirqs != nil {
		softirqRates(l, prev.Softirqs, cur.Softirqs, cpuIdx, sec)
	}
	if prev.Softnet != nil && cur.Softnet != nil {
		softnetRates(l, prev.Softnet, cur.Softnet, cpuIdx, sec)
	}
	if prev.NetDevRx != nil && cur.NetDevRx != nil {
		l.NetDevRx = map[string]float64{}
		for dev, b := range cur.NetDevRx {
			a, ok := prev.NetDevRx[dev]
			switch {
			case !ok:
			case b < a:
				l.Resets = append(l.Resets, Reset{Source: "net/dev", Counter: dev + " rx_packets", CPU: -1, Prev: a, Cur: b})
				l.NetDevRx[dev] = 0
			default:
				l.NetDevRx[dev] = float64(b-a) / sec
			}
		}
	}
	if prev.QueuePackets != nil && cur.QueuePackets != nil {
		l.QueueRx, l.QueueTx = map[string]map[int]float64{}, map[string]map[int]float64{}
		for dev, b := range cur.QueuePackets {
			a, ok := prev.QueuePackets[dev]
			if !ok {
				continue
			}
			l.QueueRx[dev] = counterRates(l, dev+" rx queue", a.Rx, b.Rx, sec)
			l.QueueTx[dev] = counterRates(l, dev+" tx queue", a.Tx, b.Tx, sec)
		}
	}
	if prev.Tasks != nil && cur.Tasks != nil {
		taskRates(l, prev.Tasks, cur.Tasks, sec)
	}
	costRates(l, prev, cur)
	return l, nil
}

func cpuPercent(p, c *CPUTimes, resets *[]Reset) CPULoad {
	out := CPULoad{ID: c.ID}
	d := func(name string, a, b float64) float64 {
		// The kernel's counters are whole ticks: compared as such, float
		// noise is no counter going backwards.
		if ta, tb := kernel.Ticks(a), kernel.Ticks(b); tb < ta {
			*resets = append(*resets, Reset{Source: "stat", Counter: name, CPU: c.ID, Prev: ta, Cur: tb})
		}
		return max(b-a, 0)
	}
	spent := CPUTime{
		User:      d("user", p.User, c.User),
		Nice:      d("nice", p.Nice, c.Nice),
		System:    d("system", p.System, c.System),
		Idle:      d("idle", p.Idle, c.Idle),
		IOWait:    d("iowait", p.IOWait, c.IOWait),
		IRQ:       d("irq", p.IRQ, c.IRQ),
		SoftIRQ:   d("softirq", p.SoftIRQ, c.SoftIRQ),
		Steal:     d("steal", p.Steal, c.Steal),
		Guest:     d("guest", p.Guest, c.Guest),
		GuestNice: d("guest_nice", p.GuestNice, c.GuestNice),
	}
	var ok bool
	out.CPUTime, ok = spent.Percent()
	out.NoTicks = !ok
	return out
}

const (
	wrap32 = uint64(1) << 32
	half32 = uint64(1) << 31
)

// delta32 is cur-prev for a 32-bit kernel counter, with wrap and reset
// detection. ok=false means reset (delta 0); wrapped means a wrap was counted.
func delta32(prev, cur uint64) (d uint64, ok, wrapped bool) {
	if cur >= prev {
		return cur - prev, true, false
	}
	if prev < wrap32 && cur < wrap32 {
		if m := cur + wrap32 - prev; m < half32 {
			return m, true, true
		}
	}
	return 0, false, false
}

func noteDelta(l *Load, src, counter string, cpu int, prev, cur uint64) uint64 {
	d, ok, wrapped := delta32(prev, cur)
	if !ok || wrapped {
		l.Resets = append(l.Resets, Reset{Source: src, Counter: counter, CPU: cpu, Prev: prev, Cur: cur, Wrapped: wrapped})
	}
	return d
}

func interruptRates(l *Load, prev, cur *kernel.Interrupts, cpuIdx map[int]int, sec float64) {
	// Columns of each file for the CPUs in the Load.
	prevCol := make(map[int]int, len(prev.CPUs))
	for i, id := range prev.CPUs {
		prevCol[id] = i
	}
	type pair struct{ pc, cc, li int } // prev column, cur column, Load CPU index
	var cols []pair
	for cc, id := range cur.CPUs {
		pc, ok := prevCol[id]
		li, ok2 := cpuIdx[id]
		if ok && ok2 {
			cols = append(cols, pair{pc, cc, li})
		}
	}
	prevLine := make(map[string]*kernel.InterruptLine, len(prev.Lines))
	for i := range prev.Lines {
		prevLine[prev.Lines[i].Name] = &prev.Lines[i]
	}
	seen := make(map[string]bool, len(cur.Lines))
	for i := range cur.Lines {
		c := &cur.Lines[i]
		seen[c.Name] = true
		p, ok := prevLine[c.Name]
		if !ok {
			l.AbsentIRQs = append(l.AbsentIRQs, c.Name)
			continue
		}
		r := IRQRate{IRQ: c.IRQ, Name: c.Name, Actions: c.Actions, Description: c.Description}
		counter := c.Name
		if c.IRQ >= 0 {
			counter = "irq " + c.Name
		}
		if len(c.Counts) == 1 && len(p.Counts) == 1 && len(cur.CPUs) > 1 {
			// ERR/MIS: one system-wide total.
			r.Rate = float64(noteDelta(l, "interrupts", counter, -1, p.Counts[0], c.Counts[0])) / sec
			l.Summary = append(l.Summary, r)
			continue
		}
		r.PerCPU = make(map[int]float64, len(cols))
		var fired []int
		for _, k := range cols {
			if k.pc >= len(p.Counts) || k.cc >= len(c.Counts) {
				continue
			}
			id := l.CPUs[k.li].ID
			rate := float64(noteDelta(l, "interrupts", counter, id, p.Counts[k.pc], c.Counts[k.cc])) / sec
			r.PerCPU[id] = rate
			r.Rate += rate
			if rate > 0 {
				fired = append(fired, id)
			}
			cl := &l.CPUs[k.li]
			switch {
			case c.IRQ >= 0:
				cl.Interrupts += rate
			case isReschedule(c):
				cl.Reschedule += rate
			case isFunctionCall(c):
				cl.FunctionCall += rate
			}
		}
		r.CPUs = cpuset.Of(fired...)
		if c.IRQ >= 0 {
			l.IRQs = append(l.IRQs, r)
		} else {
			l.Summary = append(l.Summary, r)
		}
	}
	for i := range prev.Lines {
		if !seen[prev.Lines[i].Name] {
			l.AbsentIRQs = append(l.AbsentIRQs, prev.Lines[i].Name)
		}
	}
	sort.SliceStable(l.IRQs, func(i, j int) bool { return l.IRQs[i].IRQ < l.IRQs[j].IRQ })
}

// isReschedule: x86 "RES: … Rescheduling interrupts", arm64 "IPI0: … Rescheduling interrupts".
func isReschedule(c *kernel.InterruptLine) bool {
	return c.Name == "RES" || strings.HasPrefix(c.Description, "Rescheduling interrupts")
}

// isFunctionCall: x86 "CAL: … Function call interrupts", arm64 "IPI1: … Function call interrupts".
func isFunctionCall(c *kernel.InterruptLine) bool {
	return c.Name == "CAL" || strings.HasPrefix(c.Description, "Function call interrupts")
}

func softirqRates(l *Load, prev, cur *kernel.Softirqs, cpuIdx map[int]int, sec float64) {
	l.SoftirqTypes = append([]string(nil), cur.Types...)
	prevCol := make(map[int]int, len(prev.CPUs))
	for i, id := range prev.CPUs {
		prevCol[id] = i
	}
	prevType := make(map[string]int, len(prev.Types))
	for i, t := range prev.Types {
		prevType[t] = i
	}
	for t, name := range cur.Types {
		pt, ok := prevType[name]
		if !ok {
			continue
		}
		for cc, id := range cur.CPUs {
			pc, ok := prevCol[id]
			li, ok2 := cpuIdx[id]
			if !ok || !ok2 {
				continue
			}
			rate := float64(noteDelta(l, "softirqs", name, id, prev.Counts[pt][pc], cur.Counts[t][cc])) / sec
			cl := &l.CPUs[li]
			cl.Softirqs[name] = rate
			switch name {
			case "NET_RX":
				cl.NetRx = rate
			case "NET_TX":
				cl.NetTx = rate
			case "BLOCK":
				cl.Block = rate
			}
		}
	}
}

func softnetRates(l *Load, prev, cur []SoftnetCounters, cpuIdx map[int]int, sec float64) {
	byCPU := make(map[int]*SoftnetCounters, len(prev))
	for i := range prev {
		byCPU[prev[i].CPU] = &prev[i]
	}
	for i := range cur {
		c := &cur[i]
		p, ok := byCPU[c.CPU]
		if _, ok2 := cpuIdx[c.CPU]; !ok || !ok2 {
			continue
		}
		r := func(name string, a, b uint32) float64 {
			return float64(noteDelta(l, "softnet", name, c.CPU, uint64(a), uint64(b))) / sec
		}
		l.Softnet = append(l.Softnet, SoftnetRate{
			CPU:         c.CPU,
			Processed:   r("processed", p.Processed, c.Processed),
			Dropped:     r("dropped", p.Dropped, c.Dropped),
			TimeSqueeze: r("time_squeeze", p.TimeSqueeze, c.TimeSqueeze),
			ReceivedRPS: r("received_rps", p.ReceivedRPS, c.ReceivedRPS),
			FlowLimit:   r("flow_limit", p.FlowLimit, c.FlowLimit),
			Backlog:     c.Backlog,
		})
	}
	sort.Slice(l.Softnet, func(i, j int) bool { return l.Softnet[i].CPU < l.Softnet[j].CPU })
}
