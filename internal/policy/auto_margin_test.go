package policy

import (
	"fmt"
	"testing"

	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/hostgen"
	"github.com/irqpilot/irqpilot/internal/livetest"
)

// Robustness reaches the path it claims: loads generated near the rules'
// thresholds — the interrupt-bound CPU's interrupt time around what
// spreading must gain, the CPUs it would spread onto around the headroom
// limit — make a share of auto's decisions marginal. Every decision that
// is not marginal must survive every ±10 % disturbance of every measured
// input (not only those auto judged relevant): a chosen plan still passes
// the rules and still beats doing nothing by the margin, and a "no change"
// still finds no candidate worth making. A decision that fails that is
// what the marginal mark is for.
func TestAutoRobustNearThresholds(t *testing.T) {
	_, four := livetest.GenHost(t, hostgen.Spec{CPUs: 4, Packages: 1, Nodes: 1, ThreadsPerCore: 1, Offline: hostgen.NoOffline,
		NICs: []hostgen.NICSpec{{Name: "eth0", Queues: 2}}, NVMeQueues: -1, Hostname: "four"})
	var queueIRQs []int
	for _, q := range four.IRQs {
		if q.Class == host.ClassNetwork && q.Device == "eth0" && q.Movable() {
			queueIRQs = append(queueIRQs, q.Number)
		}
	}
	if len(queueIRQs) == 0 {
		t.Fatal("generated host has no eth0 queue IRQ")
	}
	decisions, marginal, kept, changes := 0, 0, 0, 0
	for _, soft := range []float64{22, 28, 34, 40, 48, 56, 64, 72} {
		for _, others := range []float64{20, 30, 40, 45, 50, 55, 60, 65, 70} {
			// CPU0 saturated (5 % idle) by its softirq work and a thread.
			prof := map[int]cpuProfile{0: {user: 100 - 5 - 6 - soft - 5, sys: 5, irq: 6, soft: soft}}
			for c := 1; c < 4; c++ {
				prof[c] = cpuProfile{user: others * 0.7, sys: others * 0.3}
			}
			rates := map[int]map[int]float64{}
			for _, n := range queueIRQs {
				rates[n] = map[int]float64{0: 30000}
			}
			l := synthLoad(four, prof, rates, nil)
			what := fmt.Sprintf("CPU0 %.0f%% softirq, others %.0f%% busy", soft, others)
			o := Options{Load: Measured(l)}
			p, err := Make("auto", four, o)
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			harm := Harm(four, l)
			if len(harm) == 0 {
				continue // no evidence of harm: nothing was decided
			}
			decisions++
			if IsMarginal(p) {
				marginal++
				continue
			}
			kept++
			b, err := newBuilder(four, o, "auto")
			if err != nil {
				t.Fatal(err)
			}
			a, err := newAutoRun(four, o, b, l, harm)
			if err != nil {
				t.Fatal(err)
			}
			changed := planChanges(p) > 0
			if changed {
				changes++
			}
			for _, d := range perturbations(l) {
				if changed {
					if why := a.holds(d.l, p); why != "" {
						t.Errorf("%s: the plan is not marked marginal, but with %s %s\n%s", what, d.what, why, p.Why)
					}
					continue
				}
				if pd := a.decide(d.l); pd.best != nil {
					t.Errorf("%s: \"no change\" is not marked marginal, but with %s auto would choose %s\n%s", what, d.what, pd.best.name, p.Why)
				}
			}
		}
	}
	t.Logf("%d decisions: %d marginal, %d robust (%d of them changes)", decisions, marginal, kept, changes)
	if marginal == 0 || kept == 0 || changes == 0 {
		t.Errorf("the grid must reach both paths and a robust change: %d marginal, %d robust, %d changes of %d decisions", marginal, kept, changes, decisions)
	}
}
