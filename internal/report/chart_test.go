package report

import (
	"image/color"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/irqpilot/irqpilot/internal/bench"
	"github.com/irqpilot/irqpilot/internal/bench/workload"
	"github.com/irqpilot/irqpilot/internal/kernel/bpfcost"
	"github.com/irqpilot/irqpilot/internal/load"
	"github.com/irqpilot/irqpilot/internal/sim"
)

// chartDir is where a test writes its charts: IRQPILOT_KEEP_CHART to look
// at them, else a temporary directory.
func chartDir(t *testing.T) string {
	if d := os.Getenv("IRQPILOT_KEEP_CHART"); d != "" {
		return d
	}
	return t.TempDir()
}

// readSVG reads a chart written as SVG.
func readSVG(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil || len(b) < 2000 {
		t.Fatalf("%s: %d bytes, %v", path, len(b), err)
	}
	return string(b)
}

// drawPNGAndSVG draws a chart with draw as name.png and name.svg in dir
// and returns the SVG.
func drawPNGAndSVG(t *testing.T, dir, name string, draw func(path string) error) string {
	t.Helper()
	for _, ext := range []string{".png", ".svg"} {
		if err := draw(filepath.Join(dir, name+ext)); err != nil {
			t.Fatal(err)
		}
	}
	return readSVG(t, filepath.Join(dir, name+".svg"))
}

// textHas reports each of wants that text, of what (a chart's SVG, a
// page), lacks, and whether it has them all.
func textHas(t *testing.T, what, text string, wants ...string) bool {
	t.Helper()
	all := true
	for _, want := range wants {
		if !strings.Contains(text, want) {
			t.Errorf("%s lacks %q", what, want)
			all = false
		}
	}
	return all
}

func TestValueTicks(t *testing.T) {
	for _, c := range []struct {
		lo, hi float64
		want   []string
	}{
		// The eBPF time chart of an idle machine reaches 1 %: two labels
		// ("0", "1") said nothing about the lines below 1.
		{0, 1, []string{"0", "0.2", "0.4", "0.6", "0.8", "1"}},
		{0, 125, []string{"0", "20", "40", "60", "80", "100", "120"}},
		{0, 3600, []string{"0", "500", "1k", "1.5k", "2k", "2.5k", "3k", "3.5k"}},
	} {
		var got []string
		for _, tk := range valueTicks(c.lo, c.hi) {
			if tk.Label != "" {
				got = append(got, tk.Label)
			}
		}
		if d := cmp.Diff(c.want, got); d != "" {
			t.Errorf("labels of %g–%g (-want +got):\n%s", c.lo, c.hi, d)
		}
	}
}

// Ten series, ten colours, no two alike (the default palette repeated its
// red for the eighth line and had three reddish ones before that).
func TestSeriesColoursDistinct(t *testing.T) {
	seen := map[color.RGBA]int{}
	for i := range 10 {
		c := seriesColour(i).(color.RGBA)
		if j, ok := seen[c]; ok {
			t.Errorf("series %d has series %d's colour %v", i, j, c)
		}
		seen[c] = i
	}
}

