package bench

import (
	"context"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/irqpilot/irqpilot/internal/bench/stats"
	"github.com/irqpilot/irqpilot/internal/bench/workload"
	"github.com/irqpilot/irqpilot/internal/host"
)

// campaignRuns reads one bench report of the campaign of record
// (docs/evidence/campaign: 10 interleaved rounds with an A/A twin).
func campaignRuns(t *testing.T, name string) []Run {
	t.Helper()
	b, err := os.ReadFile("../../docs/evidence/campaign/" + name + ".json")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := ReadReport(b, "")
	if err != nil {
		t.Fatal(err)
	}
	return rep.Runs
}

// TestJudgeConfirmationOnCampaign judges configurations of the campaign
// of record as tune's confirmation would, on each objective: the rule
// keeps a candidate only when the sign test says "better" and its ratio
// lies outside the A/A twin's interval.
func TestJudgeConfirmationOnCampaign(t *testing.T) {
	for _, tc := range []struct {
		report, best string
		obj          Objective
		kept         bool
		why          string
	}{
		// 1.244x, outside the twin's ±4.9 %.
		{"udp", "spec:app=0,rps=1#best", ObjectiveThroughput, true, "beyond the A/A noise"},
		{"udp", "auto", ObjectiveThroughput, true, "1.212x"},
		{"udp", "rps-spread", ObjectiveThroughput, false, ": worse;"},
		{"udp", "irqbalance", ObjectiveThroughput, false, "within noise"},
		// udp's flood reports no latency: no p99 to judge.
		{"udp", "auto", ObjectiveP99, false, "has no measured p99"},
		// The objectives disagree: colocate loses throughput (0.776x) but
		// needs a third less CPU per datagram.
		{"udp", "colocate", ObjectiveCPUPerOp, true, "0.670x"},
		{"memcached", "efficiency#tune", ObjectiveThroughput, false, "within noise"},
		// wrk's p99 under nginx: rps-spread is "better" by the sign test
		// (0.594x, p = 0.002), and the twin's p99 ranged 0.992–1.453: a
		// band of 1/1.453–1.453 (0.688–1.453), which 0.594x lies below —
		// 1.68 times lower, where the twin spread 1.45 times.
		{"nginx", "rps-spread", ObjectiveP99, true, "beyond the A/A noise; A/A twin default#aa 1.046x (0.992–1.453): noise ±45.3 % (ratios 0.688–1.453)"},
		// The same candidate on throughput: 0.887x, worse.
		{"nginx", "rps-spread", ObjectiveThroughput, false, "0.887x (95 % interval 0.812–0.974, sign test p = 0.021 over 10 rounds): worse"},
		{"storage-psync-qd1", "colocate", ObjectiveP99, false, ": worse;"},
	} {
		j, sums, width := JudgeConfirmation(tc.obj, campaignRuns(t, tc.report), "default", tc.best)
		if j.Kept != tc.kept || !strings.Contains(j.Why, tc.why) {
			t.Errorf("%s %s on %s: kept %v, want %v; why %q lacks %q", tc.report, tc.best, tc.obj, j.Kept, tc.kept, j.Why, tc.why)
		}
		if !strings.Contains(j.Why, "objective "+tc.obj.Describe()) {
			t.Errorf("%s: why does not state the objective: %s", tc.report, j.Why)
		}
		if len(sums) != 3 || sums[1].Config != "default#aa" {
			t.Errorf("%s: summaries %v", tc.report, sums)
		}
		if tc.kept && (math.IsNaN(width) || !strings.Contains(j.Why, "noise ±")) {
			t.Errorf("%s: kept without an A/A width (%v): %s", tc.report, width, j.Why)
		}
	}
	// Fewer rounds than a verdict needs: the first 3 rounds of the same
	// runs, whose 10 rounds keep auto, give a direction only.
	var three []Run
	for _, r := range campaignRuns(t, "udp") {
		if r.Round < 3 {
			three = append(three, r)
		}
	}
	if j, _, _ := JudgeConfirmation(ObjectiveThroughput, three, "default", "auto"); j.Kept || !strings.Contains(j.Why, "indicative") {
		t.Errorf("3 rounds: kept %v: %s", j.Kept, j.Why)
	}
}

