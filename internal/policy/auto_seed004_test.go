package policy

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/load"
	"github.com/irqpilot/irqpilot/internal/plan"
)

// auto on seed 004's scenario (a udp flood through a veth on two CPUs: the
// sender and its softirq on CPU 0, the consumer on CPU 1), measured,
// recorded and disturbed.

// seed004Host is seed 004's machine: two CPUs and the veth vs1 (one
// queue, no IRQ) that receives the udp flood.
func seed004Host() *host.Host {
	h := synth{CPUs: 2, NICs: []synthNIC{{Name: "vs1", Queues: 1, Kind: "veth", NoIRQs: true}}}.Build()
	for i := range h.NICs {
		h.NICs[i].Virtual = true
	}
	return h
}

// seed004Options asks auto about vs1 alone, for the application app.
func seed004Options(l *load.Load, app string) Options {
	return Options{Load: Measured(l), App: app, Devices: []string{"vs1"}, MachineWide: true}
}

// predictSeed004 predicts doing nothing and p on l with auto's model and
// fails the test when p moves work onto a CPU without headroom.
func predictSeed004(t *testing.T, name string, h *host.Host, l *load.Load, o Options, p *plan.Plan) (base, pred Prediction) {
	t.Helper()
	m := newModel(h, l, []string{"vs1"})
	m.selected = selectedPIDs(o)
	base, pred = m.Predict(&plan.Plan{}), m.Predict(p)
	if why := judgeHeadroom(l, base, pred); why != "" {
		t.Errorf("%s: the plan %s", name, why)
	}
	return base, pred
}

// Seed 004's scenario on two CPUs: the sender and CPU0's softirq saturate
// CPU0, the consumer runs on CPU1. RPS to CPU1 alone would overload CPU1
// with the consumer still there; the model picks RPS to CPU1 with the
// consumer moved to CPU0 — what tune found best here (1.29x).
func TestAutoSeed004TwoCPUs(t *testing.T) {
	h := seed004Host()
	sink := load.TaskLoad{PID: 4242, TID: 4242, Comm: "udp-sink", CPU: 1, Busy: 45}
	l := synthLoad(h, map[int]cpuProfile{0: {user: 10, sys: 14, soft: 72}, 1: {user: 30, sys: 15}}, nil, []load.TaskLoad{sink})
	p := mustMake(t, "auto", h, seed004Options(l, "pid:4242"))
	if len(p.RxQueues) == 0 || p.RxQueues[0].RPSCPUs == nil || p.RxQueues[0].RPSCPUs.String() != "1" {
		t.Fatalf("auto did not steer vs1 to CPU 1: %+v\n%s", p.RxQueues, p.Why)
	}
	if len(p.Apps) != 1 || p.Apps[0].PID != 4242 || p.Apps[0].CPUs.String() != "0" {
		t.Errorf("consumer placement %+v, want pid 4242 on CPU 0\n%s", p.Apps, p.Why)
	}
}

// Two measurements of seed 004 where no CPU has the headroom for the work
// any candidate moves, so auto changes nothing and says why, with the
// prediction.
//
// Unattributed work on CPU 1, as a fresh CI machine measured the scenario:
// CPU 0 saturated with 41 % softirq beside the sender, CPU 1 84 % busy of
// which the sink is only 46 % (the rest unattributed). No CPU has the headroom (diagnose.Headroom) for
// the work any candidate moves: RPS alone fills CPU 1 past 100 %, and RPS
// with the consumer moved beside the sender puts more work on CPU 0 than
// RPS takes off it (predicted 109 %).
//
// CPU 1 at 98 %: every CPU busy — CPU 0 saturated by the sender and its
// softirq, CPU 1 98 % busy with the consumer and another process. Any
// steering moves softirq onto CPU 1, which has no headroom (the old
// separate mode let RPS through at a predicted 122 %): auto changes
// nothing, shows the prediction of what it rejected, and the ranking
// carries units.
func TestAutoSeed004NoHeadroom(t *testing.T) {
	h := seed004Host()
	task := func(pid, cpu int, comm string, busy float64) load.TaskLoad {
		return load.TaskLoad{PID: pid, TID: pid, Comm: comm, CPU: cpu, Busy: busy}
	}
	for _, c := range []struct {
		name  string
		prof  map[int]cpuProfile
		tasks []load.TaskLoad
		why   []string
	}{
		{"unattributed work on CPU 1", map[int]cpuProfile{0: {user: 9, sys: 50, soft: 41}, 1: {user: 30, sys: 54}},
			[]load.TaskLoad{task(4242, 1, "udp-sink", 46), task(5151, 0, "udp-send", 59)},
			[]string{"nothing is changed", "0% spare", "above the 80% a CPU may be filled to", "estimated from interrupt counts"}},
		{"CPU 1 at 98 %", map[int]cpuProfile{0: {user: 10, sys: 14, soft: 72}, 1: {user: 70, sys: 28}},
			[]load.TaskLoad{task(4242, 1, "udp-sink", 50), task(777, 1, "cc1", 48)},
			[]string{"nothing is changed", "onto CPU 1 (CPU 1 98% busy, 0% spare)", "no change: 24% of a CPU (busiest CPU1 98% busy, CPU0 72% in interrupts)", "ranked by the interrupt time taken from application threads"}},
	} {
		l := synthLoad(h, c.prof, nil, c.tasks)
		wantNoChange(t, c.name+": auto moved work onto a CPU without headroom", h, seed004Options(l, "pid:4242"), c.why...)
	}
}

