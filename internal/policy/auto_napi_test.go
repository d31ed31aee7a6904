package policy

import (
	"strings"
	"testing"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/diagnose"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/load"
	"github.com/irqpilot/irqpilot/internal/plan"
	"github.com/irqpilot/irqpilot/internal/setting"
)

// addNAPIs gives dev one NAPI instance per rx queue in h's model, as the
// host read lists them from netlink (not threaded: no thread yet).
func addNAPIs(h *host.Host, dev string) {
	nic := h.NIC(dev)
	for i, rq := range nic.RxQueues {
		off := false
		h.NAPI = append(h.NAPI, host.NAPI{ID: uint32(8193 + i), Device: dev, Threaded: &off,
			Queues: host.NAPIQueues{RX: []int{rq.Index}, TX: []int{rq.Index}}})
	}
}

// saturatedEth0 is 4 CPUs, eth0 with 2 queues whose IRQs fire on CPU 0,
// which they saturate (12 % irq, 75 % softirq), CPU 1 at cpu1 % (user).
func saturatedEth0(t *testing.T, s synth, cpu1 float64) (*host.Host, *load.Load) {
	t.Helper()
	h := s.Build()
	rates := map[int]map[int]float64{}
	for _, n := range h.NIC("eth0").IRQs {
		rates[n] = map[int]float64{0: 20000}
	}
	return h, synthLoad(h, map[int]cpuProfile{0: {user: 5, sys: 5, irq: 12, soft: 75}, 1: {user: cpu1}}, rates, nil)
}

// A saturated CPU and a device with NAPI instances: the candidate is
// generated — threaded NAPI, threads on the CPUs with headroom — and the
// model predicts the device's softirq leaving CPU 0 (RPS's coefficient and
// hand-off cost), so auto scores it among the others.
func TestAutoNAPIThreadedCandidateGeneratedAndScored(t *testing.T) {
	h, l := saturatedEth0(t, synth{CPUs: 4, NICs: []synthNIC{{Name: "eth0", Queues: 2}}}, 25)
	addNAPIs(h, "eth0")
	b, err := newBuilder(h, Options{}, "auto")
	if err != nil {
		t.Fatal(err)
	}
	ts, err := b.targets()
	if err != nil {
		t.Fatal(err)
	}
	hot := hotCPUs(harmful(diagnose.Diagnose(h, l)))
	if !hot.Contains(0) {
		t.Fatalf("CPU 0 not hot: %s", hot)
	}
	cands := napiThreadedPlans(b, ts, l, hot)
	if len(cands) != 1 {
		t.Fatalf("%d candidates, want 1: %+v", len(cands), cands)
	}
	p := cands[0].p
	if len(p.NAPI) != 1 || p.NAPI[0].Device != "eth0" || p.NAPI[0].ID != nil || p.NAPI[0].Threaded == nil || !*p.NAPI[0].Threaded ||
		p.NAPI[0].CPUs == nil || p.NAPI[0].CPUs.String() != "1-3" {
		t.Fatalf("candidate %+v", p.NAPI)
	}
	if err := plan.Check(p); err != nil {
		t.Fatalf("candidate does not check: %v", err)
	}
	if !strings.Contains(p.NAPI[0].Reason, "saturated CPU 0") || !strings.Contains(cands[0].name, "threaded NAPI for eth0 on CPUs 1-3") {
		t.Errorf("name %q, reason %q", cands[0].name, p.NAPI[0].Reason)
	}
	m := newModel(h, l, []string{"eth0"})
	base, pred := m.Predict(&plan.Plan{}), m.Predict(p)
	// CPU 0's 75 % softirq is all eth0's network softirq (NET_RX only):
	// 0.95 of it moves, 5 % of that stays as the wake-up cost.
	wantCPU0 := base.Busy[0] - 75*NAPIThreadMoved*(1-NAPIThreadWakeCost)
	if d := pred.Busy[0] - wantCPU0; d > 0.01 || d < -0.01 {
		t.Errorf("CPU 0 predicted %.2f %%, want %.2f %% (from %.2f %%)", pred.Busy[0], wantCPU0, base.Busy[0])
	}
	for _, c := range []int{1, 2, 3} {
		if want := base.Busy[c] + 75*NAPIThreadMoved/3; pred.Busy[c] < want-0.01 || pred.Busy[c] > want+0.01 {
			t.Errorf("CPU %d predicted %.2f %%, want %.2f %%", c, pred.Busy[c], want)
		}
	}
	// Auto compares it with the others (listed with its score or beaten).
	ap := mustMake(t, "auto", h, Options{Load: Measured(l)})
	if !strings.Contains(ap.Why, "candidates compared") {
		t.Errorf("auto did not plan: %s", ap.Why)
	}
	t.Logf("auto: %s", ap.Why)
}

