package bench

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/irqpilot/irqpilot/internal/bench/stats"
	"github.com/irqpilot/irqpilot/internal/bench/workload"
	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/setting"
)

func TestCombine(t *testing.T) {
	suspend, off := uint64(0), false
	h := twoCPUHost(2)
	h.NICs = []host.NIC{{Name: "vs1", Virtual: true}}
	h.NAPI = []host.NAPI{{ID: 8193, Device: "vs1", Threaded: &off, IRQSuspendTimeout: &suspend}}
	app := workload.AppInfo{Device: "vs1"}
	s, err := Configs{}.Setup("spec:app=1&napi:threaded=1,defer=2", h, app)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range s.Changes {
		got = append(got, c.Target+"="+c.Value)
	}
	if d := cmp.Diff([]string{"vs1 threaded NAPI=1", "vs1 napi_defer_hard_irqs=2"}, got); d != "" {
		t.Errorf("changes (-want +got):\n%s", d)
	}
	if s.AppCPUs.String() != "1" || s.Config != "spec:app=1&napi:threaded=1,defer=2" {
		t.Errorf("setup %+v", s)
	}
	for bad, why := range map[string]string{
		"napi:defer=2&napi:defer=3,flush=1": "both set",
		"spec:app=0&spec:app=1":             "place the application on 0 and on 1",
		"spec:client=0&spec:client=1":       "place the load generator",
		"spec:app=0&":                       "an empty part",
		"spec:app=0&nosuch":                 "unknown configuration",
		"spec:app=0#x&napi:threaded=1":      "go after the whole combination",
	} {
		if _, err := (Configs{}).Setup(bad, h, app); err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("%s: %v, want an error with %q", bad, err, why)
		}
	}
}

func TestCombination(t *testing.T) {
	obs := map[string][]float64{
		"default":             {100, 100},
		"spec:app=0":          {90},
		"spec:app=1":          {120, 121},
		"rps-spread":          {110},
		"napi:threaded=1":     {105},
		"napi:defer=2":        {90},
		"default/busypoll=50": {130},
	}
	ranked := []string{"default/busypoll=50", "spec:app=1", "rps-spread", "napi:threaded=1", "default", "spec:app=0", "napi:defer=2"}
	kindOf := func(c string) (bool, bool) {
		if c == "default" || strings.Contains(c, "/") {
			return false, false
		}
		return !strings.HasPrefix(c, "napi:"), strings.HasPrefix(c, "napi:")
	}
	combo, place := Combination(ranked, obs, "default", kindOf)
	if combo != "spec:app=1&napi:threaded=1" || place != "spec:app=1" {
		t.Errorf("Combination = %q, %q", combo, place)
	}
	obs["napi:threaded=1"] = []float64{99}
	if combo, _ := Combination(ranked, obs, "default", kindOf); combo != "" {
		t.Errorf("combined %q with no NAPI setting better than the baseline", combo)
	}
	if d := cmp.Diff([]string{"a", "c", "b"}, insertRanked([]string{"a", "b"}, map[string][]float64{"a": {3}, "b": {1}, "c": {2}}, "c")); d != "" {
		t.Errorf("insertRanked (-want +got):\n%s", d)
	}
}

// combineConfigs sets nothing on the machine: each part is a label the
// workload scores, and a combination goes through Combine. So that tune
// does not set them aside as changing nothing, each label but default
// asks the (fake) workload for a busy-polling setting of its own.
type combineConfigs struct{}

func (c combineConfigs) Setup(config string, h *host.Host, app workload.AppInfo) (*Setup, error) {
	if strings.Contains(config, CombineSep) {
		return Combine(c, config, h, app)
	}
	s := &Setup{Config: config}
	if config != "default" {
		s.BusyPoll = &workload.BusyPoll{SocketUsecs: len(config)}
		for _, r := range config {
			s.BusyPoll.SocketUsecs = 31*s.BusyPoll.SocketUsecs + int(r)
		}
	}
	return s, nil
}

// labelWorkload scores a run by its configuration's label, with a wobble.
type labelWorkload struct {
	scoreWorkload
}

func (w *labelWorkload) Run(_ context.Context, _ time.Duration, s workload.Placement) (workload.Result, error) {
	w.n++
	wobble := []float64{-1, 0.5, 1, -0.5}[w.n%4]
	return workload.Result{Throughput: w.score[BaseConfig(s.Config)] + wobble, Unit: "ops/s"}, nil
}