// The application named by a selector other than pid: (what an operator
// gives the agent or plan for a service): the caller resolves it to PIDs,
// auto reads their threads and keeps the selector in the plan, so the
// placement still applies after the application restarts.
func TestAutoAppSelector(t *testing.T) {
	h := seed004Host()
	sink := load.TaskLoad{PID: 4242, TID: 4242, Comm: "udp-sink", CPU: 1, Busy: 45}
	l := synthLoad(h, map[int]cpuProfile{0: {user: 10, sys: 14, soft: 72}, 1: {user: 30, sys: 15}}, nil, []load.TaskLoad{sink})
	p := mustMake(t, "auto", h, Options{Load: Measured(l), App: "comm:udp-sink", AppPIDs: []int{4242}, Devices: []string{"vs1"}, MachineWide: true})
	if len(p.Apps) != 1 || p.Apps[0].Comm != "udp-sink" || p.Apps[0].PID != 0 || p.Apps[0].CPUs.String() != "0" {
		t.Fatalf("consumer placement %+v, want comm udp-sink on CPU 0\n%s", p.Apps, p.Why)
	}
	// A consumer that fills its CPU (96 %, as under a race-built sink) is
	// still one CPU's worth, but CPU 0 has no headroom for it: moving it
	// there adds more than RPS takes off (predicted 127 %), so no change.
	sink.Busy = 96
	l = synthLoad(h, map[int]cpuProfile{0: {user: 10, sys: 14, soft: 72}, 1: {user: 30, sys: 66}}, nil, []load.TaskLoad{sink})
	p = mustMake(t, "auto", h, Options{Load: Measured(l), App: "comm:udp-sink", AppPIDs: []int{4242}, Devices: []string{"vs1"}, MachineWide: true})
	if planChanges(p) != 0 || !strings.Contains(p.Why, "spare") {
		t.Errorf("a consumer filling CPU 1: planned %+v %+v without headroom\n%s", p.Apps, p.RxQueues, p.Why)
	}
	second := load.TaskLoad{PID: 4243, TID: 4243, Comm: "udp-sink", CPU: 0, Busy: 90}
	l = synthLoad(h, map[int]cpuProfile{0: {user: 10, sys: 14, soft: 72}, 1: {user: 30, sys: 66}}, nil, []load.TaskLoad{sink, second})
	p = mustMake(t, "auto", h, Options{Load: Measured(l), App: "comm:udp-sink", AppPIDs: []int{4242, 4243}, Devices: []string{"vs1"}, MachineWide: true})
	for _, a := range p.Apps {
		if a.CPUs.Len() == 1 {
			t.Errorf("two busy workers (186 %%) pinned onto one CPU: %+v\n%s", p.Apps, p.Why)
		}
	}
	// Not resolved (not running): no placement candidate, and no panic.
	p = mustMake(t, "auto", h, Options{Load: Measured(l), App: "comm:udp-sink", Devices: []string{"vs1"}, MachineWide: true})
	if len(p.Apps) != 0 || !strings.Contains(p.Why, "no busy thread measured") {
		t.Errorf("unresolved selector: apps %+v\n%s", p.Apps, p.Why)
	}
}

