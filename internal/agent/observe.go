package agent

import (
	"slices"

	"github.com/irqpilot/irqpilot/internal/diagnose"
	"github.com/irqpilot/irqpilot/internal/load"
)

// observe samples the load, computes the findings and updates their gauges.
func (ag *Agent) observe() {
	cur, err := ag.sampler.Sample()
	if err != nil {
		ag.log.Warn("load sample", "error", err)
		return
	}
	prev := ag.prev
	ag.prev = cur
	if prev == nil {
		return
	}
	if !sameIRQs(prev, cur) {
		ag.needResolve = true
	}
	l, err := load.Rates(prev, cur)
	if err != nil {
		return
	}
	h := ag.hostModel.Load()
	if h == nil {
		return
	}
	ag.findings = diagnose.Diagnose(h, l)
	ag.lastLoad = l
	if ag.m != nil {
		active := map[string]bool{}
		for _, f := range ag.findings {
			active[f.ID] = true
		}
		for _, id := range findingIDs {
			v := 0.0
			if active[id] {
				v = 1
			}
			ag.m.FindingActive.WithLabelValues(id).Set(v)
		}
	}
}

// sameIRQs reports whether two samples list the same numbered IRQs.
func sameIRQs(a, b *load.Sample) bool {
	if a.Interrupts == nil || b.Interrupts == nil {
		return true
	}
	var na, nb []int
	for _, l := range a.Interrupts.Lines {
		if l.IRQ >= 0 {
			na = append(na, l.IRQ)
		}
	}
	for _, l := range b.Interrupts.Lines {
		if l.IRQ >= 0 {
			nb = append(nb, l.IRQ)
		}
	}
	return slices.Equal(na, nb)
}

// findingIDs are doctor's finding ids: one gauge each, always present.
var findingIDs = []string{diagnose.IDInterruptBound, diagnose.IDNICOneCPU, diagnose.IDFewQueuesNoRPS, diagnose.IDRPSIPIOverhead,
	diagnose.IDIRQRemoteNUMA, diagnose.IDAppOnIRQCPU, diagnose.IDIrqbalanceManual, diagnose.IDManagedIRQs, diagnose.IDSoftnetDrops, diagnose.IDSoftnetSqueeze}
