package report

import (
	"bytes"
	"flag"
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/irqpilot/irqpilot/internal/bench"
	"github.com/irqpilot/irqpilot/internal/golden"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/load"
	"github.com/irqpilot/irqpilot/internal/sim"
)

var updateShape = flag.Bool("update-golden", false, "rewrite testdata/golden/*.txt from the charts' current structure")

// shape is a chart's structure, for a golden file: its title, its axes'
// ranges and every text it draws (tick labels, legend names), as the SVG
// writer renders them.
func shape(t *testing.T, p *plot.Plot) string {
	t.Helper()
	c := vgsvg.New(8*vg.Inch, 4*vg.Inch)
	drawPlot(p, draw.New(c))
	var b bytes.Buffer
	if _, err := c.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	texts := svgTexts(b.String())
	r := func(v float64) string { return strings.TrimSuffix(fmt.Sprintf("%.4g", v), ".0") }
	return fmt.Sprintf("title: %s\nx: %s … %s\ny: %s … %s\ntexts:\n  %s\n", p.Title.Text,
		r(p.X.Min), r(p.X.Max), r(p.Y.Min), r(p.Y.Max), strings.Join(texts, "\n  "))
}

// svgShape is the texts of a chart written as SVG, for the kinds drawn
// straight to a file (the sweep, the simulator).
func svgShape(t *testing.T, file string) string {
	t.Helper()
	return "texts:\n  " + strings.Join(svgTexts(readSVG(t, file)), "\n  ") + "\n"
}

// svgSpan is one text element of an SVG, its text in the submatch.
var svgSpan = regexp.MustCompile(`<text[^>]*>([^<]*)</text>`)

// svgTexts are the texts of an SVG, in order.
func svgTexts(svg string) []string {
	var texts []string
	for _, m := range svgSpan.FindAllStringSubmatch(svg, -1) {
		texts = append(texts, m[1])
	}
	return texts
}

func goldenShape(t *testing.T, name string, p *plot.Plot) {
	t.Helper()
	goldenText(t, name, shape(t, p))
}

func goldenText(t *testing.T, name, got string) {
	t.Helper()
	golden.Check(t, filepath.Join("testdata", "golden", "chart-"+name+".txt"), []byte(got), *updateShape, "update-golden")
}

