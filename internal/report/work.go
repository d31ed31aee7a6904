package report

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/palette"
	"gonum.org/v1/plot/palette/moreland"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/irqpilot/irqpilot/internal/kernel/bpfcost"
	"github.com/irqpilot/irqpilot/internal/load"
)

// The charts that answer "which CPU is overloaded by interrupts, and by
// which device": per-CPU softirq series by type, interrupts per CPU
// attributed to devices and queues, and a colour scale under every heat map.

// heatPalette is the heat maps' colour map (blue low, red high).
func heatPalette(top float64) palette.ColorMap {
	cm := moreland.SmoothBlueRed()
	cm.SetMin(0)
	cm.SetMax(top)
	return cm
}

// niceTop rounds v up to 1, 2 or 5 times a power of ten (at least min).
func niceTop(v, min float64) float64 {
	v = math.Max(v, min)
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

// RateOverTimeChart is a heat map of one per-CPU rate over time (a row per
// CPU, a column per interval), coloured from 0 to the highest rate seen, and
// returns that top for its colour scale.
func RateOverTimeChart(runs []*Run, title string, v func(*load.CPULoad) float64) (*plot.Plot, float64) {
	g, peak := cpuGrid(runs, func(cl *load.CPULoad) (float64, bool) { return math.Max(0, v(cl)), true })
	top := niceTop(peak, 10)
	return heatMap(g, title, top, heatPalette(top).Palette(64)), top
}

func yTicks(p *plot.Plot, g *grid) {
	step := int(math.Ceil(float64(g.nrows) / 40))
	var ticks []plot.Tick
	for r := 0; r < g.nrows; r++ {
		if (g.nrows-1-r)%step == 0 {
			ticks = append(ticks, plot.Tick{Value: float64(r), Label: g.label(r)})
		}
	}
	p.Y.Tick.Marker = plot.ConstantTicks(ticks)
	p.Y.Min, p.Y.Max = -0.5, float64(g.nrows)-0.5
}

// ScaleChart is the colour bar of a heat map: 0 … top in unit.
func ScaleChart(top float64, unit string) *plot.Plot {
	p := plot.New()
	sans(p)
	p.HideY()
	p.X.Label.Text = "colour scale: " + unit
	p.X.Tick.Marker = plot.TickerFunc(valueTicks)
	cb := &plotter.ColorBar{ColorMap: heatPalette(top)}
	p.Add(cb)
	return p
}

// deviceShare is one device's (or queue's) mean interrupt rate per CPU.
type deviceShare struct {
	label string
	rate  map[int]float64 // by row (host/CPU slot)
	total float64
}

// DeviceChart attributes each CPU's interrupts to the devices and queues
// whose IRQs fired there: one stacked bar per CPU (hosts side by side),
// mean interrupts per second over the run, a colour per device queue (the
// busiest 8; the rest as "other"). A device without IRQs (veth) counts by
// its NAPI polls on each CPU, where the recording measured them (eBPF).
func DeviceChart(runs []*Run, o Options) (*plot.Plot, error) {
	o.defaults()
	p := cpuPlot("Interrupts per CPU by device and queue (mean over the run)", "interrupts per second")
	p.Y.Tick.Marker = plot.TickerFunc(valueTicks)
	p.Legend.Padding = 1

	shares := map[string]*deviceShare{}
	polled := false
	var ticks []plot.Tick
	slot := 0
	for k, r := range runs {
		if k > 0 {
			slot++
		}
		base := slot
		var dur float64
		for _, l := range r.Loads {
			dur += l.Interval.Seconds()
		}
		pos := map[int]int{}
		for i, id := range r.CPUs {
			pos[id] = base + i
			ticks = append(ticks, plot.Tick{Value: float64(base + i), Label: strconv.Itoa(id)})
		}
		// add counts perCPU (events per second by CPU) for the source label
		// over an interval of weight w.
		add := func(label string, perCPU map[int]float64, w float64) {
			if len(runs) > 1 {
				label = r.Host + ": " + label
			}
			s := shares[label]
			if s == nil {
				s = &deviceShare{label: label, rate: map[int]float64{}}
				shares[label] = s
			}
			for cpu, rate := range perCPU {
				s.rate[pos[cpu]] += rate * w
				s.total += rate * w
			}
		}
		for _, l := range r.Loads {
			w := l.Interval.Seconds() / dur
			for _, q := range l.IRQs {
				add(r.deviceLabel(q), q.PerCPU, w)
			}
			for _, n := range l.NAPI {
				if label, ok := r.napiLabel(n); ok {
					polled = true
					add(label, n.PollsPerCPU, w)
				}
			}
		}
		slot += len(r.CPUs)
	}
	var list []*deviceShare
	for _, s := range shares {
		if s.total > 0 {
			list = append(list, s)
		}
	}
	sort.Slice(list, func(i, j int) bool {
		if list[i].total != list[j].total {
			return list[i].total > list[j].total
		}
		return list[i].label < list[j].label
	})
	if len(list) == 0 {
		p.Title.Text = "Interrupts per CPU by device — no interrupts fired"
		return p, nil
	}
	// The stacks' peak: a source whose largest bar is too thin beside it to
	// be seen is not named in the legend on its own but counted among the
	// others, as are those beyond the seventh.
	stack := map[int]float64{}
	var stackPeak float64
	for _, s := range list {
		for k, v := range s.rate {
			stack[k] += v
			stackPeak = math.Max(stackPeak, stack[k])
		}
	}
	most := func(s *deviceShare) (m float64) {
		for _, v := range s.rate {
			m = math.Max(m, v)
		}
		return m
	}
	hidden := ""
	keep := len(list)
	for keep > 1 && !visible(most(list[keep-1]), stackPeak) {
		keep--
	}
	if len(list) > 8 {
		keep = min(keep, 7)
	}
	if keep < len(list) {
		other := &deviceShare{label: fmt.Sprintf("%d other IRQ sources", len(list)-keep), rate: map[int]float64{}}
		for _, s := range list[keep:] {
			for k, v := range s.rate {
				other.rate[k] += v
			}
			other.total += s.total
		}
		list = list[:keep]
		if visible(most(other), stackPeak) {
			list = append(list, other)
		} else {
			hidden = fmt.Sprintf(" (%s too small to see: not drawn)", other.label)
		}
	}
	if polled {
		p.Title.Text = "Interrupts per CPU by device and queue, NAPI polls of devices without IRQs (mean over the run)"
		p.Y.Label.Text = "interrupts (polls) per second"
	}
	p.Title.Text += hidden
	barW := vg.Length(math.Min(40, math.Max(1, 0.75*float64(o.Width-1.3*vg.Inch)/float64(max(slot, 1)))))
	var below *plotter.BarChart
	var peak float64
	sum := make([]float64, slot)
	for i, s := range list {
		vals := make(plotter.Values, slot)
		for k := range vals {
			vals[k] = s.rate[k]
			sum[k] += s.rate[k]
			peak = math.Max(peak, sum[k])
		}
		bc, err := plotter.NewBarChart(vals, barW)
		if err != nil {
			return nil, err
		}
		bc.Color = seriesColour(i)
		bc.LineStyle.Width = 0
		if below != nil {
			bc.StackOn(below)
		}
		below = bc
		p.Add(bc)
		name := s.label
		if len(name) > 40 {
			name = name[:39] + "…"
		}
		p.Legend.Add(name, bc)
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	// Half a slot either side, so the first and last CPUs' bars are whole.
	p.X.Min, p.X.Max = -0.6, float64(slot)-0.4
	p.Y.Min, p.Y.Max = 0, legendRoom(peak, len(list))
	return p, nil
}

// napiLabel names a NAPI instance the device chart counts (ok) by its
// polls: one whose device has no IRQ — a veth, whose receive work runs
// where the sender's packets are handed over, and the per-CPU backlog
// ("" device: netif_rx, RPS) — since a device with IRQs is counted by
// them. Without an inventory every named device counts.
func (r *Run) napiLabel(n bpfcost.NAPIRate) (string, bool) {
	if n.Dev == "" {
		return "backlog NAPI polls (veth, loopback, RPS)", true
	}
	if r.inv != nil {
		if nic := r.inv.NIC(n.Dev); nic != nil && len(nic.IRQs) > 0 {
			return "", false
		}
	}
	return n.Dev + " NAPI polls", true
}

// deviceLabel names the source of an IRQ for people by its interface (or
// block device) and queue: "eth0 rx 0", "eth0 queue 3" (a combined
// channel), "nvme0 queue 2"; the IRQ's handler when it belongs to no known
// device.
func (r *Run) deviceLabel(q load.IRQRate) string {
	if d, ok := r.irqDevice(q.IRQ); ok {
		return d
	}
	if len(q.Actions) > 0 {
		return q.Actions[0] + " (irq " + strconv.Itoa(q.IRQ) + ")"
	}
	return "irq " + strconv.Itoa(q.IRQ)
}

// irqDevice is the interface or device and queue IRQ n serves, from the
// recording's inventory. A NIC that lists the IRQ names it, even where the
// IRQ's own device was taken from its handler's name ("virtio3").
func (r *Run) irqDevice(n int) (string, bool) {
	if r.inv == nil {
		return "", false
	}
	hi := r.inv.IRQ(n)
	if hi == nil {
		return "", false
	}
	d := hi.Device
	for i := range r.inv.NICs {
		if slices.Contains(r.inv.NICs[i].IRQs, n) {
			d = r.inv.NICs[i].Name
			break
		}
	}
	if d == "" {
		return "", false
	}
	if hi.Queue == nil {
		return d, true
	}
	kind := "queue"
	if hi.QueueKind == "rx" || hi.QueueKind == "tx" {
		kind = hi.QueueKind
	}
	return d + " " + kind + " " + strconv.Itoa(*hi.Queue), true
}

// MinIRQLineRate is the lowest mean rate (per second) of an IRQ drawn in
// the IRQ-rate chart: a panel of lines idling at 0–2/s says nothing.
const MinIRQLineRate = 10.0