func TestObjectiveValue(t *testing.T) {
	tp := Run{Result: workload.Result{Throughput: 5000, LatencyP99: 250}, PerCPUSecond: 2500}
	lat := Run{Result: workload.Result{Throughput: 40, LatencyP99: 40, LowerIsBetter: true, Rate: 10000}, PerCPUSecond: 20000}
	failed := Run{Result: workload.Result{Throughput: 5000}, Error: "exit 1"}
	for _, tc := range []struct {
		obj  Objective
		run  Run
		want float64
		ok   bool
	}{
		{ObjectiveThroughput, tp, 5000, true},
		{ObjectiveThroughput, lat, 0, false}, // a latency is no throughput
		{ObjectiveThroughput, failed, 0, false},
		{ObjectiveP99, tp, 250, true},
		{ObjectiveP99, lat, 40, true},
		{ObjectiveP99, Run{Result: workload.Result{Throughput: 9}}, 0, false},
		{ObjectiveCPUPerOp, tp, 400, true}, // 1e6 µs / 2500 ops per CPU-second
		{ObjectiveCPUPerOp, lat, 50, true},
		{ObjectiveCPUPerOp, Run{Result: workload.Result{Throughput: 9}}, 0, false},
	} {
		v, ok := tc.obj.Value(tc.run)
		if v != tc.want || ok != tc.ok {
			t.Errorf("%s of %+v: %v %v, want %v %v", tc.obj, tc.run.Result, v, ok, tc.want, tc.ok)
		}
	}
	p := ObjectiveP99.Project([]Run{tp, {Result: workload.Result{Throughput: 9}}})
	if d := cmp.Diff([]float64{250, 0}, []float64{p[0].Throughput, p[1].Throughput}); d != "" || !p[0].LowerIsBetter || p[1].Error != "no p99 measured" {
		t.Errorf("projection (-want +got):\n%s %+v", d, p)
	}
	if _, err := ParseObjective("p50"); err == nil {
		t.Error("p50 accepted")
	}
}

func TestObjectiveFor(t *testing.T) {
	lat, tput := &workload.SockperfWorkload{}, &workload.NetWorkload{Kind: "memcached"}
	for _, tc := range []struct {
		w    workload.Workload
		obj  Objective
		want Objective
		err  bool
	}{
		{lat, "", ObjectiveP99, false},
		{tput, "", ObjectiveThroughput, false},
		{lat, ObjectiveThroughput, "", true},
		{lat, ObjectiveCPUPerOp, ObjectiveCPUPerOp, false},
		{tput, ObjectiveP99, ObjectiveP99, false},
		{tput, "fastest", "", true},
	} {
		got, err := ObjectiveFor(tc.w, tc.obj)
		if got != tc.want || (err != nil) != tc.err {
			t.Errorf("%s %q: %q %v", tc.w.Name(), tc.obj, got, err)
		}
	}
}

// latencyWorkload is scoreWorkload's latency twin: a configuration's p99
// is its score (lower is better), its throughput 1000 minus that.
type latencyWorkload struct{ scoreWorkload }

func (w *latencyWorkload) Run(ctx context.Context, d time.Duration, s workload.Placement) (workload.Result, error) {
	r, err := w.scoreWorkload.Run(ctx, d, s)
	return workload.Result{Throughput: 1000 - r.Throughput, LatencyP99: r.Throughput, Unit: "ops/s"}, err
}

