package report

import (
	"fmt"
	"image/color"
	"math"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// The cluster view before and after a rollout: every node's CPUs on one
// axis, once for a window before the change and once for a window after
// it, and each CPU's share of its node's interrupt time in both windows;
// and where the data has holes (a node rebooting, its agent restarting,
// the Prometheus server stopped).

// Window is a span of wall-clock time, [From, To].
type Window struct {
	Name     string
	From, To time.Time
}

func (w Window) String() string {
	return fmt.Sprintf("%s %s–%s", w.Name, w.From.Format("15:04:05"), w.To.Format("15:04:05"))
}

// ParseWindow reads "FROM,TO" (RFC 3339 times or Unix seconds).
func ParseWindow(name, s string) (Window, error) {
	a, b, ok := strings.Cut(s, ",")
	if !ok {
		return Window{}, fmt.Errorf("--%s %q: want FROM,TO (RFC 3339 times or Unix seconds)", name, s)
	}
	w := Window{Name: name}
	for i, v := range []string{a, b} {
		t, err := parseTime(strings.TrimSpace(v))
		if err != nil {
			return Window{}, fmt.Errorf("--%s %q: %w", name, s, err)
		}
		if i == 0 {
			w.From = t
		} else {
			w.To = t
		}
	}
	if !w.To.After(w.From) {
		return Window{}, fmt.Errorf("--%s %q: ends before it starts", name, s)
	}
	return w, nil
}

func parseTime(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if sec, err := strconv.ParseFloat(s, 64); err == nil {
		return time.Unix(0, int64(sec*1e9)), nil
	}
	return time.Time{}, fmt.Errorf("%q is neither an RFC 3339 time nor Unix seconds", s)
}

// Within returns the run cut to the intervals that lie inside w (nil when
// none has data there).
func (r *Run) Within(w Window) *Run {
	c := *r
	c.Loads = nil
	data := false
	for _, l := range r.Loads {
		if !l.Start.Before(w.From) && !l.End.After(w.To) {
			c.Loads = append(c.Loads, l)
			data = data || len(l.CPUs) > 0
		}
	}
	if !data {
		return nil
	}
	c.Start = c.Loads[0].Start
	return &c
}

// Gap is a span in which a node has no CPU data.
type Gap struct {
	Host     string
	From, To time.Time
}

func (g Gap) String() string {
	return fmt.Sprintf("%s: no data from %s to %s (%s)", g.Host, g.From.Format(time.RFC3339), g.To.Format(time.RFC3339), g.To.Sub(g.From).Round(time.Second))
}

// Gaps lists, per run, the spans of consecutive intervals without CPU data
// (from the start of the first such interval to the end of the last),
// including those at the ends of the range.
func Gaps(runs []*Run) []Gap {
	var out []Gap
	for _, r := range runs {
		var open *Gap
		for _, l := range r.Loads {
			if len(l.CPUs) > 0 {
				if open != nil {
					out = append(out, *open)
					open = nil
				}
				continue
			}
			if open == nil {
				open = &Gap{Host: r.Host, From: l.Start}
			}
			open.To = l.End
		}
		if open != nil {
			out = append(out, *open)
		}
	}
	return out
}

// InterruptShare is, per CPU of the run, its share (%) of the node's
// interrupt time (irq + softirq) in the run's intervals; NaN for a CPU
// without data, all NaN when the node had no interrupt time.
func (r *Run) InterruptShare() []float64 {
	sum := map[int]float64{}
	total := 0.0
	for _, l := range r.Loads {
		for _, c := range l.CPUs {
			if c.NoTicks {
				continue
			}
			v := (c.IRQ + c.SoftIRQ) * l.Interval.Seconds()
			sum[c.ID] += v
			total += v
		}
	}
	out := make([]float64, len(r.CPUs))
	for i, id := range r.CPUs {
		v, ok := sum[id]
		if !ok || total <= 0 {
			out[i] = math.NaN()
			continue
		}
		out[i] = 100 * v / total
	}
	return out
}

var (
	colBefore = color.RGBA{R: 0x9e, G: 0x9e, B: 0x9e, A: 0xff} // grey
	colAfter  = color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff} // purple
)

