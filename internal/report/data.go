// Package report draws every chart of irqpilot with gonum.org/v1/plot:
// recordings' (internal/record) — per-core utilisation across a cluster of
// hosts, per-CPU load over time, per-IRQ rates over time, interrupts per CPU
// by device — written as PNG, SVG or a self-contained HTML page (images
// inlined as data: URIs, no network); a bench's and a sweep's results
// (internal/bench); and the simulator's curves (internal/sim).
package report

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"time"

	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/load"
	"github.com/irqpilot/irqpilot/internal/record"
)

// Run is one host's recording turned into per-interval loads.
type Run struct {
	Host  string
	File  string
	Start time.Time
	// Loads are the rates between consecutive samples, in order.
	Loads []*load.Load
	// CPUs are the CPU ids seen in any interval, ascending.
	CPUs []int
	// Truncated: the recording ended in a partial line (recorder killed).
	Truncated bool
	// Skipped counts sample pairs that gave no rates (clock went backwards,
	// samples of different clocks), with the first reason.
	Skipped    int
	SkipReason string

	inv *host.Host
}

// NewRun computes the loads of a recording.
func NewRun(rec *record.Recording) (*Run, error) {
	r := &Run{Host: rec.Host(), File: rec.Name, Start: rec.Header.Start, Truncated: rec.Truncated, inv: rec.Header.Inventory}
	if len(rec.Samples) < 2 {
		return nil, fmt.Errorf("%s: %d sample(s); a report needs at least two", rec.Name, len(rec.Samples))
	}
	if r.Start.IsZero() {
		r.Start = rec.Samples[0].Time
	}
	seen := map[int]bool{}
	for i := 1; i < len(rec.Samples); i++ {
		l, err := load.Rates(rec.Samples[i-1], rec.Samples[i])
		if err != nil {
			if r.Skipped == 0 {
				r.SkipReason = fmt.Sprintf("samples %d-%d: %v", i, i+1, err)
			}
			r.Skipped++
			continue
		}
		r.Loads = append(r.Loads, l)
		for _, c := range l.CPUs {
			if !seen[c.ID] {
				seen[c.ID] = true
				r.CPUs = append(r.CPUs, c.ID)
			}
		}
	}
	if len(r.Loads) == 0 {
		return nil, fmt.Errorf("%s: no usable pair of samples (%s)", rec.Name, r.SkipReason)
	}
	sort.Ints(r.CPUs)
	return r, nil
}

// Duration is the time covered by the loads.
func (r *Run) Duration() time.Duration {
	return r.Loads[len(r.Loads)-1].End.Sub(r.Loads[0].Start)
}

// CPUMean is one CPU's utilisation averaged over the run, weighted by
// interval length.
type CPUMean struct {
	ID int
	load.CPUTime
}

// Others is the percentage neither user, system, irq, softirq nor idle:
// nice, iowait and steal.
func (m *CPUMean) Others() float64 { return m.Nice + m.IOWait + m.Steal }

// MeanCPUs averages each CPU over the run.
func (r *Run) MeanCPUs() []CPUMean {
	acc := map[int]*load.CPUTime{}
	wsum := map[int]float64{}
	for _, l := range r.Loads {
		w := l.Interval.Seconds()
		for _, c := range l.CPUs {
			if c.NoTicks {
				continue
			}
			m := acc[c.ID]
			if m == nil {
				m = &load.CPUTime{}
				acc[c.ID] = m
			}
			m.AddScaled(w, c.CPUTime)
			wsum[c.ID] += w
		}
	}
	out := make([]CPUMean, 0, len(r.CPUs))
	for _, id := range r.CPUs {
		m := acc[id]
		if m == nil {
			out = append(out, CPUMean{ID: id, CPUTime: load.CPUTime{Idle: math.NaN()}})
			continue
		}
		out = append(out, CPUMean{ID: id, CPUTime: m.Scaled(wsum[id])})
	}
	return out
}

// IRQSeries is one IRQ's rate over the run.
type IRQSeries struct {
	Host  string
	IRQ   int
	Label string    // "vda queue 0 (irq 36)"
	T     []float64 // seconds since the run start (interval ends)
	Rate  []float64 // per second
	Mean  float64
}

// IRQSeries returns each numbered IRQ's rate over time.
func (r *Run) IRQSeries() []IRQSeries {
	idx := map[int]int{}
	var out []IRQSeries
	var total float64
	for _, l := range r.Loads {
		t := l.End.Sub(r.Start).Seconds()
		total += l.Interval.Seconds()
		for _, q := range l.IRQs {
			i, ok := idx[q.IRQ]
			if !ok {
				i = len(out)
				idx[q.IRQ] = i
				out = append(out, IRQSeries{Host: r.Host, IRQ: q.IRQ, Label: r.irqLabel(q)})
			}
			s := &out[i]
			s.T = append(s.T, t)
			s.Rate = append(s.Rate, q.Rate)
			s.Mean += q.Rate * l.Interval.Seconds()
		}
	}
	for i := range out {
		out[i].Mean /= total
	}
	return out
}

// irqLabel names an IRQ's line: its interface or device and queue with
// the IRQ's number ("eth0 rx 0 (irq 38)"), as the device chart names it.
func (r *Run) irqLabel(q load.IRQRate) string {
	if d, ok := r.irqDevice(q.IRQ); ok {
		return d + " (irq " + strconv.Itoa(q.IRQ) + ")"
	}
	return r.deviceLabel(q)
}