// Where the queue IRQs are kernel-managed (they cannot move) and the other
// CPUs idle, threaded NAPI beats RPS — it also moves the driver's poll and
// GRO, which RPS leaves on the IRQ CPU — and is auto's choice; it resolves
// to the device's threaded switch.
func TestAutoChoosesNAPIThreadedManagedIRQs(t *testing.T) {
	h, l := saturatedEth0(t, synth{CPUs: 4, NICs: []synthNIC{{Name: "eth0", Queues: 2, Managed: true}}}, 0)
	addNAPIs(h, "eth0")
	p := mustMake(t, "auto", h, Options{Load: Measured(l)})
	if len(p.NAPI) != 1 || p.NAPI[0].Threaded == nil || !*p.NAPI[0].Threaded || p.NAPI[0].CPUs == nil || p.NAPI[0].CPUs.String() != "1-3" {
		t.Fatalf("auto did not choose threaded NAPI on CPUs 1-3: %+v %+v\n%s", p.NAPI, p.RxQueues, p.Why)
	}
	if !strings.Contains(p.Why, "auto chose threaded NAPI for eth0") {
		t.Errorf("why: %s", p.Why)
	}
	sets, err := plan.Resolve(p, h)
	if err != nil {
		t.Fatal(err)
	}
	var threaded bool
	for _, c := range sets {
		if c.Kind == setting.KindDevThreaded && c.Device == "eth0" && c.Value == "1" {
			threaded = true
		}
	}
	if !threaded {
		t.Errorf("resolved without eth0's threaded switch: %+v", sets)
	}
}

// Not applicable: the same saturated CPU, but the host read lists no NAPI
// instance of eth0 (a capture without NAPI facts, a driver without NAPI);
// and the device has NAPI but no CPU is saturated.
func TestAutoNAPIThreadedNotApplicable(t *testing.T) {
	h, l := saturatedEth0(t, synth{CPUs: 4, NICs: []synthNIC{{Name: "eth0", Queues: 2}}}, 25)
	b, _ := newBuilder(h, Options{}, "auto")
	ts, _ := b.targets()
	hot := hotCPUs(harmful(diagnose.Diagnose(h, l)))
	if c := napiThreadedPlans(b, ts, l, hot); len(c) != 0 {
		t.Errorf("device without NAPI instances: %+v", c)
	}
	p := mustMake(t, "auto", h, Options{Load: Measured(l)})
	if len(p.NAPI) != 0 || strings.Contains(p.Why, "threaded NAPI") {
		t.Errorf("auto planned threaded NAPI without NAPI instances: %+v %s", p.NAPI, p.Why)
	}
	// A threaded entry for a device without NAPI predicts nothing.
	m := newModel(h, l, []string{"eth0"})
	all := cpuset.Range(1, 3)
	q := &plan.Plan{NAPI: []plan.NAPIEntry{{Device: "eth0", Threaded: ptr(true), CPUs: &all}}}
	if base, pred := m.Predict(&plan.Plan{}), m.Predict(q); pred.Busy[0] != base.Busy[0] {
		t.Errorf("threaded NAPI without NAPI instances predicted CPU 0 %.1f → %.1f", base.Busy[0], pred.Busy[0])
	}

	h2, _ := saturatedEth0(t, synth{CPUs: 4, NICs: []synthNIC{{Name: "eth0", Queues: 2}}}, 25)
	addNAPIs(h2, "eth0")
	calm := synthLoad(h2, map[int]cpuProfile{0: {user: 10, sys: 5, irq: 2, soft: 10}}, nil, nil)
	b2, _ := newBuilder(h2, Options{}, "auto")
	ts2, _ := b2.targets()
	if c := napiThreadedPlans(b2, ts2, calm, hotCPUs(harmful(diagnose.Diagnose(h2, calm)))); len(c) != 0 {
		t.Errorf("no saturated CPU: %+v", c)
	}
}