// RolloutCharts are the cluster view in the window before a rollout and in
// the window after it (ClusterChart of each), each CPU's share of its
// node's interrupt time in both, then FleetCharts' charts over the whole
// range. A node without data in a window is left out of that window's
// cluster view and named in its title.
func RolloutCharts(runs []*Run, before, after Window, o Options) ([]Chart, error) {
	o.defaults()
	var out []Chart
	for _, w := range []Window{before, after} {
		var in []*Run
		var missing []string
		for _, r := range runs {
			if c := r.Within(w); c != nil {
				in = append(in, c)
			} else {
				missing = append(missing, r.Host)
			}
		}
		if len(in) == 0 {
			return nil, fmt.Errorf("no node has data in the window %s", w)
		}
		p, err := ClusterChart(in, o)
		if err != nil {
			return nil, err
		}
		p.Title.Text = fmt.Sprintf("Per-core utilisation, mean over %s (%s)", w.Name, w.String()[len(w.Name)+1:])
		if len(missing) > 0 {
			p.Title.Text += "; no data: " + strings.Join(missing, ", ")
		}
		out = append(out, Chart{Name: "cluster-" + w.Name, Title: p.Title.Text, Plot: p, Height: 4.2 * vg.Inch})
	}
	share, err := ShareChart(runs, before, after, o)
	if err != nil {
		return nil, err
	}
	rest, none, err := fleetCharts(runs, o)
	if err != nil {
		return nil, err
	}
	if none != "" { // the fleet's cluster chart that says so is not shown here
		share.Title.Text += "\n(" + none + ")"
	}
	out = append(out, Chart{Name: "interrupt-share", Title: share.Title.Text, Plot: share, Height: 4 * vg.Inch})
	return append(out, rest[1:]...), nil
}

// ShareChart draws, for every node's CPUs on one axis, each CPU's share of
// its node's interrupt time before (grey) and after (purple) the rollout,
// with the even share (100 % / CPUs) of each node as a dashed line.
func ShareChart(runs []*Run, before, after Window, o Options) (*plot.Plot, error) {
	o.defaults()
	p := plot.New()
	sans(p)
	p.Title.Text = "Each CPU's share of its node's interrupt time (irq + softirq), " + before.Name + " and " + after.Name
	p.Y.Label.Text = "% of the node's interrupt time"
	p.X.Label.Text = "CPU"
	p.Legend.Top, p.Legend.Left = true, false
	barW := vg.Length(math.Min(30, math.Max(1, 0.35*float64(o.Width-1.3*vg.Inch)/float64(cpuSlots(runs)))))
	var ticks []plot.Tick
	var labels plotter.XYLabels
	x := 0.0
	for k, r := range runs {
		x += min(float64(k), 1) // a gap before every host but the first
		for j, w := range []Window{before, after} {
			vals := make(plotter.Values, len(r.CPUs))
			if c := r.Within(w); c != nil {
				for i, v := range c.InterruptShare() {
					if !math.IsNaN(v) {
						vals[i] = v
					}
				}
			}
			bc, err := plotter.NewBarChart(vals, barW)
			if err != nil {
				return nil, fmt.Errorf("share chart %s: %w", r.Host, err)
			}
			bc.XMin = x
			bc.LineStyle.Width = 0
			bc.Color = colBefore
			bc.Offset = -barW / 2
			if j == 1 {
				bc.Color = colAfter
				bc.Offset = barW / 2
			}
			p.Add(bc)
			if k == 0 {
				p.Legend.Add(w.String(), bc)
			}
		}
		even := 100 / float64(len(r.CPUs))
		ln, err := plotter.NewLine(plotter.XYs{{X: x - 0.45, Y: even}, {X: x + float64(len(r.CPUs)) - 0.55, Y: even}})
		if err != nil {
			return nil, err
		}
		ln.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		ln.Color = color.Black
		p.Add(ln)
		if k == 0 {
			p.Legend.Add("even share", ln)
		}
		for i, id := range r.CPUs {
			ticks = append(ticks, plot.Tick{Value: x + float64(i), Label: strconv.Itoa(id)})
		}
		labels.XYs = append(labels.XYs, plotter.XY{X: x + float64(len(r.CPUs)-1)/2, Y: 103})
		labels.Labels = append(labels.Labels, r.Host)
		x += float64(len(r.CPUs))
	}
	p.Y.Min, p.Y.Max = 0, 150
	p.Y.Tick.Marker = plot.ConstantTicks(percentTicks())
	return p, hostAxis(p, labels, ticks, x)
}

// cpuSlots is how many bar positions every host's CPUs take on one axis,
// with an empty one between hosts.
func cpuSlots(runs []*Run) int {
	slots := 0
	for i, r := range runs {
		if i > 0 {
			slots++ // gap
		}
		slots += len(r.CPUs)
	}
	return slots
}

// hostAxis finishes a chart with every host's CPUs on one axis (the
// cluster view, the share chart): the host names above their CPUs, the
// CPU ticks, the x range up to x, and horizontal grid lines.
func hostAxis(p *plot.Plot, labels plotter.XYLabels, ticks []plot.Tick, x float64) error {
	lb, err := plotter.NewLabels(labels)
	if err != nil {
		return err
	}
	for i := range lb.TextStyle {
		lb.TextStyle[i].Font.Variant = "Sans"
		lb.TextStyle[i].Font.Size = 11
		lb.TextStyle[i].XAlign = draw.XCenter
	}
	p.Add(lb)
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	p.X.Min, p.X.Max = -0.7, x-0.3
	g := plotter.NewGrid()
	g.Vertical.Color = nil
	p.Add(g)
	return nil
}
