// Package coalesce holds interrupt coalescing policies: vIC (virtual
// interrupt coalescing, Ahmad et al., USENIX ATC 2011), fixed maximum
// coalesce count (MCC) and maximum interrupt delay latency (MIDL), Linux DIM
// (lib/dim/net_dim.c) and timeout-adaptive coalescing (Tai et al., OSDI 2021),
// behind one small interface, plus the NVMe controller that applies the vIC
// table to NVMe hardware coalescing (feature 08h).
//
// Policies are pure: they never read a clock. Time, where a policy needs it,
// is passed in by the caller in nanoseconds.
package coalesce

import "fmt"

// Policy decides, for each I/O completion, whether to raise an interrupt now
// or to hold the completion for a later interrupt.
type Policy interface {
	// Name is the policy's short name ("none", "mcc", "vic" …).
	Name() string
	// Complete is called when a completion is ready. now is the caller's
	// time in ns (policies that do not need time ignore it); cif is the
	// number of commands still in flight at the device after this one
	// completed. It returns true to deliver an interrupt now, covering this
	// completion and every held one.
	Complete(now int64, cif int) bool
	// Deadline returns the absolute time (ns) by which held completions
	// must be delivered by a timer; ok is false when no timer is needed.
	Deadline() (at int64, ok bool)
	// Expire is called when the caller's timer for Deadline fires; it
	// returns true to deliver an interrupt for the held completions.
	Expire(now int64) bool
	// Pending is the number of completions held.
	Pending() int
}

// Epocher is implemented by policies that measure over epochs (vIC's
// trickle detection). The caller calls Epoch at every epoch boundary.
type Epocher interface {
	Epoch()
}

// None delivers an interrupt for every completion.
type None struct{}

// Name implements Policy.
func (None) Name() string { return "none" }

// Complete implements Policy.
func (None) Complete(int64, int) bool { return true }

// Deadline implements Policy.
func (None) Deadline() (int64, bool) { return 0, false }

// Expire implements Policy.
func (None) Expire(int64) bool { return false }

// Pending implements Policy.
func (None) Pending() int { return 0 }

// Fixed is classic hardware coalescing: deliver when MCC completions are
// pending (maximum coalesce count) or when the oldest pending completion has
// waited MIDL ns (maximum interrupt delay latency), whichever comes first.
// MCC ≤ 1 with MIDL 0 delivers every completion. MCC without a timer could
// hold a completion forever when fewer than MCC commands are in flight, so
// New refuses MCC > 1 without MIDL.
type Fixed struct {
	name    string
	MCC     int
	MIDL    int64
	pending int
	first   int64
}

// NewFixed returns a fixed coalescer. name is what Name reports.
func NewFixed(name string, mcc int, midl int64) (*Fixed, error) {
	if mcc < 0 || midl < 0 {
		return nil, fmt.Errorf("coalesce %s: mcc %d and midl %d must not be negative", name, mcc, midl)
	}
	if mcc > 1 && midl == 0 {
		return nil, fmt.Errorf("coalesce %s: mcc %d needs a delay bound (midl > 0), or a completion can wait forever when fewer than %d commands are in flight", name, mcc, mcc)
	}
	return &Fixed{name: name, MCC: mcc, MIDL: midl}, nil
}

// Name implements Policy.
func (f *Fixed) Name() string { return f.name }

// Complete implements Policy.
func (f *Fixed) Complete(now int64, _ int) bool {
	f.pending++
	if f.pending == 1 {
		f.first = now
	}
	if (f.MCC > 0 && f.pending >= f.MCC) || (f.MIDL == 0 && f.MCC <= 1) {
		f.pending = 0
		return true
	}
	return false
}

// Deadline implements Policy.
func (f *Fixed) Deadline() (int64, bool) {
	if f.pending == 0 || f.MIDL == 0 {
		return 0, false
	}
	return f.first + f.MIDL, true
}

// Expire implements Policy.
func (f *Fixed) Expire(now int64) bool {
	if f.pending == 0 || f.MIDL == 0 || now < f.first+f.MIDL {
		return false
	}
	f.pending = 0
	return true
}

// Pending implements Policy.
func (f *Fixed) Pending() int { return f.pending }

// SetProfile changes the count and delay bounds (used by DIM). Held
// completions keep their original arrival time.
func (f *Fixed) SetProfile(mcc int, midl int64) {
	f.MCC, f.MIDL = mcc, midl
}

// Adaptive is timeout-adaptive coalescing as described for NVMe in
// "Optimizing Storage Performance with Calibrated Interrupts" (Tai et al.,
// OSDI 2021): deliver when Thr completions are pending, or when no new
// completion has arrived for the quiet period Delta (each completion
// restarts the quiet timer).
type Adaptive struct {
	Thr     int
	Delta   int64
	pending int
	last    int64
}

// NewAdaptive returns a timeout-adaptive coalescer.
func NewAdaptive(thr int, delta int64) (*Adaptive, error) {
	if thr < 1 || delta <= 0 {
		return nil, fmt.Errorf("coalesce adaptive: thr %d must be ≥ 1 and delta %d ns > 0", thr, delta)
	}
	return &Adaptive{Thr: thr, Delta: delta}, nil
}

// Name implements Policy.
func (a *Adaptive) Name() string { return "adaptive" }

// Complete implements Policy.
func (a *Adaptive) Complete(now int64, _ int) bool {
	a.pending++
	a.last = now
	if a.pending >= a.Thr {
		a.pending = 0
		return true
	}
	return false
}

// Deadline implements Policy.
func (a *Adaptive) Deadline() (int64, bool) {
	if a.pending == 0 {
		return 0, false
	}
	return a.last + a.Delta, true
}

// Expire implements Policy.
func (a *Adaptive) Expire(now int64) bool {
	if a.pending == 0 || now < a.last+a.Delta {
		return false
	}
	a.pending = 0
	return true
}

// Pending implements Policy.
func (a *Adaptive) Pending() int { return a.pending }
