package policy

import (
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/plan"
	"github.com/irqpilot/irqpilot/internal/plan/plantest"
)

// linesHost is the lab's nics shape captured inside the guest on Debian's
// 6.1 (testdata/snapshots/lab-nics-6.1.tar.gz): e1000 (eth1) and 8139cp
// (eth2) on one legacy interrupt line, IRQ 22.
func linesHost(t *testing.T) *host.Host {
	t.Helper()
	_, h := plantest.OpenSnapshot(t, filepath.Join("..", "..", "testdata", "snapshots", "lab-nics-6.1.tar.gz"))
	return h
}

// A NIC whose one interrupt line is shared with another NIC: per-queue
// leaves the line where it is, for either NIC, and the reason names the
// line and whom it is shared with (not "has no IRQ"). Alone on its line,
// a single-queue NIC's line is its queue's IRQ and is placed.
func TestPerQueueLegacyLine(t *testing.T) {
	h := linesHost(t)
	for dev, other := range map[string]string{"eth1": "eth2", "eth2": "eth1"} {
		p := mustMake(t, "per-queue", h, Options{Devices: []string{dev}})
		want := dev + "'s one interrupt line, IRQ 22, is shared with " + other + " and left where it is"
		if len(p.IRQs) != 0 || len(p.RxQueues) != 1 || !strings.Contains(p.RxQueues[0].Reason, want) || !strings.Contains(p.Why, "shared interrupt line IRQ 22 left alone") {
			t.Errorf("%s: IRQs %+v, rx queues %+v, why %q; want the line left alone, saying %q", dev, p.IRQs, p.RxQueues, p.Why, want)
		}
	}
	// eth2 gone: the line is eth1's alone.
	for i := range h.IRQs {
		if h.IRQs[i].Number == 22 {
			h.IRQs[i].Actions, h.IRQs[i].SharedWith = []string{"eth1"}, nil
		}
	}
	var nics []host.NIC
	for _, n := range h.NICs {
		if n.Name != "eth2" {
			nics = append(nics, n)
		}
	}
	h.NICs = nics
	p := mustMake(t, "per-queue", h, Options{Devices: []string{"eth1"}})
	if len(p.IRQs) != 1 || p.IRQs[0].IRQ == nil || *p.IRQs[0].IRQ != 22 || !strings.Contains(p.IRQs[0].Reason, "eth1 queue 0 IRQ on CPU") {
		t.Errorf("eth1 alone on IRQ 22: IRQs %+v, want the line placed as queue 0's IRQ", p.IRQs)
	}
}

// A shared line's network softirq is both NICs', by their received
// packets: with eth2 receiving three of every four packets on IRQ 22
// (CPU 1, 40 % in softirq), RPS on eth2 to CPU 3 is predicted to hand off
// about three quarters of the line's work, and RPS on eth1 a quarter.
func TestModelSharedLineByPackets(t *testing.T) {
	h := linesHost(t)
	l := synthLoad(h, map[int]cpuProfile{1: {soft: 40}}, map[int]map[int]float64{22: {1: 8000}}, nil)
	l.NetDevRx = map[string]float64{"eth1": 2000, "eth2": 6000}
	three := cpuset.MustParse("3")
	moved := func(dev string) float64 {
		m := newModel(h, l, []string{dev})
		p := &plan.Plan{RxQueues: []plan.RxQueueEntry{{Device: dev, Queue: ptr(0), RPSCPUs: &three}}}
		return m.Predict(&plan.Plan{}).IRQ[1] - m.Predict(p).IRQ[1]
	}
	e1, e2 := moved("eth1"), moved("eth2")
	if math.Abs(e2-3*e1) > 0.5 || e2 < 20 {
		t.Errorf("RPS to CPU 3 moves %.1f points of CPU 1's interrupt time for eth1 and %.1f for eth2; want eth2's about three times eth1's (its packets), and most of its 30", e1, e2)
	}
}