// One golden of the structure per chart kind: the recording report's
// (on a recording with its inventory, so IRQs are named by interface and
// queue), bench's two panels, and the simulator's.
func TestChartShapes(t *testing.T) {
	runs := []*Run{nicRun(t)}
	charts, err := Charts(runs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, c := range charts {
		kind := strings.TrimSuffix(c.Name, "-scale")
		if strings.HasSuffix(c.Name, "-scale") {
			kind = "scale"
		}
		if strings.HasSuffix(kind, "-over-time") {
			kind = "heat"
		}
		if seen[kind] {
			continue
		}
		seen[kind] = true
		goldenShape(t, kind, c.Plot)
	}
	merit, soft, err := benchPlots(benchReport(8))
	if err != nil {
		t.Fatal(err)
	}
	goldenShape(t, "bench-merit", merit)
	goldenShape(t, "bench-soft", soft)
	dir := t.TempDir()
	sw := &bench.Sweep{Param: "connections"}
	for _, v := range []int{1, 4, 16} {
		sw.Points = append(sw.Points, bench.SweepPoint{Value: v, Report: benchReport(8)})
	}
	if err := SweepChart(sw, filepath.Join(dir, "curve.svg")); err != nil {
		t.Fatal(err)
	}
	goldenText(t, "sweep", svgShape(t, filepath.Join(dir, "curve.svg")))
	c := sim.DefaultConfig()
	c.Completions = 2000
	rs, err := sim.Sweep(c, sim.DefaultPolicyParams(), []string{"none", "vic"}, []int{1, 16})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := SimCharts(rs, []string{"none", "vic"}, dir, []string{"svg"}); err != nil {
		t.Fatal(err)
	}
	goldenText(t, "sim-iops", svgShape(t, filepath.Join(dir, "iops_vs_cif.svg")))
	var kinds []string
	for k := range seen {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	if got := strings.Join(kinds, " "); got != "cluster heat interrupt-time irq-by-device irq-rates scale" {
		t.Errorf("chart kinds %s", got)
	}
}

// nicRun is a recording of a 2-CPU host whose eth0 (virtio-net; its IRQs
// named by their handlers "virtio3-rx", "virtio3-tx") carries traffic,
// beside five IRQs that fire 12 to 20 times a second: too few to see
// beside eth0's.
func nicRun(t *testing.T) *Run {
	t.Helper()
	q0 := 0
	inv := &host.Host{
		IRQs: []host.IRQ{{Number: 41, Actions: []string{"virtio3-rx"}, Device: "virtio3", Queue: &q0, QueueKind: "rx", ByName: true},
			{Number: 42, Actions: []string{"virtio3-tx"}, Device: "virtio3", Queue: &q0, QueueKind: "tx", ByName: true}},
		NICs: []host.NIC{{Name: "eth0", IRQs: []int{41, 42}}},
	}
	for i := 0; i < 5; i++ {
		inv.IRQs = append(inv.IRQs, host.IRQ{Number: 50 + i, Actions: []string{fmt.Sprintf("ahci%d", i)}})
	}
	t0 := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	var loads []*load.Load
	for i := 0; i < 6; i++ {
		l := &load.Load{Start: t0.Add(time.Duration(i) * time.Second), End: t0.Add(time.Duration(i+1) * time.Second), Interval: time.Second}
		l.CPUs = []load.CPULoad{{ID: 0, CPUTime: load.CPUTime{User: 30, SoftIRQ: 20, IRQ: 2, Idle: 48}, NetRx: 9000,
			HardirqTime: 0.02, SoftirqTime: map[string]float64{"NET_RX": 0.2}},
			{ID: 1, CPUTime: load.CPUTime{User: 10, SoftIRQ: 5, Idle: 85}, NetTx: 3000, HardirqTime: 0.001, SoftirqTime: map[string]float64{"NET_TX": 0.05}}}
		rx := 20000 + 1000*float64(i%3)
		l.IRQs = []load.IRQRate{
			{IRQ: 41, Actions: []string{"virtio3-rx"}, Rate: rx, PerCPU: map[int]float64{0: rx}},
			{IRQ: 42, Actions: []string{"virtio3-tx"}, Rate: 6000, PerCPU: map[int]float64{1: 6000}},
		}
		for k := 0; k < 5; k++ {
			v := 12 + 2*float64(k)
			l.IRQs = append(l.IRQs, load.IRQRate{IRQ: 50 + k, Actions: []string{fmt.Sprintf("ahci%d", k)}, Rate: v, PerCPU: map[int]float64{k % 2: v}})
		}
		loads = append(loads, l)
	}
	r, err := RunOf("node1", "test", loads, inv)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// eth0's IRQs are named by the interface and queue, not by their
// handler; IRQs too small to see are not in the legend but counted; the
// legend sits above the data.
func TestIRQChartNamesVisibleSeries(t *testing.T) {
	p, none, err := IRQChart([]*Run{nicRun(t)}, Options{})
	if err != nil || p == nil {
		t.Fatalf("%v %s", err, none)
	}
	s := shape(t, p)
	if !textHas(t, "IRQ chart", s, "eth0 rx 0 (irq 41)", "eth0 tx 0 (irq 42)", "5 such") {
		t.Logf("IRQ chart:\n%s", s)
	}
	if strings.Contains(s, "ahci") || strings.Contains(s, "virtio3") {
		t.Errorf("IRQ chart names IRQs too small to see, or eth0's by their handler:\n%s", s)
	}
	legendAboveData(t, p, 21000)

	dev, err := DeviceChart([]*Run{nicRun(t)}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s = shape(t, dev)
	if !strings.Contains(s, "eth0 rx 0") || strings.Contains(s, "ahci") || strings.Contains(s, "virtio3") {
		t.Errorf("device chart's names:\n%s", s)
	}
}

// legendAboveData checks p's legend box lies above its highest value.
func legendAboveData(t *testing.T, p *plot.Plot, peak float64) {
	t.Helper()
	c := draw.New(vgsvg.New(8*vg.Inch, 4*vg.Inch))
	dc := p.DataCanvas(c)
	box := legendBox(p, dc)
	if top := dc.Y(p.Y.Norm(peak)); box.Min.Y <= top {
		t.Errorf("legend box bottom %.1f is not above the data's top %.1f", box.Min.Y, top)
	}
}

// A recording whose IRQs all fire less than MinIRQLineRate draws no IRQ
// panel (no empty −1…1 axes) and its first chart says why.
func TestNoEmptyIRQPanel(t *testing.T) {
	r := nicRun(t)
	for _, l := range r.Loads {
		for i := range l.IRQs {
			l.IRQs[i].Rate = 1
			l.IRQs[i].PerCPU = nil
		}
	}
	charts, err := Charts([]*Run{r}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range charts {
		if c.Name == "irq-rates" {
			t.Errorf("an IRQ-rate panel with nothing to draw: %q", c.Title)
		}
	}
	for _, c := range charts {
		if c.Name == "irq-by-device" {
			t.Errorf("an interrupts-by-device panel with nothing to draw: %q", c.Title)
		}
	}
	if !strings.Contains(charts[0].Title, "no IRQ-rate chart: no IRQ fired 10 times per second") {
		t.Errorf("first chart's caption %q does not say why there is no IRQ-rate chart", charts[0].Title)
	}
}

// bench's figure of merit: the axis reaches above the highest whisker,
// with room, so no whisker is cut at the top.
func TestBenchWhiskersWhole(t *testing.T) {
	rep := benchReport(8)
	merit, _, err := benchPlots(rep)
	if err != nil {
		t.Fatal(err)
	}
	top := 0.0
	for _, s := range rep.Summary {
		if s.Throughput.Finite() {
			top = math.Max(top, s.Throughput.High)
		}
	}
	if top == 0 || merit.Y.Max < top*1.05 {
		t.Errorf("axis ends at %g, the highest whisker at %g: no headroom", merit.Y.Max, top)
	}
}
