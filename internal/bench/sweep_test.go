package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
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
			Run{Config: "default", Round: r, Result: Result{Throughput: d, Unit: "trx/s"}},
			Run{Config: "rps-spread", Round: r, Result: Result{Throughput: d * f, Unit: "trx/s"}})
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
	dir := t.TempDir()
	if d := os.Getenv("IRQPILOT_KEEP_CHART"); d != "" {
		dir = d // to look at the chart
	}
	for _, name := range []string{"curve.png", "curve.svg"} {
		path := filepath.Join(dir, name)
		if err := sw.Chart(path); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(path)
		if err != nil || fi.Size() < 2000 {
			t.Errorf("%s: %v %v", name, fi, err)
		}
	}
	svg, _ := os.ReadFile(filepath.Join(dir, "curve.svg"))
	for _, want := range []string{"rps-spread", "connections", "trx/s", ">16<"} {
		if !strings.Contains(string(svg), want) {
			t.Errorf("svg lacks %q", want)
		}
	}
	if strings.Contains(string(svg), "range of the runs") {
		t.Error("8 rounds per point, yet the chart speaks of ranges")
	}
	// 3 rounds: no interval; the bars are the runs' range, and say so.
	runs := sweepRuns(3, 1000, 1.1)
	few := &Sweep{Param: "connections", Points: []SweepPoint{{Value: 1, Report: &Report{Workload: "mysql", Baseline: "default", Runs: runs,
		Summary: Summarize(cs, runs, "default", true)}}}}
	if lo, hi, ok := runRange(runs, "rps-spread"); !ok || lo != 1100 || hi != 1100*1.02 {
		t.Errorf("range of rps-spread's runs %v–%v, want 1100–1122", lo, hi)
	}
	if err := few.Chart(filepath.Join(dir, "few.svg")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "few.svg")); !strings.Contains(string(b), "range of the runs") {
		t.Error("3 rounds: the chart does not say its bars are the runs' range")
	}
	if err := (&Sweep{Param: "connections"}).Chart(filepath.Join(dir, "none.png")); err == nil {
		t.Error("empty sweep drew a chart")
	}
}
