// Package tui is the `irqpilot top` screen: a Frame (what one interval
// showed, with the fixed JSON names of `top --json`), a pure Render from
// a Model to a grid of styled cells, and a tcell loop that draws it.
package tui

import (
	"strings"
	"time"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/load"
)

// Frame is one interval of `irqpilot top`. Its JSON names are a stable
// interface (docs/json.md): cpus[] and irqs[] with the fields below.
type Frame struct {
	Host     string    `json:"host"`
	Time     time.Time `json:"time"`
	Interval float64   `json:"interval_seconds"`
	CPUs     []CPU     `json:"cpus"`
	IRQs     []IRQ     `json:"irqs"`
	// AbsentCPUs went offline or came online during the interval.
	AbsentCPUs []int `json:"absent_cpus,omitempty"`
	// CostSource is "bpf" when the interrupt times (CPU softirq_time and
	// hardirq_time, IRQ time) were measured with eBPF, "counts" when they
	// are estimated from counts.
	CostSource string `json:"cost_source"`
}

// CPU is one CPU over the interval: load's row (times in percent of the
// CPU, softirqs per second, interrupt time) and its softnet events.
type CPU struct {
	load.CPULoad
	// Softnet drops (backlog full) and time squeezes (budget ran out), per second.
	Dropped  float64 `json:"softnet_dropped"`
	Squeezed float64 `json:"softnet_squeezed"`
}

// IRQ is one numbered interrupt over the interval.
type IRQ struct {
	IRQ    int    `json:"irq"`
	Name   string `json:"name"`   // handler names from /proc/interrupts ("virtio0-input.0")
	Device string `json:"device"` // from the host model, "" unknown
	Queue  *int   `json:"queue"`  // device queue, nil when not a queue IRQ
	Class  string `json:"class,omitempty"`
	// Rate is interrupts per second over all CPUs.
	Rate float64 `json:"rate"`
	// CPUs is where it fired during the interval.
	CPUs cpuset.Set `json:"cpus"`
	// Time is CPU seconds per second in its handlers, all CPUs.
	Time float64 `json:"time"`
}

// NewFrame combines a Load with the host model (for IRQ devices and queues;
// h may be nil).
func NewFrame(hostname string, h *host.Host, l *load.Load) *Frame {
	f := &Frame{
		Host: hostname, Time: l.End, Interval: l.Interval.Seconds(),
		CPUs: make([]CPU, 0, len(l.CPUs)), IRQs: make([]IRQ, 0, len(l.IRQs)),
		AbsentCPUs: l.Absent, CostSource: l.CostSource,
	}
	for i := range l.CPUs {
		fc := CPU{CPULoad: l.CPUs[i]}
		if fc.SoftirqTime == nil {
			fc.SoftirqTime = map[string]float64{}
		}
		if sn := l.SoftnetCPU(fc.ID); sn != nil {
			fc.Dropped, fc.Squeezed = sn.Dropped, sn.TimeSqueeze
		}
		f.CPUs = append(f.CPUs, fc)
	}
	for i := range l.IRQs {
		r := &l.IRQs[i]
		q := IRQ{IRQ: r.IRQ, Name: strings.Join(r.Actions, ","), Rate: r.Rate, CPUs: r.CPUs, Time: r.Time}
		if h != nil {
			if hi := h.IRQ(r.IRQ); hi != nil {
				q.Device, q.Queue, q.Class = hi.Device, hi.Queue, string(hi.Class)
				if q.Name == "" {
					q.Name = strings.Join(hi.Actions, ",")
				}
			}
		}
		f.IRQs = append(f.IRQs, q)
	}
	return f
}
