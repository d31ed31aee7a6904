package bench

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/irqpilot/irqpilot/internal/bench/workload"
)

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
