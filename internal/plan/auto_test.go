package plan

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/hostgen"
	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/load"
)

// cpuProfile is one CPU's measured time split, percent.
type cpuProfile struct{ user, sys, irq, soft float64 }

// synthLoad builds a measurement of h: every online CPU idle but for the
// given profiles; IRQ rates per CPU; NET_RX softirqs where soft time is.
func synthLoad(h *host.Host, prof map[int]cpuProfile, rates map[int]map[int]float64, tasks []load.TaskLoad) *load.Load {
	l := &load.Load{Interval: 5 * time.Second, SoftirqTypes: []string{"TIMER", "NET_TX", "NET_RX", "BLOCK", "RCU"}}
	for _, c := range h.CPUs {
		if !c.Online {
			continue
		}
		p := prof[c.ID]
		cl := load.CPULoad{ID: c.ID, CPUTime: load.CPUTime{User: p.user, System: p.sys, IRQ: p.irq, SoftIRQ: p.soft, Idle: 100 - p.user - p.sys - p.irq - p.soft}, Softirqs: map[string]float64{"TIMER": 250, "RCU": 100}}
		if p.soft > 0 {
			cl.Softirqs["NET_RX"] = p.soft * 1000
			cl.NetRx = p.soft * 1000
		}
		l.CPUs = append(l.CPUs, cl)
	}
	for irq, per := range rates {
		r := load.IRQRate{IRQ: irq, PerCPU: per}
		for c, v := range per {
			r.Rate += v
			if v > 0 {
				r.CPUs = r.CPUs.Add(c)
			}
		}
		l.IRQs = append(l.IRQs, r)
	}
	l.Tasks = tasks
	return l
}

func planChanges(p *Plan) int {
	return len(p.IRQs) + len(p.RxQueues) + len(p.TxQueues) + len(p.Apps)
}

// An idle host gets an empty plan that says why, with numbers.
func TestAutoIdleHostPlansNothing(t *testing.T) {
	for _, s := range []synth{
		{cpus: 2, nics: []synthNIC{{name: "eth0", queues: 1}}},
		{cpus: 16, smt: true, nics: []synthNIC{{name: "eth0", queues: 8}}},
		{cpus: 4, nics: []synthNIC{{name: "eth0", queues: 4, managed: true}}},
	} {
		h := s.build()
		l := synthLoad(h, map[int]cpuProfile{0: {user: 10, sys: 5, irq: 1, soft: 3}}, nil, nil)
		p, err := Make("auto", h, Options{Load: Measured(l)})
		if err != nil {
			t.Fatal(err)
		}
		if planChanges(p) != 0 || p.RPSSockFlowEntries != nil || !strings.Contains(p.Why, "no evidence of harm") || !strings.Contains(p.Why, "CPU0 19% busy") {
			t.Errorf("%d CPUs idle: %d changes, why %q", s.cpus, planChanges(p), p.Why)
		}
	}
}

