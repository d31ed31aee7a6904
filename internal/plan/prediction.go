package plan

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"

	"github.com/irqpilot/irqpilot/internal/host"
)

// Prediction is what a plan is expected to do to each CPU, made by the cost
// model from one measurement of the machine: the measured before and the
// predicted after, per CPU. It travels with the plan (the plan file, plan
// --json) so that `apply --verify` and `verify` compare the same numbers the
// plan was chosen on with what is measured after the change. apply ignores
// it when absent and refuses a plan whose prediction names a CPU the host
// does not have.
type Prediction struct {
	// Source says how interrupt time was measured: "bpf" (the eBPF
	// collector) or "counts" (estimated from interrupt counts).
	Source string `yaml:"source" json:"source"`
	// IntervalMs is the length of the measurement the prediction rests on.
	IntervalMs int `yaml:"interval_ms" json:"interval_ms" plan:"ms"`
	// TrafficPPS is the packet rate measured (packets delivered to the
	// protocols per second, all CPUs): a verification whose workload no
	// longer runs at this rate cannot judge the prediction.
	TrafficPPS float64 `yaml:"traffic_pps" json:"traffic_pps"`
	// CPUs are the measured CPUs, ascending.
	CPUs []CPUPrediction `yaml:"cpus" json:"cpus"`
	// Queues are each multi-queue device's queues with the share of the
	// device's received packets each took while measured (the drivers'
	// per-queue counters; absent where they were not read). The model
	// keeps these shares, so a verification that finds the packets moved
	// between the queues cannot judge the prediction.
	Queues []QueueShare `yaml:"queues,omitempty" json:"queues,omitempty"`
	Line   int          `yaml:"-" json:"-"`
}

// QueueShare is one receive queue's share of its device's packets.
type QueueShare struct {
	Device  string  `yaml:"device" json:"device"`
	Queue   int     `yaml:"queue" json:"queue" plan:"queue"`
	RxShare float64 `yaml:"rx_share" json:"rx_share"`
	Line    int     `yaml:"-" json:"-"`
}

// QueueShares are the Queues by device and queue, nil when there are none.
func (p *Prediction) QueueShares() map[string]map[int]float64 {
	if p == nil || len(p.Queues) == 0 {
		return nil
	}
	out := map[string]map[int]float64{}
	for _, q := range p.Queues {
		if out[q.Device] == nil {
			out[q.Device] = map[int]float64{}
		}
		out[q.Device][q.Queue] = q.RxShare
	}
	return out
}

// SetQueueShares sets Queues from shares by device and queue, in device
// and queue order, each share rounded to a thousandth.
func (p *Prediction) SetQueueShares(shares map[string]map[int]float64) {
	p.Queues = nil
	for _, d := range slices.Sorted(maps.Keys(shares)) {
		for _, q := range slices.Sorted(maps.Keys(shares[d])) {
			p.Queues = append(p.Queues, QueueShare{Device: d, Queue: q, RxShare: math.Round(shares[d][q]*1000) / 1000})
		}
	}
}

// CPUPrediction is one CPU's measured and predicted load, percent of the CPU.
// Busy is everything but idle and iowait; IRQ is hardirq plus softirq time.
type CPUPrediction struct {
	CPU           int     `yaml:"cpu" json:"cpu" plan:"cpu"`
	BeforeBusy    float64 `yaml:"before_busy_pct" json:"before_busy_pct"`
	PredictedBusy float64 `yaml:"predicted_busy_pct" json:"predicted_busy_pct"`
	BeforeIRQ     float64 `yaml:"before_irq_pct" json:"before_irq_pct"`
	PredictedIRQ  float64 `yaml:"predicted_irq_pct" json:"predicted_irq_pct"`
	Line          int     `yaml:"-" json:"-"`
}

// CPU returns the prediction for cpu, nil when it has none.
func (p *Prediction) CPU(cpu int) *CPUPrediction {
	if p == nil {
		return nil
	}
	for i := range p.CPUs {
		if p.CPUs[i].CPU == cpu {
			return &p.CPUs[i]
		}
	}
	return nil
}

// Sort puts the CPUs in ascending order.
func (p *Prediction) Sort() {
	sort.Slice(p.CPUs, func(i, j int) bool { return p.CPUs[i].CPU < p.CPUs[j].CPU })
}

// maxPredictedPct bounds a percentage in a prediction: a CPU's measured time
// is at most 100 %, and a prediction may exceed it (work that would not fit)
// but not by orders of magnitude; a larger number is a corrupt file.
const maxPredictedPct = 1000

func (c checker) prediction(p *Prediction) {
	if p == nil {
		return
	}
	switch p.Source {
	case "bpf", "counts":
	default:
		c.add(p.Line, "prediction.source", "%q: want bpf or counts", p.Source)
	}
	if math.IsNaN(p.TrafficPPS) || p.TrafficPPS < 0 || p.TrafficPPS > 1e10 {
		c.add(p.Line, "prediction.traffic_pps", "%v is not a packet rate", p.TrafficPPS)
	}
	seen := map[int]int{}
	for i, e := range p.CPUs {
		f := fmt.Sprintf("prediction.cpus[%d]", i)
		if first, dup := seen[e.CPU]; dup {
			c.add(e.Line, f+".cpu", "CPU %d is also predicted at %s", e.CPU, where(first))
		}
		seen[e.CPU] = e.Line
		for _, v := range []struct {
			name string
			x    float64
		}{{"before_busy_pct", e.BeforeBusy}, {"predicted_busy_pct", e.PredictedBusy}, {"before_irq_pct", e.BeforeIRQ}, {"predicted_irq_pct", e.PredictedIRQ}} {
			if math.IsNaN(v.x) || v.x < 0 || v.x > maxPredictedPct {
				c.add(e.Line, f+"."+v.name, "%v is not a percentage between 0 and %d", v.x, maxPredictedPct)
			}
		}
		if e.BeforeIRQ > e.BeforeBusy+0.5 {
			c.add(e.Line, f+".before_irq_pct", "%.1f exceeds before_busy_pct %.1f (interrupt time is part of busy time)", e.BeforeIRQ, e.BeforeBusy)
		}
	}
	queues := map[string]int{}
	for i, q := range p.Queues {
		f := fmt.Sprintf("prediction.queues[%d]", i)
		if q.Device == "" {
			c.add(q.Line, f+".device", "missing (the network device whose queue this is)")
		}
		key := fmt.Sprintf("%s/%d", q.Device, q.Queue)
		if first, dup := queues[key]; dup {
			c.add(q.Line, f, "%s queue %d is also given at %s", q.Device, q.Queue, where(first))
		}
		queues[key] = q.Line
		if math.IsNaN(q.RxShare) || q.RxShare < 0 || q.RxShare > 1 {
			c.add(q.Line, f+".rx_share", "%v is not a share between 0 and 1", q.RxShare)
		}
	}
}

// checkPrediction refuses a prediction that contradicts the host: a CPU it
// does not have. The rest of the plan may be right, but a prediction made
// on another machine would be verified against the wrong numbers.
func checkPrediction(p *Prediction, h *host.Host, l *errList) {
	if p == nil || h == nil {
		return
	}
	have := map[int]bool{}
	for _, c := range h.CPUs {
		have[c.ID] = true
	}
	if len(have) == 0 {
		return
	}
	for i, e := range p.CPUs {
		if !have[e.CPU] {
			l.add(e.Line, fmt.Sprintf("prediction.cpus[%d].cpu", i), "CPU %d does not exist on this host: the prediction was made for another machine (make the plan again here, or remove the prediction)", e.CPU)
		}
	}
}
