package diagnose

import (
	"fmt"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/load"
)

// Headroom is the one notion of spare CPU time that every judge uses
// (doctor's fixes, auto's candidates, the agent's adaptations, bench's
// warnings): work may be moved onto a CPU only when the measurement shows
// the CPU has the time for it, and the prediction (the cost model's, in
// package policy) says so.
//
// The rule, in two thresholds:
//
//   - A CPU whose measured busy time (100 − idle − iowait) is above
//     HeadroomBusyMaxPct has no headroom: nothing is moved onto it.
//   - Work of w percent of a CPU fits on a CPU only when its busy time
//     after the move, busy + w, is at most HeadroomBusyMaxPct.
//
// Busy counts everything the CPU did for anyone: user, system, interrupt
// and softirq time, and steal (on a VM, time the hypervisor gave to someone
// else is time this CPU cannot give to moved work either). iowait is idle
// time: the CPU had nothing to run.
//
// HeadroomBusyMaxPct leaves a fifth of the CPU free after a move: the
// measurement is a few seconds of a load that varies, and a decision that
// fills a CPU to the brim flips with the next sample (the ±10 % a robust
// decision must survive, see policy.MarginalNoise). On a saturated machine
// every CPU is above it, so nothing is moved anywhere: moving work between
// full CPUs only moves the wait (doctor's remedies say what would help
// instead).
//
// A CPU that was not measured (offline in a sample, or its counters did
// not advance) takes nothing: no measurement, no move.
const HeadroomBusyMaxPct = 80.0

// Headroom is one CPU's measured spare time.
type Headroom struct {
	CPU int `json:"cpu"`
	// Measured is false when the CPU's counters did not advance (or the CPU
	// was not in both samples): nothing is known, so nothing fits.
	Measured bool `json:"measured"`
	// Busy is the measured busy percent (100 − idle − iowait).
	Busy float64 `json:"busy_pct"`
	// Spare is how much work, in percent of the CPU, may be moved onto it:
	// HeadroomBusyMaxPct − Busy, at least 0.
	Spare float64 `json:"spare_pct"`
}

// HeadroomOf returns cpu's measured spare time in l.
func HeadroomOf(l *load.Load, cpu int) Headroom {
	h := Headroom{CPU: cpu}
	c := l.CPU(cpu)
	if c == nil || c.NoTicks {
		return h
	}
	h.Measured = true
	h.Busy = c.Busy()
	h.Spare = max(0, HeadroomBusyMaxPct-h.Busy)
	return h
}

// Fits reports whether work of pct percent of a CPU fits on the CPU, and
// the CPU's predicted busy percent after the move.
func (h Headroom) Fits(pct float64) (after float64, ok bool) {
	after = h.Busy + pct
	return after, h.Measured && after <= HeadroomBusyMaxPct
}

// String is "CPU 1 42% busy, 38% spare" (or "CPU 1 not measured").
func (h Headroom) String() string {
	if !h.Measured {
		return fmt.Sprintf("CPU %d not measured", h.CPU)
	}
	return fmt.Sprintf("CPU %d %.0f%% busy, %.0f%% spare", h.CPU, h.Busy, h.Spare)
}

// WithHeadroom returns the CPUs of set that were measured in l with at
// least minSpare percent of spare time.
func WithHeadroom(l *load.Load, set cpuset.Set, minSpare float64) cpuset.Set {
	var out cpuset.Set
	for _, c := range set.CPUs() {
		if h := HeadroomOf(l, c); h.Measured && h.Spare > 0 && h.Spare >= minSpare {
			out = out.Add(c)
		}
	}
	return out
}