// CPU 0 saturated by two queues' softirq while the others wait: auto plans,
// the predicted busiest CPU is lower than before, and no isolated or offline
// CPU is used.
func TestAutoSaturatedCPUPlansAwayFromIt(t *testing.T) {
	for _, s := range []synth{
		{cpus: 4, nics: []synthNIC{{name: "eth0", queues: 2}}},
		{cpus: 8, offline: []int{7}, isolated: []int{5, 6}, nics: []synthNIC{{name: "eth0", queues: 2}}},
		{cpus: 16, smt: true, nodes: 2, nics: []synthNIC{{name: "eth0", queues: 2}}},
	} {
		h := s.build()
		nic := h.NIC("eth0")
		// Both queue IRQs fire on CPU 0 only (e.g. a BIOS default).
		rates := map[int]map[int]float64{}
		for _, n := range nic.IRQs {
			rates[n] = map[int]float64{0: 20000}
		}
		l := synthLoad(h, map[int]cpuProfile{0: {user: 5, sys: 5, irq: 12, soft: 75}, 1: {user: 20, sys: 5}}, rates, nil)
		p, err := Make("auto", h, Options{Load: Measured(l)})
		if err != nil {
			t.Fatal(err)
		}
		if planChanges(p) == 0 {
			t.Fatalf("%+v: CPU0 at 87%% interrupts and auto changed nothing: %s", s, p.Why)
		}
		// With isolated CPUs the breach decides (dedicated-core); else the
		// plan gives the model's prediction.
		if len(s.isolated) == 0 && (!strings.Contains(p.Why, "Predicted") || !strings.Contains(p.Why, "CPU0")) {
			t.Errorf("why does not give the prediction: %s", p.Why)
		}
		checkProperties(t, "auto/saturated", h, p)
		var nics []string
		for _, n := range h.NICs {
			nics = append(nics, n.Name)
		}
		m := newModel(h, l, nics)
		before, after := m.Predict(&Plan{}), m.Predict(p)
		if after.Busy[0] >= before.Busy[0] {
			t.Errorf("predicted CPU0 %.0f%% → %.0f%%: not lower", before.Busy[0], after.Busy[0])
		}
		if _, mx := after.Max(); mx > Overload {
			t.Errorf("plan predicted to overload a CPU (%.0f%%)", mx)
		}
		usable := cpuset.Range(0, s.cpus-1).Difference(cpuset.Of(s.offline...)).Difference(cpuset.Of(s.isolated...))
		for _, e := range p.IRQs {
			if !e.CPUs.IsSubsetOf(usable) {
				t.Errorf("IRQ %d on %s, outside usable %s", *e.IRQ, e.CPUs, usable)
			}
		}
		for _, e := range p.RxQueues {
			if e.RPSCPUs != nil && !e.RPSCPUs.IsSubsetOf(usable) {
				t.Errorf("RPS on %s, outside usable %s", e.RPSCPUs, usable)
			}
		}
	}
}