// vethRun is one host's run with a veth that has no IRQ and received on
// CPUs 0 and 1 (NAPI polls, as the eBPF collector measures them), and one
// IRQ on CPU 1.
func vethRun(t *testing.T) *Run {
	t.Helper()
	start := time.Unix(1000, 0)
	var loads []*load.Load
	for i := range 3 {
		loads = append(loads, &load.Load{
			Start: start.Add(time.Duration(i) * time.Second), End: start.Add(time.Duration(i+1) * time.Second), Interval: time.Second,
			CPUs: []load.CPULoad{{ID: 0, CPUTime: load.CPUTime{Idle: 50}}, {ID: 1, CPUTime: load.CPUTime{Idle: 50}}},
			IRQs: []load.IRQRate{{IRQ: 36, Actions: []string{"virtio1-req.0"}, Rate: 400, PerCPU: map[int]float64{1: 400}}},
			NAPI: []bpfcost.NAPIRate{{Dev: "vs1a2b", Polls: 9000, PollsPerCPU: map[int]float64{0: 6000, 1: 3000}}},
		})
	}
	r, err := RunOf("alpha", "test", loads, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// The per-device chart counts a device without IRQs (veth) by its NAPI
// polls, and keeps half a slot either side so the edge bars are whole.
func TestDeviceChartVethAndEdges(t *testing.T) {
	r := vethRun(t)
	p, err := DeviceChart([]*Run{r}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if p.X.Min > -0.5 || p.X.Max < float64(len(r.CPUs))-0.5 {
		t.Errorf("x range %g–%g cuts the bars at CPU 0 or CPU %d", p.X.Min, p.X.Max, len(r.CPUs)-1)
	}
	if p.Y.Max < 6000 {
		t.Errorf("y axis ends at %g, below CPU 0's 6000 veth polls per second", p.Y.Max)
	}
	path := filepath.Join(chartDir(t), "irq-by-device.svg")
	if err := WriteImage(mustCreate(t, path), "svg", []Chart{{Plot: p, Height: 4 * 72}}, 10*72); err != nil {
		t.Fatal(err)
	}
	textHas(t, "device chart", readSVG(t, path), "vs1a2b NAPI polls", "virtio1-req.0 (irq 36)", "NAPI polls of devices without IRQs")
}

func mustCreate(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// benchReport is a bench of three configurations over rounds rounds, the
// softirq share of CPU 1 reaching 60 %.
func benchReport(rounds int) *bench.Report {
	cs := []string{"default", "default#aa", "rps-spread"}
	var runs []bench.Run
	for r := range rounds {
		for i, c := range cs {
			runs = append(runs, bench.Run{Config: c, Round: r,
				Result: workload.Result{Throughput: 1000 * (1 + 0.1*float64(i)) * (1 + 0.01*float64(r%3)), Unit: "req/s"},
				CPUs:   []bench.CPU{{ID: 0, CPUTime: load.CPUTime{SoftIRQ: 20, Idle: 40}}, {ID: 1, CPUTime: load.CPUTime{SoftIRQ: 60, Idle: 10}}}})
		}
	}
	return &bench.Report{Workload: "nginx", Baseline: "default", Rounds: rounds, Runs: runs, Summary: bench.Summarize(cs, runs, "default", true)}
}

// The %soft chart's legend (top right) sits above the tallest bar.
func TestBenchChart(t *testing.T) {
	rep := benchReport(8)
	_, soft, err := benchPlots(rep)
	if err != nil {
		t.Fatal(err)
	}
	if soft.Y.Max < 60*1.25 {
		t.Errorf("%%soft axis ends at %g: the legend's two rows cover the 60 %% bar", soft.Y.Max)
	}
	if soft.X.Min > -0.5 || soft.X.Max < 2.5 {
		t.Errorf("x range %g–%g cuts the edge bars", soft.X.Min, soft.X.Max)
	}
	dir := chartDir(t)
	svg := drawPNGAndSVG(t, dir, "bench", func(path string) error { return BenchChart(rep, path) })
	textHas(t, "bench chart", svg, "nginx: throughput", "rps-spread", "CPU 1", "req/s")
	if err := BenchChart(rep, filepath.Join(dir, "bench.pdf")); err == nil {
		t.Error("a .pdf chart was accepted")
	}
}

func TestSweepChart(t *testing.T) {
	dir := chartDir(t)
	sw := &bench.Sweep{Param: "connections"}
	for _, v := range []int{1, 4, 16} {
		sw.Points = append(sw.Points, bench.SweepPoint{Value: v, Report: benchReport(8)})
	}
	svg := drawPNGAndSVG(t, dir, "curve", func(path string) error { return SweepChart(sw, path) })
	textHas(t, "sweep chart", svg, "rps-spread", "connections", "req/s", ">16<")
	if strings.Contains(svg, "range of the runs") {
		t.Error("8 rounds per point, yet the chart speaks of ranges")
	}
	// 3 rounds: no interval; the bars are the runs' range, and say so.
	few := &bench.Sweep{Param: "connections", Points: []bench.SweepPoint{{Value: 1, Report: benchReport(3)}}}
	if err := SweepChart(few, filepath.Join(dir, "few.svg")); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(readSVG(t, filepath.Join(dir, "few.svg")), "range of the runs") {
		t.Error("3 rounds: the chart does not say its bars are the runs' range")
	}
	if err := SweepChart(&bench.Sweep{Param: "connections"}, filepath.Join(dir, "none.png")); err == nil {
		t.Error("empty sweep drew a chart")
	}
}

func TestSimCharts(t *testing.T) {
	c := sim.DefaultConfig()
	c.Completions = 2000
	rs, err := sim.Sweep(c, sim.DefaultPolicyParams(), []string{"none", "vic"}, []int{1, 16})
	if err != nil {
		t.Fatal(err)
	}
	dir := chartDir(t)
	files, err := SimCharts(rs, []string{"none", "vic"}, dir, []string{"png", "svg"})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 8 || filepath.Dir(files[0]) != dir {
		t.Fatalf("files %v", files)
	}
	textHas(t, "IOPS chart", readSVG(t, filepath.Join(dir, "iops_vs_cif.svg")), "vic", "commands in flight")
}
