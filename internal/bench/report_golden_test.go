package bench

import (
	"bytes"
	"flag"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/irqpilot/irqpilot/internal/bench/stats"
	"github.com/irqpilot/irqpilot/internal/bench/workload"
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
				CPUs:   []CPUStat{{ID: 0, CPUTime: load.CPUTime{SoftIRQ: soft0, Idle: 3.8}}, {ID: 1, CPUTime: load.CPUTime{SoftIRQ: 1 + float64(i)*30, Idle: 40}}}}
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
		file := filepath.Join("testdata", "golden", c.file)
		if *updateTable {
			if err := os.WriteFile(file, b.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(file)
		if err != nil {
			t.Fatalf("%v (run go test -run TestGoldenBenchTable -update-golden)", err)
		}
		if !bytes.Equal(want, b.Bytes()) {
			t.Errorf("%s differs (-update-golden to accept):\n--- want\n%s\n--- got\n%s", file, want, b.Bytes())
		}
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
	if got := r.noiseFloorLine(); !strings.Contains(got, "default#aa") || !strings.Contains(got, "±3.7 %") {
		t.Errorf("without #best: %q", got)
	}
	// Against a tagged baseline its untagged twin counts; NaN ends do not.
	tagged := &Report{Baseline: "default#best", Summary: []Summary{
		{Config: "default", Ratio: iv(0.99, 0.97, 1.02), Verdict: "within noise"},
		{Config: "default#aa", Ratio: iv(1, math.NaN(), 1.2), Verdict: "within noise"},
		{Config: "default#best"},
	}}
	if got := tagged.noiseFloorLine(); !strings.HasPrefix(got, "noise floor: default, the same configuration as default#best") || !strings.Contains(got, "±3.0 %") {
		t.Errorf("tagged baseline: %q", got)
	}
	r.Summary = r.Summary[2:]
	if got := r.noiseFloorLine(); got != "" {
		t.Errorf("no usable twin, yet %q", got)
	}
}
