package bench

import (
	"bytes"
	"flag"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/irqpilot/irqpilot/internal/bench/stats"
	"github.com/irqpilot/irqpilot/internal/bench/workload"
	"github.com/irqpilot/irqpilot/internal/golden"
	"github.com/irqpilot/irqpilot/internal/load"
)

var updateTable = flag.Bool("update-golden", false, "rewrite testdata/golden/*.txt from the current bench tables")

// goldenReport is a bench of default and rps-spread; twin adds an A/A
// twin (default#aa), placed records where the server (CPU 1, rps-spread:
// 0-1) and the load generator (CPU 0) ran, as this version's runs do.
func goldenReport(rounds int, twin, placed bool) *Report {
	configs := []string{"default", "rps-spread"}
	if twin {
		configs = WithTwin(configs, "default")
	}
	var runs []Run
	for r := 0; r < rounds; r++ {
		for _, c := range configs {
			i := 0
			if c == "rps-spread" {
				i = 1
			}
			soft0 := 72.4 - float64(i)*70
			run := Run{Config: c, Round: r,
				Result: workload.Result{Throughput: 100000*(1+0.3*float64(i)) + float64(r*997%1500), Unit: "ops/s", LatencyP50: 63 + float64(r), LatencyP99: 127 + float64(2*r)},
				CPUs:   []CPU{{ID: 0, CPUTime: load.CPUTime{SoftIRQ: soft0, Idle: 3.8}}, {ID: 1, CPUTime: load.CPUTime{SoftIRQ: 1 + float64(i)*30, Idle: 40}}}}
			if c == "default#aa" {
				run.Throughput *= 1 + 0.01*float64(r%3-1)
			}
			if placed {
				run.AppCPUs, run.ClientCPUs = "1", "0"
				if i == 1 {
					run.AppCPUs = "0-1"
				}
			}
			runs = append(runs, run)
		}
	}
	return &Report{
		Workload: "memcached", Host: "vm", Kernel: "6.1.0", CPUs: 2, Rounds: rounds, Duration: 5 * time.Second,
		Baseline: "default", Restored: true,
		Summary: Summarize(configs, runs, "default", true), Runs: runs,
		Scope:       &Scope{NetDevice: "vs4104", IRQs: nil},
		MachineWide: map[string][]string{"rps-spread": {"net.core.rps_sock_flow_entries = 32768"}},
		Dropped:     map[string][]string{"rps-spread": {"eth0 rx-0 (rps_cpus → 0-1): not a queue of the device under test"}},
	}
}

// The bench table people read: intervals and verdicts only from 6 rounds
// or more ("indicative" below), the test and its p-value, warnings
// (saturated CPU 0 only where the server ran on it, the load generator
// sharing rps-spread's CPUs, no twin, no record of placement), latency
// resolution said, scope in words, machine-wide changes named.
func TestGoldenBenchTable(t *testing.T) {
	for _, c := range []struct {
		rounds       int
		twin, placed bool
		file         string
	}{{6, true, true, "bench-table.txt"}, {3, false, false, "bench-table-too-few.txt"}} {
		var b bytes.Buffer
		if err := goldenReport(c.rounds, c.twin, c.placed).WriteTable(&b); err != nil {
			t.Fatal(err)
		}
		golden.Check(t, filepath.Join("testdata", "golden", c.file), b.Bytes(), *updateTable, "update-golden")
	}
}

// A twin of the baseline states the run's noise floor, the widest twin
// winning; without a twin, or with too few runs, nothing is claimed.
func TestNoiseFloorLine(t *testing.T) {
	iv := func(p, lo, hi float64) *stats.Interval { return &stats.Interval{Point: p, Low: lo, High: hi} }
	r := &Report{Baseline: "default", Summary: []Summary{
		{Config: "default"},
		{Config: "default#aa", Ratio: iv(0.980, 0.963, 0.993), Verdict: "worse"},
		{Config: "default#best", Ratio: iv(1.01, 0.99, 1.052), Verdict: "within noise"},
		{Config: "auto", Ratio: iv(1.3, 1.2, 1.4), Verdict: "better"},
	}}
	want := "noise floor: default#best, the same configuration as default, measured 1.010 (0.990–1.052): ratios within ±5.2 % of 1"
	if got := r.noiseFloorLine(); !strings.HasPrefix(got, want) {
		t.Errorf("got %q\nwant prefix %q", got, want)
	}
	r.Summary[2].Verdict = stats.VerdictIndicative
	if got := r.noiseFloorLine(); !strings.Contains(got, "default#aa") || !strings.Contains(got, "±3.8 % of 1 (0.963–1.038)") {
		t.Errorf("without #best: %q", got)
	}
	// Against a tagged baseline its untagged twin counts; NaN ends do not.
	tagged := &Report{Baseline: "default#best", Summary: []Summary{
		{Config: "default", Ratio: iv(0.99, 0.97, 1.02), Verdict: "within noise"},
		{Config: "default#aa", Ratio: iv(1, math.NaN(), 1.2), Verdict: "within noise"},
		{Config: "default#best"},
	}}
	if got := tagged.noiseFloorLine(); !strings.HasPrefix(got, "noise floor: default, the same configuration as default#best") || !strings.Contains(got, "±3.1 %") {
		t.Errorf("tagged baseline: %q", got)
	}
	// A twin whose interval reaches 0 leaves no finite band.
	zero := &Report{Baseline: "default", Summary: []Summary{
		{Config: "default"},
		{Config: "default#aa", Ratio: iv(0.5, 0, 1.3), Verdict: "within noise"},
	}}
	if got := zero.noiseFloorLine(); !strings.HasSuffix(got, "(0.000–1.300): no ratio is resolved by this run, whatever its verdict") {
		t.Errorf("zero low end: %q", got)
	}
	r.Summary = r.Summary[2:]
	if got := r.noiseFloorLine(); got != "" {
		t.Errorf("no usable twin, yet %q", got)
	}
}