// The rules every candidate must pass (judge), on seed 004's two CPUs:
// CPU 0 saturated (96 %), CPU 1 45 % busy.
func TestAutoJudgeRules(t *testing.T) {
	h := seed004Host()
	l := synthLoad(h, map[int]cpuProfile{0: {user: 10, sys: 14, soft: 72}, 1: {user: 30, sys: 15}}, nil, nil)
	base := Prediction{Busy: map[int]float64{0: 96, 1: 45}, IRQ: map[int]float64{0: 72, 1: 0}}
	for _, c := range []struct {
		name         string
		busy, irq    map[int]float64
		reject, warn string
	}{
		{"work onto CPU 1 within its headroom", map[int]float64{0: 60, 1: 78}, map[int]float64{0: 36, 1: 33}, "", ""},
		{"work onto CPU 1 past the 80 % ceiling", map[int]float64{0: 50, 1: 90}, map[int]float64{0: 26, 1: 45}, "onto CPU 1 (CPU 1 45% busy, 35% spare), 90% busy after, above the 80%", ""},
		{"work onto saturated CPU 0", map[int]float64{0: 100, 1: 40}, map[int]float64{0: 72, 1: 0}, "onto CPU 0 (CPU 0 96% busy, 0% spare)", ""},
		{"CPU 0 relieved but still saturated", map[int]float64{0: 95.5, 1: 45.4}, map[int]float64{0: 71.5, 1: 0.4}, "", "CPU0 is still predicted 96% busy, above the 95% at which a CPU counts as saturated; the change is kept because doing nothing is predicted worse (CPU0 96% busy)"},
	} {
		warn, reject := judge(l, base, Prediction{Busy: c.busy, IRQ: c.irq})
		if c.reject == "" && reject != "" || c.reject != "" && !strings.Contains(reject, c.reject) {
			t.Errorf("%s: rejected %q, want %q", c.name, reject, c.reject)
		}
		if c.warn != warn {
			t.Errorf("%s: warning %q, want %q", c.name, warn, c.warn)
		}
	}
}

// Disturbances a shared machine adds, injected into seed 004's measured
// load (the sender and its softirq saturate CPU 0, the consumer uses 45 %
// of CPU 1): a CPU hog on the saturated CPU 0 (it takes time from the
// threads there; the softirq runs first), a second process on CPU 1, and
// a hog on each. Whatever auto decides, it never moves work onto a CPU
// without headroom or predicts a CPU it loads saturated; it either makes
// seed 004's choice (RPS to CPU 1, the consumer to CPU 0) or changes
// nothing and says why (marginal, or no candidate fits).
func TestAutoSeed004Disturbances(t *testing.T) {
	h := seed004Host()
	sink := load.TaskLoad{PID: 4242, TID: 4242, Comm: "udp-sink", CPU: 1, Busy: 45}
	hog0 := load.TaskLoad{PID: 999, TID: 999, Comm: "stress-ng-cpu", CPU: 0, Busy: 20}
	for _, c := range []struct {
		name  string
		prof  map[int]cpuProfile
		tasks []load.TaskLoad
		acts  bool // seed 004's choice is right (and robust) here
	}{
		{"recorded", map[int]cpuProfile{0: {user: 10, sys: 14, soft: 72}, 1: {user: 30, sys: 15}}, []load.TaskLoad{sink}, true},
		{"hog on CPU 0", map[int]cpuProfile{0: {user: 24, sys: 6, soft: 68}, 1: {user: 30, sys: 15}}, []load.TaskLoad{sink, hog0}, false},
		{"second process on CPU 1", map[int]cpuProfile{0: {user: 10, sys: 14, soft: 72}, 1: {user: 60, sys: 20}}, []load.TaskLoad{sink, {PID: 31, TID: 31, Comm: "cc1", CPU: 1, Busy: 35}}, false},
		{"hog on CPU 1", map[int]cpuProfile{0: {user: 10, sys: 14, soft: 72}, 1: {user: 80, sys: 20}}, []load.TaskLoad{{PID: 4242, TID: 4242, Comm: "udp-sink", CPU: 1, Busy: 45}, {PID: 998, TID: 998, Comm: "stress-ng-cpu", CPU: 1, Busy: 55}}, false},
		// 6 % more on CPU 1 leaves room for the softirq as measured, but
		// not for 10 % more of it: marginal.
		{"small second process on CPU 1", map[int]cpuProfile{0: {user: 10, sys: 14, soft: 72}, 1: {user: 36, sys: 15}}, []load.TaskLoad{sink, {PID: 31, TID: 31, Comm: "cc1", CPU: 1, Busy: 6}}, false},
	} {
		l := synthLoad(h, c.prof, nil, c.tasks)
		o := seed004Options(l, "pid:4242")
		p := mustMake(t, "auto", h, o)
		seed004 := len(p.RxQueues) == 1 && p.RxQueues[0].RPSCPUs.String() == "1" && len(p.Apps) == 1 && p.Apps[0].CPUs.String() == "0"
		switch {
		case seed004:
		case planChanges(p) == 0 && strings.Contains(p.Why, "nothing is changed"):
		default:
			t.Errorf("%s: neither seed 004's choice nor no change: %+v %+v\n%s", c.name, p.RxQueues, p.Apps, p.Why)
		}
		if c.acts && !seed004 {
			t.Errorf("%s: seed 004's choice expected\n%s", c.name, p.Why)
		}
		if c.name == "small second process on CPU 1" && !IsMarginal(p) {
			t.Errorf("%s: not reported marginal\n%s", c.name, p.Why)
		}
		predictSeed004(t, c.name, h, l, o, p)
		t.Logf("%s: %s", c.name, p.Why)
	}
}

