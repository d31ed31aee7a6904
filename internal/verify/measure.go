package verify

import (
	"context"
	"math"
	"time"

	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/load"
	"github.com/irqpilot/irqpilot/internal/policy"
)

// Sampler takes one sample of the machine's counters (load.Sampler).
type Sampler interface {
	Sample() (*load.Sample, error)
}

// Measure samples for d — at the start, the middle and the end — and
// returns the window read as the cost model reads it, with the noise
// between its halves, and the whole window's load (for a prediction made
// from it).
func Measure(ctx context.Context, s Sampler, h *host.Host, d time.Duration) (Measurement, *load.Load, error) {
	var smp [3]*load.Sample
	for i := range smp {
		if i > 0 {
			select {
			case <-ctx.Done():
				return Measurement{}, nil, ctx.Err()
			case <-time.After(d / 2):
			}
		}
		var err error
		if smp[i], err = s.Sample(); err != nil {
			return Measurement{}, nil, err
		}
	}
	whole, err := load.Rates(smp[0], smp[2])
	if err != nil {
		return Measurement{}, nil, err
	}
	a, err := load.Rates(smp[0], smp[1])
	if err != nil {
		return Measurement{}, nil, err
	}
	b, err := load.Rates(smp[1], smp[2])
	if err != nil {
		return Measurement{}, nil, err
	}
	return FromLoads(h, whole, a, b), whole, nil
}

// FromLoads reads a window (whole) and its two halves (a, b) as the cost
// model does.
func FromLoads(h *host.Host, whole, a, b *load.Load) Measurement {
	m := Measurement{Seconds: whole.Interval.Seconds(), CPUs: figures(h, whole), Noise: map[int]Figures{},
		Traffic: policy.Traffic(whole), TrafficHalves: [2]float64{policy.Traffic(a), policy.Traffic(b)}, Source: whole.CostSource,
		QueueShares: whole.QueueShares()}
	fa, fb := figures(h, a), figures(h, b)
	for c, x := range fa {
		if y, ok := fb[c]; ok {
			m.Noise[c] = Figures{Busy: math.Abs(x.Busy - y.Busy), IRQ: math.Abs(x.IRQ - y.IRQ)}
		}
	}
	return m
}

func figures(h *host.Host, l *load.Load) map[int]Figures {
	out := map[int]Figures{}
	if o := policy.Observed(h, l); o != nil {
		for _, c := range o.CPUs {
			out[c.CPU] = Figures{Busy: c.BeforeBusy, IRQ: c.BeforeIRQ}
		}
	}
	return out
}