// TestTuneCombines: the best placement and the best NAPI setting, each
// better than the baseline, are measured together, and the combination is
// kept when it beats both.
func TestTuneCombines(t *testing.T) {
	orig := []string{"default", "spec:app=0", "spec:app=1", "napi:threaded=1", "napi:defer=2,flush=20000"}
	cands := make([]string, len(orig), len(orig)+4) // room to append into
	copy(cands, orig)
	for _, tc := range []struct {
		combo float64
		best  string
	}{
		{140, "spec:app=1&napi:threaded=1"},
		{95, "spec:app=1"}, // deferral undoes the placement's gain: the combination is measured, not assumed
	} {
		score := map[string]float64{"default": 100, "spec:app=0": 90, "spec:app=1": 120, "napi:threaded=1": 110, "napi:defer=2,flush=20000": 80,
			"spec:app=1&napi:threaded=1": tc.combo}
		for _, search := range []string{"auto", "exhaustive"} {
			r := &Runner{FS: liveFS, Workload: &labelWorkload{scoreWorkload{score: score}}, Duration: time.Millisecond, Configurator: combineConfigs{}, h: twoCPUHost(2), StateDir: t.TempDir()}
			// What each candidate's setup wrote when measured, which setupKind
			// reads (combineConfigs applies nothing).
			one, two := cpuset.Of(0), cpuset.Of(1)
			r.Setups = map[string]*Setup{
				"spec:app=0":               {AppCPUs: one},
				"spec:app=1":               {AppCPUs: two},
				"napi:threaded=1":          {Changes: []setting.Change{{Kind: setting.KindDevThreaded}}},
				"napi:defer=2,flush=20000": {Changes: []setting.Change{{Kind: setting.KindDevDeferHardIRQs}, {Kind: setting.KindDevGROFlushTimeout}}},
			}
			res, err := TuneFor(context.Background(), r, cands, search, 20*time.Second, stats.MinRuns, ObjectiveThroughput)
			if err != nil {
				t.Fatal(err)
			}
			if res.Best != tc.best || !res.Kept {
				t.Errorf("%s, combination at %v: best %s kept %v: %s", search, tc.combo, res.Best, res.Kept, res.Why)
			}
			if n := len(res.Obs["spec:app=1&napi:threaded=1"]); n == 0 || n > stats.MinRuns || res.Candidates[len(res.Candidates)-1] != "spec:app=1&napi:threaded=1" {
				t.Errorf("%s: the combination was measured %d times (want 1 to %d): %v", search, n, stats.MinRuns, res.Candidates)
			}
			if !cmp.Equal(cands, orig) {
				t.Errorf("%s: the caller's candidates changed: %v", search, cands)
			}
		}
	}
}

// setupKind tells placements from NAPI settings by what their setups
// write, as the runner makes them for the device under test.
func TestSetupKind(t *testing.T) {
	suspend, off := uint64(0), false
	h := twoCPUHost(2)
	h.NICs = []host.NIC{{Name: "vs1", Virtual: true}}
	h.NAPI = []host.NAPI{{ID: 8193, Device: "vs1", Threaded: &off, IRQSuspendTimeout: &suspend}}
	app := workload.AppInfo{Device: "vs1"}
	r := &Runner{FS: liveFS, Workload: &scoreWorkload{}, Configurator: Configs{}, h: h, app: app, scope: NewScope(h, app)}
	for c, want := range map[string][2]bool{
		"default":                    {false, false},
		"spec:app=1,rps=0":           {true, false},
		"irqbalance":                 {true, false},
		"napi:threaded=1":            {false, true},
		"efficiency":                 {false, true},
		"default/busypoll=50":        {false, false},
		"spec:app=1&napi:threaded=1": {false, false},
		"spec:app=1#best":            {false, false},
		"nosuch":                     {false, false},
	} {
		s, err := r.Setup(c, app)
		if err != nil {
			s = nil // not measurable: never set up
		}
		p, k := setupKind(c, s)
		if got := [2]bool{p, k}; got != want {
			t.Errorf("setupKind(%q) = placement %v, setting %v; want %v", c, p, k, want)
		}
	}
	// A setup that changes nothing places nothing.
	if p, k := setupKind("per-queue", &Setup{}); p || k {
		t.Errorf("an empty setup is placement %v, setting %v", p, k)
	}
}