// wantNoChange makes auto's plan for o on h and fails the test (saying
// what) unless it changes nothing, and unless its why says each of wants.
func wantNoChange(t *testing.T, what string, h *host.Host, o Options, wants ...string) {
	t.Helper()
	p := mustMake(t, "auto", h, o)
	if planChanges(p) != 0 {
		t.Fatalf("%s: %+v %+v\n%s", what, p.RxQueues, p.Apps, p.Why)
	}
	whyHas(t, p.Why, wants...)
}

// recordedSeed004 is a load measured on the project's test machine during
// bench's seed 004 scenario (TestAutoOnSeed004Scenario with
// IRQPILOT_RECORD_SEED004): the sender and the whole softirq on CPU 0, the
// sink (app_pid) on CPU 1 — and, as it happened, another process (cp)
// using a third of CPU 1.
func recordedSeed004(t *testing.T) (*load.Load, int) {
	t.Helper()
	data, err := os.ReadFile("testdata/seed004-load.json")
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		AppPID int        `json:"app_pid"`
		Load   *load.Load `json:"load"`
	}
	if err := json.Unmarshal(data, &rec); err != nil {
		t.Fatal(err)
	}
	return rec.Load, rec.AppPID
}

// auto on the recorded seed 004 load, as recorded and with disturbances
// injected (the recorded second process on CPU 1 taken away; a CPU hog
// beside the sender on CPU 0; a hog on CPU 1): whatever it decides, it
// never moves work onto a CPU without headroom nor raises the busiest CPU,
// it either steers away from CPU 0 with the sink beside the sender or
// changes nothing and says why, and equal inputs give equal plans. As
// recorded, CPU 1 has no spare time: nothing may move there.
func TestAutoOnRecordedSeed004(t *testing.T) {
	h := seed004Host()
	rec, pid := recordedSeed004(t)
	disturb := func(f func(l *load.Load)) *load.Load {
		l := *rec
		l.CPUs = slices.Clone(rec.CPUs)
		l.Tasks = slices.Clone(rec.Tasks)
		f(&l)
		return &l
	}
	cpu := func(l *load.Load, id int) *load.CPULoad { return l.CPU(id) }
	for _, c := range []struct {
		name string
		l    *load.Load
	}{
		{"recorded", rec},
		{"without the second process on CPU 1", disturb(func(l *load.Load) {
			var cp float64
			l.Tasks = slices.DeleteFunc(l.Tasks, func(tk load.TaskLoad) bool {
				if tk.Comm == "cp" {
					cp += tk.Busy
					return true
				}
				return false
			})
			c1 := cpu(l, 1)
			c1.System = max(0, c1.System-cp)
			c1.Idle += cp
		})},
		{"hog on CPU 0", disturb(func(l *load.Load) {
			// The hog takes time from the sender; softirq runs first.
			l.Tasks = append(l.Tasks, load.TaskLoad{PID: 999, TID: 999, Comm: "stress-ng-cpu", CPU: 0, Busy: 30})
			c0 := cpu(l, 0)
			c0.User += 30
			c0.System = max(0, c0.System-15)
			c0.SoftIRQ -= 15
		})},
		{"hog on CPU 1", disturb(func(l *load.Load) {
			l.Tasks = append(l.Tasks, load.TaskLoad{PID: 998, TID: 998, Comm: "stress-ng-cpu", CPU: 1, Busy: 50})
		})},
	} {
		o := seed004Options(c.l, fmt.Sprintf("pid:%d", pid))
		p := mustMake(t, "auto", h, o)
		t.Logf("%s: %s", c.name, p.Why)
		if q, _ := Make("auto", h, o); q.Why != p.Why || planChanges(q) != planChanges(p) {
			t.Errorf("%s: equal inputs, different plans", c.name)
		}
		seed004 := len(p.RxQueues) == 1 && p.RxQueues[0].RPSCPUs.String() == "1" && len(p.Apps) == 1 && p.Apps[0].CPUs.String() == "0"
		if !seed004 && (planChanges(p) != 0 || !strings.Contains(p.Why, "nothing is changed")) {
			t.Errorf("%s: neither seed 004's choice nor no change with its reason: %+v %+v", c.name, p.RxQueues, p.Apps)
		}
		base, pred := predictSeed004(t, c.name, h, c.l, o, p)
		if maxBusy(pred) > maxBusy(base)+moveEpsilon {
			t.Errorf("%s: busiest CPU %.0f%% → %.0f%%", c.name, maxBusy(base), maxBusy(pred))
		}
		if c.name == "recorded" && (planChanges(p) != 0 || !strings.Contains(p.Why, "CPU 1 100% busy, 0% spare")) {
			t.Errorf("recorded: CPU 1 had no spare time, yet: %d changes, %s", planChanges(p), p.Why)
		}
	}
}