// TestTuneForObjective: on p99 the search keeps the lowest latency, on
// throughput the highest rate; the confirmation measures the baseline's
// A/A twin, and the winner's setup carries the measurement behind it.
func TestTuneForObjective(t *testing.T) {
	cands := []string{"default", "spec:app=0", "spec:app=1", "spec:app=0-1"}
	score := map[string]float64{"": 100, "0": 150, "1": 60, "0-1": 101}
	for _, tc := range []struct {
		obj    Objective
		search string
		best   string
	}{
		{ObjectiveP99, "auto", "spec:app=1"},
		{ObjectiveP99, "exhaustive", "spec:app=1"},
		{ObjectiveThroughput, "auto", "spec:app=1"}, // 940 against 900
	} {
		r := &Runner{FS: liveFS, Workload: &latencyWorkload{scoreWorkload{score: score}}, Duration: time.Millisecond, Configurator: Configs{}, h: twoCPUHost(2), StateDir: t.TempDir()}
		res, err := TuneFor(context.Background(), r, cands, tc.search, 20*time.Second, stats.MinRuns, tc.obj)
		if err != nil {
			t.Fatal(err)
		}
		if res.Best != tc.best || !res.Kept || res.Objective != tc.obj {
			t.Errorf("%s %s: best %s kept %v: %s", tc.obj, tc.search, res.Best, res.Kept, res.Why)
		}
		if res.Confirm == nil || !cmp.Equal(res.Confirm.Configs, []string{"default", "default#aa", tc.best}) || len(res.Confirm.Runs) != 3*stats.MinRuns || res.Confirm.NoiseFloor == nil {
			t.Fatalf("%s: confirmation %+v", tc.obj, res.Confirm)
		}
		if res.Setup == nil || len(res.Setup.Notes) == 0 || !strings.HasPrefix(res.Setup.Notes[0], "tune: objective "+tc.obj.Describe()) {
			t.Errorf("%s: winner's setup %+v", tc.obj, res.Setup)
		}
		if tc.obj == ObjectiveP99 && (res.Ratio.Point >= 1 || stats.Median(res.Obs["spec:app=1"]) > 62) {
			t.Errorf("p99: ratio %v, observations %v", res.Ratio, res.Obs["spec:app=1"])
		}
	}
	// The latency workload has no throughput to maximise.
	r := &Runner{FS: liveFS, Workload: &workload.SockperfWorkload{}, Duration: time.Millisecond, h: twoCPUHost(2)}
	if _, err := TuneFor(context.Background(), r, cands, "auto", time.Second, stats.MinRuns, ObjectiveThroughput); err == nil {
		t.Error("throughput tuned on sockperf")
	}
}