// Seed 004's scenario on two CPUs: the sender and CPU0's softirq saturate
// CPU0, the consumer runs on CPU1. RPS to CPU1 alone would overload CPU1
// with the consumer still there; the model picks RPS to CPU1 with the
// consumer moved to CPU0 — what tune found best here (1.29x).
func TestAutoSeed004TwoCPUs(t *testing.T) {
	h := synth{cpus: 2, nics: []synthNIC{{name: "vs1", queues: 1, kind: "veth", noIRQs: true}}}.build()
	for i := range h.NICs {
		h.NICs[i].Virtual = true
	}
	sink := load.TaskLoad{PID: 4242, TID: 4242, Comm: "udp-sink", CPU: 1, Busy: 45}
	l := synthLoad(h, map[int]cpuProfile{0: {user: 10, sys: 14, soft: 72}, 1: {user: 30, sys: 15}}, nil, []load.TaskLoad{sink})
	p, err := Make("auto", h, Options{Load: Measured(l), App: "pid:4242", Devices: []string{"vs1"}, MachineWide: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.RxQueues) == 0 || p.RxQueues[0].RPSCPUs == nil || p.RxQueues[0].RPSCPUs.String() != "1" {
		t.Fatalf("auto did not steer vs1 to CPU 1: %+v\n%s", p.RxQueues, p.Why)
	}
	if len(p.Apps) != 1 || p.Apps[0].PID != 4242 || p.Apps[0].CPUs.String() != "0" {
		t.Errorf("consumer placement %+v, want pid 4242 on CPU 0\n%s", p.Apps, p.Why)
	}
}

// The same scenario as CI's fresh machine measured it: CPU 0 saturated with
// 41 % softirq beside the sender, CPU 1 84 % busy of which the sink is only
// 46 % (the rest unattributed). No CPU has the headroom (load.Headroom) for
// the work any candidate moves: RPS alone fills CPU 1 past 100 %, and RPS
// with the consumer moved beside the sender puts more work on CPU 0 than
// RPS takes off it (predicted 109 %). auto changes nothing and says so
// with the prediction.
func TestAutoSeed004UnattributedWork(t *testing.T) {
	h := synth{cpus: 2, nics: []synthNIC{{name: "vs1", queues: 1, kind: "veth", noIRQs: true}}}.build()
	for i := range h.NICs {
		h.NICs[i].Virtual = true
	}
	sink := load.TaskLoad{PID: 4242, TID: 4242, Comm: "udp-sink", CPU: 1, Busy: 46}
	sender := load.TaskLoad{PID: 5151, TID: 5151, Comm: "udp-send", CPU: 0, Busy: 59}
	l := synthLoad(h, map[int]cpuProfile{0: {user: 9, sys: 50, soft: 41}, 1: {user: 30, sys: 54}}, nil, []load.TaskLoad{sink, sender})
	p, err := Make("auto", h, Options{Load: Measured(l), App: "pid:4242", Devices: []string{"vs1"}, MachineWide: true})
	if err != nil {
		t.Fatal(err)
	}
	if planChanges(p) != 0 {
		t.Fatalf("auto moved work onto a CPU without headroom: %+v %+v\n%s", p.RxQueues, p.Apps, p.Why)
	}
	for _, want := range []string{"nothing is changed", "0% spare", "above the 80% a CPU may be filled to", "estimated from interrupt counts"} {
		if !strings.Contains(p.Why, want) {
			t.Errorf("why lacks %q: %s", want, p.Why)
		}
	}
}

// The application named by a selector other than pid: (what an operator
// gives the agent or plan for a service): the caller resolves it to PIDs,
// auto reads their threads and keeps the selector in the plan, so the
// placement still applies after the application restarts.
func TestAutoAppSelector(t *testing.T) {
	h := synth{cpus: 2, nics: []synthNIC{{name: "vs1", queues: 1, kind: "veth", noIRQs: true}}}.build()
	for i := range h.NICs {
		h.NICs[i].Virtual = true
	}
	sink := load.TaskLoad{PID: 4242, TID: 4242, Comm: "udp-sink", CPU: 1, Busy: 45}
	l := synthLoad(h, map[int]cpuProfile{0: {user: 10, sys: 14, soft: 72}, 1: {user: 30, sys: 15}}, nil, []load.TaskLoad{sink})
	p, err := Make("auto", h, Options{Load: Measured(l), App: "comm:udp-sink", AppPIDs: []int{4242}, Devices: []string{"vs1"}, MachineWide: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Apps) != 1 || p.Apps[0].Comm != "udp-sink" || p.Apps[0].PID != 0 || p.Apps[0].CPUs.String() != "0" {
		t.Fatalf("consumer placement %+v, want comm udp-sink on CPU 0\n%s", p.Apps, p.Why)
	}
	// A consumer that fills its CPU (96 %, as under a race-built sink) is
	// still one CPU's worth, but CPU 0 has no headroom for it: moving it
	// there adds more than RPS takes off (predicted 127 %), so no change.
	sink.Busy = 96
	l = synthLoad(h, map[int]cpuProfile{0: {user: 10, sys: 14, soft: 72}, 1: {user: 30, sys: 66}}, nil, []load.TaskLoad{sink})
	p, err = Make("auto", h, Options{Load: Measured(l), App: "comm:udp-sink", AppPIDs: []int{4242}, Devices: []string{"vs1"}, MachineWide: true})
	if err != nil {
		t.Fatal(err)
	}
	if planChanges(p) != 0 || !strings.Contains(p.Why, "spare") {
		t.Errorf("a consumer filling CPU 1: planned %+v %+v without headroom\n%s", p.Apps, p.RxQueues, p.Why)
	}
	second := load.TaskLoad{PID: 4243, TID: 4243, Comm: "udp-sink", CPU: 0, Busy: 90}
	l = synthLoad(h, map[int]cpuProfile{0: {user: 10, sys: 14, soft: 72}, 1: {user: 30, sys: 66}}, nil, []load.TaskLoad{sink, second})
	p, err = Make("auto", h, Options{Load: Measured(l), App: "comm:udp-sink", AppPIDs: []int{4242, 4243}, Devices: []string{"vs1"}, MachineWide: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range p.Apps {
		if a.CPUs.Len() == 1 {
			t.Errorf("two busy workers (186 %%) pinned onto one CPU: %+v\n%s", p.Apps, p.Why)
		}
	}
	// Not resolved (not running): no placement candidate, and no panic.
	p, err = Make("auto", h, Options{Load: Measured(l), App: "comm:udp-sink", Devices: []string{"vs1"}, MachineWide: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Apps) != 0 || !strings.Contains(p.Why, "no busy thread measured") {
		t.Errorf("unresolved selector: apps %+v\n%s", p.Apps, p.Why)
	}
}

// A snapshot without a second sample has no load: nothing is changed, and
// the plan says so — but IRQs allowed on isolated CPUs are a breach the
// host alone shows.
func TestAutoWithoutLoad(t *testing.T) {
	h := synth{cpus: 4, nics: []synthNIC{{name: "eth0", queues: 2}}}.build()
	p, err := Make("auto", h, Options{})
	if err != nil || planChanges(p) != 0 || !strings.Contains(p.Why, "no load to judge") {
		t.Errorf("no load: %v %d %q", err, planChanges(p), p.Why)
	}
	h = synth{cpus: 8, isolated: []int{2, 3, 4, 5, 6, 7}, nics: []synthNIC{{name: "eth0", queues: 4}}}.build()
	p, err = Make("auto", h, Options{})
	if err != nil || p.Policy != "dedicated-core" || !strings.Contains(p.Why, "isolated") {
		t.Fatalf("isolated: %v %s %q", err, p.Policy, p.Why)
	}
	checkProperties(t, "auto/isolated", h, p)
}

// The generated 256-CPU host (4 nodes, SMT, offline CPUs, 2×64-queue NICs):
// idle → nothing; CPU 0 saturated by two of eth0's queues → a plan that
// lowers it; eth1's loaded queue IRQ served on a remote node → a plan.
func TestAutoOnGeneratedHost(t *testing.T) {
	dir, cleanup, err := hostgen.ScratchDir()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cleanup)
	L, err := hostgen.Build(hostgen.DefaultSpec())
	if err != nil {
		t.Fatal(err)
	}
	if err := L.Write(dir); err != nil {
		t.Fatal(err)
	}
	h, err := host.Read(kernel.New(dir), host.Options{})
	if err != nil {
		t.Fatal(err)
	}
	idle := synthLoad(h, nil, nil, nil)
	if p, err := Make("auto", h, Options{Load: Measured(idle)}); err != nil || planChanges(p) != 0 {
		t.Errorf("idle 256-CPU host: %v, %d changes", err, planChanges(p))
	}

	eth0 := h.NIC("eth0")
	rates := map[int]map[int]float64{}
	for _, n := range eth0.IRQs[:2] {
		rates[n] = map[int]float64{0: 30000}
	}
	hot := synthLoad(h, map[int]cpuProfile{0: {sys: 5, irq: 15, soft: 78}}, rates, nil)
	p, err := Make("auto", h, Options{Load: Measured(hot)})
	if err != nil {
		t.Fatal(err)
	}
	if planChanges(p) == 0 {
		t.Fatalf("CPU 0 saturated: no plan: %s", p.Why)
	}
	checkProperties(t, "auto/generated", h, p)
	m := newModel(h, hot, []string{"eth0", "eth1"})
	if b, a := m.Predict(&Plan{}).Busy[0], m.Predict(p).Busy[0]; a >= b {
		t.Errorf("CPU0 predicted %.0f%% → %.0f%%", b, a)
	}

	// eth1 lives on node 3; one of its queue IRQs fires hard on CPU 1 (node 0).
	eth1 := h.NIC("eth1")
	remote := synthLoad(h, map[int]cpuProfile{1: {irq: 20, soft: 40}}, map[int]map[int]float64{eth1.IRQs[0]: {1: 40000}}, nil)
	p, err = Make("auto", h, Options{Load: Measured(remote)})
	if err != nil {
		t.Fatal(err)
	}
	if planChanges(p) == 0 {
		t.Errorf("remote-node queue IRQ: no plan: %s", p.Why)
	}
	checkProperties(t, "auto/remote", h, p)
}

// With the eBPF collector's measured times the model uses them, not the
// tick-sampled /proc/stat split: here /proc/stat says CPU0 is 80 %
// softirq, the collector measured 20 % — and 20 % is what is predicted to
// move.
func TestModelUsesMeasuredCost(t *testing.T) {
	h := synth{cpus: 2, nics: []synthNIC{{name: "vs1", queues: 1, kind: "veth", noIRQs: true}}}.build()
	l := synthLoad(h, map[int]cpuProfile{0: {soft: 80}}, nil, nil)
	l.CostSource = load.CostBPF
	for i := range l.CPUs {
		l.CPUs[i].SoftirqTime = map[string]float64{}
	}
	l.CPUs[0].SoftirqTime["NET_RX"] = 0.20
	m := newModel(h, l, []string{"vs1"})
	if got := m.cpus[0].netSoft; got < 19.9 || got > 20.1 {
		t.Errorf("network softirq on CPU0 = %.1f %%, want the measured 20 %%", got)
	}
	one := cpuset.Of(1)
	p := &Plan{RxQueues: []RxQueueEntry{{Device: "vs1", Queue: ptr(0), RPSCPUs: &one}}}
	if got := m.Predict(p).IRQ[1]; got < 18 || got > 20 {
		t.Errorf("predicted CPU1 interrupt time %.1f %%, want ≈ %.1f %% moved", got, 20*RPSMovedVirtual)
	}
}

// On a real captured host (OpenShift master, 112 CPUs, 1875 IRQs): idle →
// nothing; one ice queue IRQ taking 65 % of CPU 3 beside 30 % of system
// time → a plan predicted to lower it that uses only usable CPUs. (At 90 %
// the only relief, the whole IRQ moved to one idle CPU, would fill that
// CPU to the headroom ceiling: marginal, see TestAutoMarginal…)
func TestAutoOnCapturedMaster(t *testing.T) {
	h := readSnapshot(t, "cluster-node-tuning-operator/bare-metal-master.internal-sysinfo.tgz")
	if p, err := Make("auto", h, Options{Load: Measured(synthLoad(h, nil, nil, nil))}); err != nil || planChanges(p) != 0 {
		t.Fatalf("idle master: %v %d changes", err, planChanges(p))
	}
	var q *host.IRQ
	for i := range h.IRQs {
		// A queue's IRQ: a NIC's control vector (i40e …:misc) is outside
		// a plan's default scope.
		if h.IRQs[i].Class == host.ClassNetwork && h.IRQs[i].Device != "" && h.IRQs[i].Queue != nil && h.IRQs[i].Movable() {
			q = &h.IRQs[i]
			break
		}
	}
	if q == nil {
		t.Skip("no movable network queue IRQ in the capture")
	}
	l := synthLoad(h, map[int]cpuProfile{3: {sys: 30, irq: 15, soft: 50}}, map[int]map[int]float64{q.Number: {3: 50000}}, nil)
	p, err := Make("auto", h, Options{Load: Measured(l)})
	if err != nil {
		t.Fatal(err)
	}
	if planChanges(p) == 0 {
		t.Fatalf("CPU 3 saturated by %s: no plan: %s", q.Device, p.Why)
	}
	checkProperties(t, "auto/master", h, p)
	var nics []string
	for _, n := range h.NICs {
		nics = append(nics, n.Name)
	}
	m := newModel(h, l, nics)
	if b, a := m.Predict(&Plan{}).Busy[3], m.Predict(p).Busy[3]; a >= b {
		t.Errorf("CPU3 predicted %.0f%% → %.0f%%", b, a)
	}
}

// The rules every candidate must pass (judge), on seed 004's two CPUs:
// CPU 0 saturated (96 %), CPU 1 45 % busy.
func TestAutoJudgeRules(t *testing.T) {
	h := synth{cpus: 2, nics: []synthNIC{{name: "vs1", queues: 1, kind: "veth", noIRQs: true}}}.build()
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

// The case: every CPU busy — CPU 0 saturated by the sender and its
// softirq, CPU 1 98 % busy with the consumer and another process. Any
// steering moves softirq onto CPU 1, which has no headroom (the old
// separate mode let RPS through at a predicted 122 %): auto changes
// nothing, shows the prediction of what it rejected, and the ranking
// carries units.
func TestAutoRejectsSaturatingCPU1(t *testing.T) {
	h := synth{cpus: 2, nics: []synthNIC{{name: "vs1", queues: 1, kind: "veth", noIRQs: true}}}.build()
	for i := range h.NICs {
		h.NICs[i].Virtual = true
	}
	sink := load.TaskLoad{PID: 4242, TID: 4242, Comm: "udp-sink", CPU: 1, Busy: 50}
	other := load.TaskLoad{PID: 777, TID: 777, Comm: "cc1", CPU: 1, Busy: 48}
	l := synthLoad(h, map[int]cpuProfile{0: {user: 10, sys: 14, soft: 72}, 1: {user: 70, sys: 28}}, nil, []load.TaskLoad{sink, other})
	p, err := Make("auto", h, Options{Load: Measured(l), App: "pid:4242", Devices: []string{"vs1"}, MachineWide: true})
	if err != nil {
		t.Fatal(err)
	}
	if planChanges(p) != 0 {
		t.Fatalf("auto planned onto CPU 1 at 98 %%: %+v %+v\n%s", p.RxQueues, p.Apps, p.Why)
	}
	for _, want := range []string{"nothing is changed", "onto CPU 1 (CPU 1 98% busy, 0% spare)", "no change: 24% of a CPU (busiest CPU1 98% busy, CPU0 72% in interrupts)", "ranked by the interrupt time taken from application threads"} {
		if !strings.Contains(p.Why, want) {
			t.Errorf("why lacks %q:\n%s", want, p.Why)
		}
	}
}

// A decision that ±10 % of one input overturns is marginal: on the captured
// master, one queue IRQ takes 90 % of CPU 3; the only relief moves it whole
// onto an idle CPU, filling that CPU to 78 % — and with CPU 3's interrupt
// time 10 % higher, past the 80 % ceiling. auto changes nothing and says
// which input overturns it, with the numbers.
func TestAutoMarginalOnCapturedMaster(t *testing.T) {
	h := readSnapshot(t, "cluster-node-tuning-operator/bare-metal-master.internal-sysinfo.tgz")
	var q *host.IRQ
	for i := range h.IRQs {
		if h.IRQs[i].Class == host.ClassNetwork && h.IRQs[i].Device != "" && h.IRQs[i].Movable() {
			q = &h.IRQs[i]
			break
		}
	}
	if q == nil {
		t.Fatal("no movable network queue IRQ in the capture")
	}
	l := synthLoad(h, map[int]cpuProfile{3: {sys: 4, irq: 20, soft: 70}}, map[int]map[int]float64{q.Number: {3: 50000}}, nil)
	// The queue's NIC is named: without --device auto leaves out the NIC
	// that carries the capture's default route, and this one may be it.
	p, err := Make("auto", h, Options{Load: Measured(l), Devices: []string{q.Device}})
	if err != nil {
		t.Fatal(err)
	}
	if planChanges(p) != 0 || !IsMarginal(p) {
		t.Fatalf("a choice ±10 %% overturns was not reported marginal: %d changes\n%s", planChanges(p), p.Why)
	}
	for _, want := range []string{"CPU 3 interrupt time 10 % higher (90.0% → 99.0%)", "it would be rejected", "above the 80% a CPU may be filled to", "nothing is changed"} {
		if !strings.Contains(p.Why, want) {
			t.Errorf("why lacks %q:\n%s", want, p.Why)
		}
	}
	// The same load decided twice: the same words.
	if p2, _ := Make("auto", h, Options{Load: Measured(l), Devices: []string{q.Device}}); p2.Why != p.Why {
		t.Errorf("not deterministic:\n%s\n%s", p.Why, p2.Why)
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
	h := synth{cpus: 2, nics: []synthNIC{{name: "vs1", queues: 1, kind: "veth", noIRQs: true}}}.build()
	for i := range h.NICs {
		h.NICs[i].Virtual = true
	}
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
		o := Options{Load: Measured(l), App: "pid:4242", Devices: []string{"vs1"}, MachineWide: true}
		p, err := Make("auto", h, o)
		if err != nil {
			t.Fatal(err)
		}
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
		m := newModel(h, l, []string{"vs1"})
		m.selected = selectedPIDs(o)
		base, pred := m.Predict(&Plan{}), m.Predict(p)
		if why := judgeHeadroom(l, base, pred); why != "" {
			t.Errorf("%s: the plan %s", c.name, why)
		}
		t.Logf("%s: %s", c.name, p.Why)
	}
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
	h := synth{cpus: 2, nics: []synthNIC{{name: "vs1", queues: 1, kind: "veth", noIRQs: true}}}.build()
	for i := range h.NICs {
		h.NICs[i].Virtual = true
	}
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
		o := Options{Load: Measured(c.l), App: fmt.Sprintf("pid:%d", pid), Devices: []string{"vs1"}, MachineWide: true}
		p, err := Make("auto", h, o)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %s", c.name, p.Why)
		if q, _ := Make("auto", h, o); q.Why != p.Why || planChanges(q) != planChanges(p) {
			t.Errorf("%s: equal inputs, different plans", c.name)
		}
		seed004 := len(p.RxQueues) == 1 && p.RxQueues[0].RPSCPUs.String() == "1" && len(p.Apps) == 1 && p.Apps[0].CPUs.String() == "0"
		if !seed004 && (planChanges(p) != 0 || !strings.Contains(p.Why, "nothing is changed")) {
			t.Errorf("%s: neither seed 004's choice nor no change with its reason: %+v %+v", c.name, p.RxQueues, p.Apps)
		}
		m := newModel(h, c.l, []string{"vs1"})
		m.selected = selectedPIDs(o)
		base, pred := m.Predict(&Plan{}), m.Predict(p)
		if why := judgeHeadroom(c.l, base, pred); why != "" {
			t.Errorf("%s: the plan %s", c.name, why)
		}
		if maxBusy(pred) > maxBusy(base)+moveEpsilon {
			t.Errorf("%s: busiest CPU %.0f%% → %.0f%%", c.name, maxBusy(base), maxBusy(pred))
		}
		if c.name == "recorded" && (planChanges(p) != 0 || !strings.Contains(p.Why, "CPU 1 100% busy, 0% spare")) {
			t.Errorf("recorded: CPU 1 had no spare time, yet: %d changes, %s", planChanges(p), p.Why)
		}
	}
}

// Violation refuses a plan that changes a device outside the model's
// targets (--device): it cannot predict that load, so it cannot say the
// plan keeps to the headroom rules.
func TestViolationRefusesDeviceOutsideModel(t *testing.T) {
	h := synth{cpus: 2, nics: []synthNIC{{name: "vs1", queues: 1, kind: "veth", noIRQs: true}, {name: "vs2", queues: 1, kind: "veth", noIRQs: true}}}.build()
	for i := range h.NICs {
		h.NICs[i].Virtual = true
	}
	l := synthLoad(h, map[int]cpuProfile{0: {user: 10, sys: 10, soft: 20}, 1: {user: 10}}, nil, nil)
	one := cpuset.Of(1)
	p := &Plan{Version: Version, RxQueues: []RxQueueEntry{{Device: "vs2", RPSCPUs: &one, Reason: "test"}}}
	if why := Violation(h, l, p, Options{Devices: []string{"vs1"}}); !strings.Contains(why, "vs2, outside the devices the model predicts (vs1)") {
		t.Errorf("a plan for vs2 judged with only vs1 modelled: %q", why)
	}
	p.RxQueues[0].Device = "vs1"
	if why := Violation(h, l, p, Options{Devices: []string{"vs1"}}); why != "" {
		t.Errorf("RPS for vs1 onto an idle CPU refused: %q", why)
	}
}
