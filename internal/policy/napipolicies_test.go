package policy

import (
	"strings"
	"testing"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/plan"
	"github.com/irqpilot/irqpilot/internal/plan/plantest"
	"github.com/irqpilot/irqpilot/internal/setting"
)

// checkMitigation: the NAPI policies move no IRQ, steer nothing, leave
// irqbalance, and place NAPI threads only on usable CPUs; every entry says
// why.
func checkMitigation(t *testing.T, name string, p *plan.Plan, bad func(string, cpuset.Set)) {
	t.Helper()
	if len(p.IRQs)+len(p.RxQueues)+len(p.TxQueues)+len(p.Apps) > 0 || p.RPSSockFlowEntries != nil ||
		(p.Irqbalance != nil && p.Irqbalance.Mode != plan.IrqbalanceLeave) {
		t.Errorf("%s: a mitigation policy changed placement or steering: %+v", name, p)
	}
	for _, e := range p.NAPI {
		if e.CPUs != nil {
			bad(e.Device+" napi threads", *e.CPUs)
		}
		if e.Reason == "" {
			t.Errorf("%s: napi entry without a reason", name)
		}
	}
	if p.Why == "" {
		t.Errorf("%s: no why", name)
	}
}

func TestEfficiencyPolicy(t *testing.T) {
	h := plantest.WithNAPI(t)
	p := mustMake(t, "efficiency", h, Options{})
	if len(p.NAPI) != 1 || p.NAPI[0].Device != "ens10f0" || *p.NAPI[0].DeferHardIRQs != 2 || *p.NAPI[0].GROFlushTimeout != 20000 ||
		p.NAPI[0].ID != nil || !strings.Contains(p.NAPI[0].Reason, "20 µs") || p.BusyPoll != nil {
		t.Errorf("%+v", p.NAPI)
	}
	got, err := plan.Resolve(p, h)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Kind != setting.KindDevDeferHardIRQs || got[1].Kind != setting.KindDevGROFlushTimeout {
		t.Errorf("resolved %+v", got)
	}
}

func TestLatencyPolicyBusyPoll(t *testing.T) {
	h := plantest.WithNAPI(t)
	p := mustMake(t, "latency", h, Options{})
	if p.BusyPoll == nil || *p.BusyPoll.BusyRead != 50 || *p.BusyPoll.BusyPoll != 50 {
		t.Errorf("busy poll %+v", p.BusyPoll)
	}
	// Device-wide safety net + IRQ suspension on both NAPI instances.
	if len(p.NAPI) != 3 || p.NAPI[0].ID != nil || *p.NAPI[0].GROFlushTimeout != 200000 ||
		*p.NAPI[1].ID != 8193 || *p.NAPI[1].IRQSuspendTimeout != 20000000 || *p.NAPI[2].ID != 8194 {
		t.Fatalf("%+v", p.NAPI)
	}
	if !strings.Contains(p.NAPI[1].Reason, "SO_PREFER_BUSY_POLL") || !strings.Contains(p.Why, "--app-cpus") {
		t.Errorf("reasons: %q / %q", p.NAPI[1].Reason, p.Why)
	}
	if _, err := plan.Resolve(p, h); err != nil {
		t.Fatal(err)
	}
	// --device keeps the device's entries, drops the machine-wide busy_poll.
	if p := mustMake(t, "latency", h, Options{Devices: []string{"ens10f0"}}); p.BusyPoll != nil || len(p.NAPI) != 3 {
		t.Errorf("scoped: %+v", p)
	}
	// An older capture: no suspension, and the plan says why.
	old := plantest.ReadSnapshot(t, "node_exporter")
	p = mustMake(t, "latency", old, Options{})
	if len(p.NAPI) != 1 || !strings.Contains(strings.Join(p.Notes, " "), "no IRQ suspension for ens10f0") {
		t.Errorf("older host: %+v notes %q", p.NAPI, p.Notes)
	}
}

func TestLatencyPolicyThreaded(t *testing.T) {
	h := plantest.WithNAPI(t)
	app := cpuset.Of(2)
	p := mustMake(t, "latency", h, Options{AppCPUs: &app})
	if p.BusyPoll != nil || len(p.NAPI) != 1 || !*p.NAPI[0].Threaded || p.NAPI[0].CPUs == nil {
		t.Fatalf("%+v", p.NAPI)
	}
	beside := *p.NAPI[0].CPUs
	if beside.Contains(2) || beside.IsEmpty() {
		t.Errorf("NAPI threads on %s, consumer on 2", beside)
	}
	// With SMT siblings known, the sibling is chosen.
	var sib cpuset.Set
	for _, c := range h.CPUs {
		if c.ID == 2 {
			sib = c.Siblings.Difference(cpuset.Of(2))
		}
	}
	if !sib.IsEmpty() && !beside.Equal(sib) {
		t.Errorf("beside %s, siblings of 2 are %s", beside, sib)
	}
	got, err := plan.Resolve(p, h)
	if err != nil {
		t.Fatal(err)
	}
	// dev-threaded, then the already threaded 8193 placed and 8194 waiting
	// for its thread.
	var kinds []string
	for _, c := range got {
		kinds = append(kinds, string(c.Kind)+"/"+string(c.Status))
	}
	if strings.Join(kinds, " ") != "dev-threaded/ thread-affinity/ thread-affinity/skipped" {
		t.Errorf("resolved %v", kinds)
	}
}
