package policy

import (
	"math"
	"sort"

	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/load"
	"github.com/irqpilot/irqpilot/internal/plan"
)

// Predict is the cost model's prediction for p on the measured load l: each
// measured CPU's busy and interrupt time as the model reads the
// measurement (before) and as it expects them after p. It is the one
// prediction irqpilot makes — plan, auto, doctor's fixes, the agent's
// adaptations and apply --verify all call it — and what verify compares
// with a measurement after the change, read the same way (Observed).
// appPIDs are the processes an app entry without a PID stands for.
func Predict(h *host.Host, l *load.Load, p *plan.Plan, appPIDs []int) *plan.Prediction {
	if l == nil || p == nil {
		return nil
	}
	m := newModel(h, l, steeredDevices(p))
	m.selected = appPIDs
	base, after := m.Predict(&plan.Plan{}), m.Predict(p)
	out := &plan.Prediction{Source: l.CostSource, IntervalMs: int(l.Interval.Milliseconds()), TrafficPPS: math.Round(Traffic(l))}
	if out.Source != load.CostBPF {
		out.Source = load.CostCounts
	}
	for c := range base.Busy {
		out.CPUs = append(out.CPUs, plan.CPUPrediction{
			CPU:           c,
			BeforeBusy:    pct(base.Busy[c]),
			PredictedBusy: pct(after.Busy[c]),
			BeforeIRQ:     pct(base.IRQ[c]),
			PredictedIRQ:  pct(after.IRQ[c]),
		})
	}
	sort.Slice(out.CPUs, func(i, j int) bool { return out.CPUs[i].CPU < out.CPUs[j].CPU })
	out.SetQueueShares(l.QueueShares())
	return out
}

// Observed is each measured CPU's busy and interrupt time in l, read the way
// Predict reads its measurement: verify compares these with a prediction.
// It is Predict's before of the empty plan.
func Observed(h *host.Host, l *load.Load) *plan.Prediction {
	return Predict(h, l, &plan.Plan{}, nil)
}

// Traffic is the packets delivered to the protocols per second, all CPUs
// (softnet processed: each packet counted once, on the CPU that hands it to
// the protocol, with or without RPS): the rate a prediction was made at.
func Traffic(l *load.Load) float64 {
	var t float64
	for _, s := range l.Softnet {
		t += s.Processed
	}
	return t
}

// pct rounds a percentage to 0.1 for the plan file, and keeps a
// prediction of slightly negative time (float subtraction) at 0.
func pct(v float64) float64 { return math.Max(0, math.Round(v*10)/10) }

// steeredDevices are the network devices a plan steers: their network
// softirq is what the model moves.
func steeredDevices(p *plan.Plan) []string {
	seen := map[string]bool{}
	var out []string
	add := func(d string) {
		if d != "" && !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	eachEntryDevice(p, add)
	sort.Strings(out)
	return out
}

// eachEntryDevice calls f with the device each of p's IRQ, rx queue, tx
// queue and NAPI entries names ("" where an entry names none), in that
// order.
func eachEntryDevice(p *plan.Plan, f func(dev string)) {
	for _, e := range p.IRQs {
		f(e.Device)
	}
	for _, e := range p.RxQueues {
		f(e.Device)
	}
	for _, e := range p.TxQueues {
		f(e.Device)
	}
	for _, e := range p.NAPI {
		f(e.Device)
	}
}

// attachPrediction gives a plan made from a measurement its prediction.
func attachPrediction(p *plan.Plan, h *host.Host, o Options) {
	if p == nil || o.Load == nil || o.Load.Load == nil {
		return
	}
	p.Prediction = Predict(h, o.Load.Load, p, selectedPIDs(o))
}
