package report

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"

	"gonum.org/v1/plot"

	"github.com/irqpilot/irqpilot/internal/load"
)

// CostSeries is one CPU's interrupt time from one source ("hardirq",
// "NET_RX", …) over the run, in percent of that CPU.
type CostSeries struct {
	Host   string
	CPU    int
	Source string
	T      []float64 // seconds since the run start (interval ends)
	Pct    []float64
	Mean   float64
}

// CostSources says where the run's interrupt times come from: the number
// of intervals measured with eBPF and estimated from counts.
func (r *Run) CostSources() (measured, estimated int) {
	for _, l := range r.Loads {
		if l.CostSource == load.CostBPF {
			measured++
		} else {
			estimated++
		}
	}
	return measured, estimated
}

// CostSeries returns each CPU's hardirq time and softirq time by vector
// over the run.
func (r *Run) CostSeries() []CostSeries {
	type key struct {
		cpu int
		src string
	}
	idx := map[key]int{}
	var out []CostSeries
	var total float64
	add := func(t float64, cpu int, src string, v, w float64) {
		k := key{cpu, src}
		i, ok := idx[k]
		if !ok {
			i = len(out)
			idx[k] = i
			out = append(out, CostSeries{Host: r.Host, CPU: cpu, Source: src})
		}
		s := &out[i]
		s.T = append(s.T, t)
		s.Pct = append(s.Pct, 100*v)
		s.Mean += 100 * v * w
	}
	for _, l := range r.Loads {
		t := l.End.Sub(r.Start).Seconds()
		w := l.Interval.Seconds()
		total += w
		for _, c := range l.CPUs {
			add(t, c.ID, "hardirq", c.HardirqTime, w)
			names := make([]string, 0, len(c.SoftirqTime))
			for n := range c.SoftirqTime {
				names = append(names, n)
			}
			sort.Strings(names)
			for _, n := range names {
				add(t, c.ID, n, c.SoftirqTime[n], w)
			}
		}
	}
	for i := range out {
		out[i].Mean /= total
	}
	return out
}

// CostChart draws interrupt time per CPU by source over time: the busiest
// (CPU, source) pairs of all runs (at most o.TopIRQs), one line each, in
// percent of a CPU. The title says whether the times were measured with
// eBPF or estimated from counts.
func CostChart(runs []*Run, o Options) (*plot.Plot, error) {
	p, _, err := costChart(runs, o)
	return p, err
}

// costChart is CostChart and whether it has a line at all.
func costChart(runs []*Run, o Options) (*plot.Plot, bool, error) {
	o.defaults()
	p := linePlot("% of the CPU")

	var all []CostSeries
	measured, estimated := 0, 0
	for _, r := range runs {
		all = append(all, r.CostSeries()...)
		m, e := r.CostSources()
		measured += m
		estimated += e
	}
	how := "measured with eBPF"
	switch {
	case measured == 0:
		how = "estimated from counts"
	case estimated > 0:
		how = fmt.Sprintf("measured with eBPF in %d of %d intervals, else estimated from counts", measured, measured+estimated)
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].Mean > all[j].Mean })
	n := min(o.TopIRQs, len(all))
	for n > 0 && all[n-1].Mean <= 0 {
		n--
	}
	all = all[:n]
	// A line too small beside the busiest to be seen is not drawn, nor
	// named in the legend.
	peak := 0.0
	for _, s := range all {
		peak = math.Max(peak, slices.Max(append([]float64{0}, s.Pct...)))
	}
	small := 0
	all = slices.DeleteFunc(all, func(s CostSeries) bool {
		if !visible(slices.Max(append([]float64{0}, s.Pct...)), peak) {
			small++
			return true
		}
		return false
	})
	n = len(all)
	p.Title.Text = "Interrupt time per CPU by source (" + how + ")"
	if small > 0 {
		p.Title.Text += fmt.Sprintf("; %d under %.0f%% of the busiest not drawn", small, 100*visibleShare)
	}
	if n == 0 {
		p.Title.Text += " — none"
		return p, false, nil
	}
	err := addLines(p, n, func(i int) (string, []float64, []float64) {
		s := all[i]
		name := "cpu" + strconv.Itoa(s.CPU) + " " + s.Source
		if len(runs) > 1 {
			name = s.Host + ": " + name
		}
		return name, s.T, s.Pct
	})
	if err != nil {
		return nil, false, err
	}
	p.Y.Max = math.Max(p.Y.Max, 1)
	return p, true, nil
}