func TestParseSweep(t *testing.T) {
	p, vs, err := ParseSweep("connections=1,4,16,64")
	if err != nil || p != "connections" || !cmp.Equal(vs, []int{1, 4, 16, 64}) {
		t.Errorf("got %q %v %v", p, vs, err)
	}
	for _, bad := range []string{"connections", "connections=", "threads=1,2", "connections=4,1", "connections=0,2", "connections=a"} {
		if _, _, err := ParseSweep(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// sweepRuns are rounds of two configurations at one concurrency: default
// at base, rps-spread at base·f, both with a little spread by round.
func sweepRuns(rounds int, base, f float64) []Run {
	var runs []Run
	for r := 0; r < rounds; r++ {
		d := base * (1 + 0.01*float64(r%3))
		runs = append(runs,
			Run{Config: "default", Round: r, Result: workload.Result{Throughput: d, Unit: "trx/s"}},
			Run{Config: "rps-spread", Round: r, Result: workload.Result{Throughput: d * f, Unit: "trx/s"}})
	}
	return runs
}

func TestSweepTableAndChart(t *testing.T) {
	cs := []string{"default", "rps-spread"}
	sw := &Sweep{Param: "connections"}
	for _, pt := range []struct {
		v       int
		base, f float64
		rounds  int
	}{{1, 5000, 1.0, 2}, {4, 18000, 1.1, 2}, {16, 30000, 1.2, 2}} {
		runs := sweepRuns(pt.rounds+6, pt.base, pt.f)
		sw.Points = append(sw.Points, SweepPoint{Value: pt.v, Report: &Report{Workload: "mysql", Baseline: "default", Rounds: pt.rounds + 6,
			Runs: runs, Summary: Summarize(cs, runs, "default", true)}})
	}
	var b strings.Builder
	if err := sw.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"== connections=1", "== connections=16", "sweep of connections: throughput in trx/s",
		"30300 (30000–30600)", "36360 (36000–36720) 1.200x better", "5050 (5000–5100) 1.000x within noise"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	// 3 rounds: no interval; the curve's bars are the runs' range.
	runs := sweepRuns(3, 1000, 1.1)
	few := &Sweep{Param: "connections", Points: []SweepPoint{{Value: 1, Report: &Report{Workload: "mysql", Baseline: "default", Runs: runs,
		Summary: Summarize(cs, runs, "default", true)}}}}
	want := []Curve{
		{Config: "default", Points: []CurvePoint{{Value: 1, Median: 1010, Low: 1000, High: 1020, Range: true}}},
		{Config: "rps-spread", Points: []CurvePoint{{Value: 1, Median: 1111, Low: 1100, High: 1122, Range: true}}},
	}
	if d := cmp.Diff(want, few.Curves(), cmpopts.EquateApprox(0, 1e-9)); d != "" {
		t.Errorf("curves of 3 rounds (-want +got):\n%s", d)
	}
	for _, cv := range sw.Curves() {
		for _, p := range cv.Points {
			if p.Range || !(p.Low < p.Median && p.Median < p.High) {
				t.Errorf("%s at %d: %+v, want an interval around the median from 8 rounds", cv.Config, p.Value, p)
			}
		}
	}
}

// A configuration that wrote and placed nothing measured the baseline
// again: the table says "no change", not a verdict that reads like one
// about a change.
func TestBenchTableSaysNoChange(t *testing.T) {
	r := goldenReport(6, true, true)
	r.Decisions = map[string]Decision{"rps-spread": {NoChange: true, Notes: []string{"auto: no evidence of harm"}}}
	var b bytes.Buffer
	if err := r.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(b.String(), "\n") {
		if strings.HasPrefix(line, "rps-spread ") {
			if !strings.Contains(line, "no change") || strings.Contains(line, "better") {
				t.Fatalf("row %q", line)
			}
			return
		}
	}
	t.Fatalf("no rps-spread row:\n%s", b.String())
}
