package bench

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/irqpilot/irqpilot/internal/bench/stats"
	"github.com/irqpilot/irqpilot/internal/bench/workload"
	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/host"
)

func twoCPUHost(n int) *host.Host {
	h := &host.Host{Hostname: "t"}
	for i := 0; i < n; i++ {
		h.CPUs = append(h.CPUs, host.CPU{ID: i, Online: true})
	}
	return h
}

func TestExhaustiveSpace(t *testing.T) {
	h := twoCPUHost(2)
	for _, tc := range []struct {
		name string
		app  workload.AppInfo
		want int
	}{
		{"storage", workload.AppInfo{}, 1 + 3},                                                 // app ∈ {0,1,0-1}
		{"veth", workload.AppInfo{Device: "vs1"}, 1 + 3*3*4},                                   // app × client × rps(off,0,1,0-1)
		{"threaded", workload.AppInfo{Device: "vs1", NAPIThreads: []int{10, 11}}, 1 + 3*3*4*3}, // × napi
		{"client fixed", workload.AppInfo{Device: "vs1", ClientFixed: true}, 1 + 3*4},          // app × rps
	} {
		sp, err := ExhaustiveSpace(h, tc.app)
		if err != nil {
			t.Fatal(err)
		}
		if len(sp) != tc.want {
			t.Errorf("%s: %d plans, want %d", tc.name, len(sp), tc.want)
		}
		seen := map[string]bool{}
		for _, c := range sp {
			if seen[c] {
				t.Errorf("%s: %s twice", tc.name, c)
			}
			seen[c] = true
			if c != "default" {
				if _, err := ParseSpec(c); err != nil {
					t.Errorf("%s: %v", c, err)
				}
			}
		}
		if sp[0] != "default" {
			t.Errorf("first is %s", sp[0])
		}
	}
	if _, err := ExhaustiveSpace(twoCPUHost(5), workload.AppInfo{}); err == nil {
		t.Error("5 CPUs accepted")
	}
	c := Candidates(h, workload.AppInfo{Device: "vs1"})
	if c[0] != "default" || len(c) < 8 {
		t.Errorf("candidates %v", c)
	}
	// RPS/RFS on a single-queue NIC's answer on 2 CPUs (application with the sender on CPU 0,
	// receive work moved to CPU 1) is a candidate; with the client fixed no
	// candidate moves the client.
	fixed := Candidates(h, workload.AppInfo{Device: "vs1", ClientFixed: true})
	joined := strings.Join(fixed, " ")
	if !strings.Contains(joined, "spec:app=0,rps=1 ") || !strings.Contains(joined, "spec:app=1,rps=1 ") || strings.Contains(joined, "client=") {
		t.Errorf("client-fixed candidates %v", fixed)
	}
	if len(fixed) != len(c)-2 {
		t.Errorf("%d client-fixed candidates, %d free", len(fixed), len(c))
	}
}

// scoreWorkload scores a configuration by its application CPUs, with a
// fixed small wobble per call, to test tune's decisions on known answers.
type scoreWorkload struct {
	score map[string]float64
	n     int
}

func (w *scoreWorkload) Name() string                       { return "score" }
func (w *scoreWorkload) Prepare() (workload.AppInfo, error) { return workload.AppInfo{}, nil }
func (w *scoreWorkload) Close() error                       { return nil }
func (w *scoreWorkload) Run(_ context.Context, _ time.Duration, s workload.Placement) (workload.Result, error) {
	w.n++
	wobble := []float64{-1, 0.5, 1, -0.5}[w.n%4]
	return workload.Result{Throughput: w.score[s.AppCPUs.String()] + wobble, Unit: "ops/s"}, nil
}

func TestTuneKeepsOnlyRealWins(t *testing.T) {
	h := twoCPUHost(2)
	cands := []string{"default", "spec:app=0", "spec:app=1", "spec:app=0-1"}
	for _, tc := range []struct {
		score   map[string]float64
		best    string
		kept    bool
		exhaust bool
		rounds  int
	}{
		{map[string]float64{"": 100, "0": 90, "1": 130, "0-1": 101}, "spec:app=1", true, false, stats.MinRuns},
		{map[string]float64{"": 100, "0": 90, "1": 100.5, "0-1": 80}, "", false, false, stats.MinRuns},
		{map[string]float64{"": 100, "0": 90, "1": 130, "0-1": 101}, "spec:app=1", true, true, stats.MinRuns},
		// 3 runs each: 1.3x every time, yet no verdict (indicative).
		{map[string]float64{"": 100, "0": 90, "1": 130, "0-1": 101}, "spec:app=1", false, true, 3},
	} {
		w := &scoreWorkload{score: tc.score}
		r := &Runner{FS: liveFS, Workload: w, Duration: time.Millisecond, Configurator: Configs{}, h: h, StateDir: t.TempDir()}
		search := "auto"
		if tc.exhaust {
			search = "exhaustive"
		}
		res, err := TuneFor(context.Background(), r, cands, search, 20*time.Second, tc.rounds, "")
		if err != nil {
			t.Fatal(err)
		}
		if tc.rounds < stats.MinRuns && (res.Best != tc.best || !strings.Contains(res.Why, "indicative")) {
			t.Errorf("%d rounds: best %s, %s", tc.rounds, res.Best, res.Why)
		}
		if res.Kept != tc.kept || (tc.kept && res.Best != tc.best) {
			t.Errorf("%v %s: best %s kept %v (%s)", tc.score, search, res.Best, res.Kept, res.Why)
		}
		if tc.kept && (res.Setup == nil || res.Setup.AppCPUs.String() != "1") {
			t.Errorf("winner setup %+v", res.Setup)
		}
	}
}