func TestKnobs(t *testing.T) {
	for _, c := range []string{"napi:threaded=1", "napi:defer=2,flush=20000", "napi:defer=2,flush=200000,suspend=20000000"} {
		k, err := ParseKnobs(c)
		if err != nil || k.String() != c {
			t.Errorf("%s: %v %v", c, k, err)
		}
	}
	for _, bad := range []string{"napi:threaded=2", "napi:defer=x", "napi:poll=1", "spec:app=0", "napi:defer=4294967296"} {
		if _, err := ParseKnobs(bad); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
	suspend, off := uint64(0), false
	h := twoCPUHost(2)
	h.NICs = []host.NIC{{Name: "vs1", Virtual: true}}
	h.NAPI = []host.NAPI{{ID: 8193, Device: "vs1", Threaded: &off, IRQSuspendTimeout: &suspend}, {ID: 8194, Device: "vs1", Threaded: &off, IRQSuspendTimeout: &suspend}}
	s, err := Configs{}.Setup("napi:threaded=1,defer=2,flush=200000,suspend=20000000", h, workload.AppInfo{Device: "vs1"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range s.Changes {
		got = append(got, c.Target+"="+c.Value)
	}
	want := []string{"vs1 threaded NAPI=1", "vs1 napi_defer_hard_irqs=2", "vs1 gro_flush_timeout=200000",
		"vs1 napi 8193 irq-suspend-timeout=20000000", "vs1 napi 8194 irq-suspend-timeout=20000000"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("changes (-want +got):\n%s", d)
	}
	for _, c := range s.Changes {
		if !inTestbedNS(&c, "vs1") {
			t.Errorf("%s would be applied outside the testbed's namespace", c.Target)
		}
	}
	if _, err := (Configs{}).Setup("napi:defer=2", h, workload.AppInfo{}); err == nil {
		t.Error("napi: knobs accepted without a device under test")
	}
}

func TestKnobCandidates(t *testing.T) {
	suspend, off, on := uint64(0), false, true
	h := twoCPUHost(2)
	h.NICs = []host.NIC{{Name: "vs1", Virtual: true}, {Name: "vs2", Virtual: true}, {Name: "vs3", Virtual: true}}
	h.NAPI = []host.NAPI{{ID: 1, Device: "vs1", Threaded: &off, IRQSuspendTimeout: &suspend}, {ID: 2, Device: "vs3", Threaded: &on}}
	for _, tc := range []struct {
		dev       string
		busyPolls bool
		want      []string
		note      string
	}{
		{"vs1", true, []string{"napi:defer=2,flush=20000", "napi:defer=2,flush=200000", "napi:threaded=1", "napi:defer=2,flush=200000,suspend=20000000",
			"default/busypoll=50", "default/epollbusy=50", "napi:defer=2,flush=200000,suspend=20000000/epollbusy=50"}, "no coalescing candidates: vs1"},
		{"vs1", false, []string{"napi:defer=2,flush=20000", "napi:defer=2,flush=200000", "napi:threaded=1", "napi:defer=2,flush=200000,suspend=20000000"}, "no busy-polling candidates"},
		{"vs2", false, nil, "vs2 has no NAPI instance"},
		// Already threaded, no suspension attribute (an older kernel).
		{"vs3", true, []string{"napi:defer=2,flush=20000", "napi:defer=2,flush=200000", "napi:threaded=0", "default/busypoll=50", "default/epollbusy=50"}, "no IRQ-suspension candidate"},
		{"", true, nil, "no network device under test"},
	} {
		got, notes := KnobCandidates(h, workload.AppInfo{Device: tc.dev}, tc.busyPolls)
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("%s (-want +got):\n%s", tc.dev, d)
		}
		if !strings.Contains(strings.Join(notes, "\n"), tc.note) {
			t.Errorf("%s: notes %q lack %q", tc.dev, notes, tc.note)
		}
		for _, c := range got {
			name, _, err := CutRunOptions(c)
			if err != nil {
				t.Errorf("%s: %v", c, err)
			} else if _, err := (Configs{}).Setup(name, h, workload.AppInfo{Device: tc.dev}); err != nil {
				t.Errorf("%s: %v", c, err)
			}
		}
	}
}

// The band is multiplicative: a twin that spread to 4.6x above 1 hides
// ratios down to 1/4.6, not every improvement (a linear width of 3.6
// would); a narrow twin reads about the same either way.
func TestNoiseBand(t *testing.T) {
	for _, tc := range []struct {
		lo, hi, want float64
	}{
		{0.951, 0.993, 1 / 0.951},
		{0.992, 1.453, 1.453},
		{0.196, 4.587, 1 / 0.196},
		{1.02, 1.10, 1.10}, // an interval above 1 still spans 1
		{0, 2, math.Inf(1)},
	} {
		if got := NoiseBand(stats.Interval{Low: tc.lo, High: tc.hi}); !(got == tc.want || math.Abs(got-tc.want) <= 1e-9) {
			t.Errorf("NoiseBand(%v–%v) = %v, want %v", tc.lo, tc.hi, got, tc.want)
		}
	}
	for _, tc := range []struct {
		ratio, width float64
		out          bool
	}{
		{0.2, 3.587, true}, // 5x lower than 1, beyond a band of 4.587
		{0.25, 3.587, false},
		{1.05, 0.049, true},
		{0.954, 0.049, false}, // 1/1.049 = 0.9533
		{0.953, 0.049, true},
	} {
		if got := OutsideNoise(tc.ratio, tc.width); got != tc.out {
			t.Errorf("OutsideNoise(%v, ±%v) = %v, want %v", tc.ratio, tc.width, got, tc.out)
		}
	}
}