// mapConfigs sets up each configuration as the map says (an error for
// one it does not know).
type mapConfigs map[string]*Setup

func (m mapConfigs) Setup(config string, _ *host.Host, _ workload.AppInfo) (*Setup, error) {
	s, ok := m[config]
	if !ok {
		return nil, fmt.Errorf("device has no NAPI instance")
	}
	c := *s
	return &c, nil
}

// Before any run, tune sets aside what needs no measurement of its own —
// a candidate that changes nothing, one identical to an earlier one, one
// that cannot be set up — and labels it; every candidate it ranks was
// measured at least stats.MinRankRuns times.
func TestTuneMergesBeforeMeasuring(t *testing.T) {
	h := twoCPUHost(2)
	one, two := cpuset.Of(0), cpuset.Of(1)
	cfg := mapConfigs{
		"default":    {},
		"spec:app=0": {AppCPUs: one},
		"spec:app=1": {AppCPUs: two},
		"latency":    {},             // its writes fell outside the device under test
		"colocate":   {AppCPUs: two}, // the same placement as spec:app=1
	}
	w := &scoreWorkload{score: map[string]float64{"": 100, "0": 90, "1": 130}}
	r := &Runner{FS: liveFS, Workload: w, Duration: time.Millisecond, Configurator: cfg, h: h, StateDir: t.TempDir()}
	cands := []string{"default", "spec:app=0", "latency", "spec:app=1", "colocate", "efficiency"}
	res, err := TuneFor(context.Background(), r, cands, "auto", 20*time.Second, stats.MinRuns, "")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"latency": "no change", "colocate": "same as spec:app=1", "efficiency": "not measured: device has no NAPI instance"}
	if diff := cmp.Diff(want, res.Merged); diff != "" {
		t.Errorf("merged (-want +got):\n%s", diff)
	}
	for _, c := range []string{"latency", "colocate", "efficiency"} {
		if len(res.Obs[c]) != 0 || slices.Contains(res.Ranked, c) {
			t.Errorf("%s was measured or ranked: %v", c, res.Obs[c])
		}
	}
	for _, c := range res.Ranked {
		if n := len(res.Obs[c]); n < stats.MinRankRuns {
			t.Errorf("%s ranked over %d runs", c, n)
		}
	}
	if res.Best != "spec:app=1" || !res.Kept {
		t.Errorf("best %s kept %v: %s", res.Best, res.Kept, res.Why)
	}
}

// slowWorkload takes d per run.
type slowWorkload struct {
	scoreWorkload
	d time.Duration
}

func (w *slowWorkload) Run(ctx context.Context, d time.Duration, s workload.Placement) (workload.Result, error) {
	time.Sleep(w.d)
	return w.scoreWorkload.Run(ctx, d, s)
}

// --budget is a hard limit, checked before each run: a search that cannot
// confirm its best in time keeps nothing and says what was cut.
func TestTuneBudgetIsHard(t *testing.T) {
	h := twoCPUHost(2)
	one, two := cpuset.Of(0), cpuset.Of(1)
	cfg := mapConfigs{"default": {}, "spec:app=0": {AppCPUs: one}, "spec:app=1": {AppCPUs: two}}
	w := &slowWorkload{scoreWorkload{score: map[string]float64{"": 100, "0": 90, "1": 130}}, 60 * time.Millisecond}
	r := &Runner{FS: liveFS, Workload: w, Duration: time.Millisecond, Configurator: cfg, h: h, StateDir: t.TempDir()}
	// Runs take about 60 ms: 1 s holds the nine ranking runs (three
	// candidates, three each), not the confirmation's 3 × 6 more.
	res, err := TuneFor(context.Background(), r, []string{"default", "spec:app=0", "spec:app=1"}, "auto", time.Second, stats.MinRuns, "")
	if err != nil {
		t.Fatal(err)
	}
	if res.Kept || !strings.Contains(res.Cut, "no time left to confirm") || !strings.Contains(res.Why, "budget") {
		t.Fatalf("kept %v, cut %q, why %q", res.Kept, res.Cut, res.Why)
	}
	if res.Confirm != nil {
		t.Errorf("a confirmation ran past the budget: %d runs", len(res.Confirm.Runs))
	}
	// A budget shorter than one run measures nothing, and says so.
	_, err = TuneFor(context.Background(), r, []string{"default", "spec:app=0"}, "auto", 100*time.Millisecond, stats.MinRuns, "")
	if err == nil || !strings.Contains(err.Error(), "budget") {
		t.Errorf("a budget below one run: %v", err)
	}
}
