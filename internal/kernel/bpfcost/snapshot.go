// Package bpfcost measures what interrupts cost in CPU time, with eBPF
// programs on the kernel's irq, softirq and napi tracepoints: hardirq time
// and count per IRQ per CPU, softirq time and count per vector per CPU, and
// NAPI polls, packets and budget exhaustion per device queue.
//
// A Collector (collector.go) loads and attaches the programs (tp_btf: no
// tracefs needed, only /sys/kernel/btf/vmlinux) and reads the per-CPU maps
// into a Snapshot of raw cumulative counters. Diff turns two Snapshots into
// rates; it is pure and tested on recorded map contents.
//
// Softirq time is the time between softirq_entry and softirq_exit, so it
// includes hardirqs that interrupted the softirq (as bcc's softirqs tool
// counts it).
package bpfcost

import (
	"fmt"
	"sort"
)

// VectorNames are the softirq vectors as the kernel names them in
// /proc/softirqs (kernel/softirq.c softirq_to_name), by vector number.
var VectorNames = []string{"HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER", "RCU"}

// VectorName names softirq vector v ("VEC12" past the known ones).
func VectorName(v int) string {
	if v >= 0 && v < len(VectorNames) {
		return VectorNames[v]
	}
	return fmt.Sprintf("VEC%d", v)
}

// Snapshot is one reading of the collector's maps: cumulative counters
// since the programs were loaded. Every per-CPU slice has one entry per
// element of CPUs (the CPUs online when it was read), in that order.
type Snapshot struct {
	// Clock is CLOCK_MONOTONIC in nanoseconds when the maps were read.
	Clock int64 `json:"clock_ns"`
	// Boot identifies the collector instance (its load time): counters of
	// two snapshots with different Boot are not comparable.
	Boot int64 `json:"boot_ns"`
	CPUs []int `json:"cpus"`
	// Hardirqs by IRQ number, ascending.
	Hardirqs []Counters `json:"hardirqs"`
	// Softirqs by vector number, ascending.
	Softirqs []Counters `json:"softirqs"`
	// NAPI by device name and NAPI id.
	NAPI []NAPICounters `json:"napi,omitempty"`
	// LostIRQ and LostNAPI count events not counted because a map was full
	// (summed over CPUs).
	LostIRQ  uint64 `json:"lost_irq,omitempty"`
	LostNAPI uint64 `json:"lost_napi,omitempty"`
}

// Counters are one IRQ's or one softirq vector's cumulative time (ns) and
// count per CPU.
type Counters struct {
	// ID is the IRQ number or the softirq vector number.
	ID     int      `json:"id"`
	TimeNs []uint64 `json:"time_ns"`
	Count  []uint64 `json:"count"`
}

// NAPICounters are one NAPI instance's cumulative polls, packets (work)
// and polls that used their whole budget, per CPU.
type NAPICounters struct {
	Dev       string   `json:"dev"`
	NAPIID    uint32   `json:"napi_id"`
	Polls     []uint64 `json:"polls"`
	Work      []uint64 `json:"work"`
	Exhausted []uint64 `json:"exhausted"`
}

// Cost is what the interrupts cost between two snapshots. Times are CPU
// seconds per second of the interval (0.25 = a quarter of one CPU); counts
// are per second.
type Cost struct {
	Seconds float64
	// CPUs in both snapshots, ascending; Absent were online in only one.
	CPUs   []int
	Absent []int
	// Hardirq is each CPU's total hardirq time.
	Hardirq map[int]float64
	// Softirq is each CPU's softirq time by vector name ("NET_RX").
	Softirq map[int]map[string]float64
	// IRQs by number, ascending.
	IRQs []IRQCost
	// NAPI instances that polled in the interval, busiest first.
	NAPI []NAPIRate
	// Resets names counters that went backwards by more than a wrap could
	// explain (counted as 0).
	Resets []string
	// Lost events (maps full) in the interval.
	Lost uint64
}

// IRQCost is one IRQ's hardirq time and rate over the interval.
type IRQCost struct {
	IRQ    int
	Time   float64         // CPU s/s, all CPUs
	Rate   float64         // handler runs/s, all CPUs
	PerCPU map[int]float64 // CPU s/s by CPU
}

// NAPIRate is one NAPI instance over the interval, summed over CPUs.
type NAPIRate struct {
	Dev       string  `json:"dev"`
	NAPIID    uint32  `json:"napi_id"`
	Polls     float64 `json:"polls"`     // per second
	Packets   float64 `json:"packets"`   // per second
	Exhausted float64 `json:"exhausted"` // polls/s that used their whole budget
	CPUs      []int   `json:"cpus"`      // where it polled
	// PollsPerCPU is Polls by CPU: where a device without an IRQ (veth)
	// did its receive work.
	PollsPerCPU map[int]float64 `json:"polls_per_cpu,omitempty"`
}

// delta64 is cur-prev for a 64-bit counter. A counter lower than before is
// taken as having wrapped when the modular difference is below 2^63, else
// as reset (ok=false, delta 0).
func delta64(prev, cur uint64) (d uint64, ok bool) {
	d = cur - prev // modular
	if cur < prev && d >= 1<<63 {
		return 0, false
	}
	return d, true
}

// Diff returns the cost between prev and cur. It is pure. Counters are
// matched by CPU id (not column), so CPUs going offline or online between
// the snapshots are left out (Absent) rather than misattributed; an IRQ or
// NAPI instance new in cur counts from zero.
func Diff(prev, cur *Snapshot) (*Cost, error) {
	if prev == nil || cur == nil {
		return nil, fmt.Errorf("bpfcost: need two snapshots")
	}
	if prev.Boot != cur.Boot {
		return nil, fmt.Errorf("bpfcost: snapshots of different collector instances (loaded at %d and %d ns)", prev.Boot, cur.Boot)
	}
	dt := cur.Clock - prev.Clock
	if dt <= 0 {
		return nil, fmt.Errorf("bpfcost: snapshots do not span a positive interval (%d to %d ns)", prev.Clock, cur.Clock)
	}
	sec := float64(dt) / 1e9
	c := &Cost{Seconds: sec, Hardirq: map[int]float64{}, Softirq: map[int]map[string]float64{}}

	// Columns: CPU id -> (prev column, cur column).
	prevCol := make(map[int]int, len(prev.CPUs))
	for i, id := range prev.CPUs {
		prevCol[id] = i
	}
	type col struct{ id, p, c int }
	var cols []col
	inCur := map[int]bool{}
	for i, id := range cur.CPUs {
		inCur[id] = true
		if p, ok := prevCol[id]; ok {
			cols = append(cols, col{id, p, i})
			c.CPUs = append(c.CPUs, id)
			c.Softirq[id] = map[string]float64{}
			c.Hardirq[id] = 0
		} else {
			c.Absent = append(c.Absent, id)
		}
	}
	for _, id := range prev.CPUs {
		if !inCur[id] {
			c.Absent = append(c.Absent, id)
		}
	}
	sort.Ints(c.CPUs)
	sort.Ints(c.Absent)

	at := func(s []uint64, i int) uint64 {
		if i < len(s) {
			return s[i]
		}
		return 0
	}
	d := func(what string, cpu int, p, q uint64) float64 {
		v, ok := delta64(p, q)
		if !ok {
			c.Resets = append(c.Resets, fmt.Sprintf("%s CPU%d: %d -> %d", what, cpu, p, q))
		}
		return float64(v)
	}
	index := func(cs []Counters) map[int]*Counters {
		m := make(map[int]*Counters, len(cs))
		for i := range cs {
			m[cs[i].ID] = &cs[i]
		}
		return m
	}

	prevIRQ := index(prev.Hardirqs)
	for i := range cur.Hardirqs {
		q := &cur.Hardirqs[i]
		p := prevIRQ[q.ID]
		if p == nil {
			p = &Counters{}
		}
		ic := IRQCost{IRQ: q.ID, PerCPU: make(map[int]float64, len(cols))}
		for _, k := range cols {
			name := fmt.Sprintf("irq %d", q.ID)
			t := d(name+" time", k.id, at(p.TimeNs, k.p), at(q.TimeNs, k.c)) / 1e9 / sec
			n := d(name+" count", k.id, at(p.Count, k.p), at(q.Count, k.c)) / sec
			ic.PerCPU[k.id] = t
			ic.Time += t
			ic.Rate += n
			c.Hardirq[k.id] += t
		}
		c.IRQs = append(c.IRQs, ic)
	}
	sort.Slice(c.IRQs, func(i, j int) bool { return c.IRQs[i].IRQ < c.IRQs[j].IRQ })

	prevVec := index(prev.Softirqs)
	for i := range cur.Softirqs {
		q := &cur.Softirqs[i]
		p := prevVec[q.ID]
		if p == nil {
			p = &Counters{}
		}
		name := VectorName(q.ID)
		for _, k := range cols {
			c.Softirq[k.id][name] = d(name+" time", k.id, at(p.TimeNs, k.p), at(q.TimeNs, k.c)) / 1e9 / sec
		}
	}

	type napiKey struct {
		dev string
		id  uint32
	}
	prevNAPI := make(map[napiKey]*NAPICounters, len(prev.NAPI))
	for i := range prev.NAPI {
		prevNAPI[napiKey{prev.NAPI[i].Dev, prev.NAPI[i].NAPIID}] = &prev.NAPI[i]
	}
	for i := range cur.NAPI {
		q := &cur.NAPI[i]
		p := prevNAPI[napiKey{q.Dev, q.NAPIID}]
		if p == nil {
			p = &NAPICounters{}
		}
		r := NAPIRate{Dev: q.Dev, NAPIID: q.NAPIID}
		name := fmt.Sprintf("napi %s/%d", q.Dev, q.NAPIID)
		for _, k := range cols {
			polls := d(name+" polls", k.id, at(p.Polls, k.p), at(q.Polls, k.c)) / sec
			r.Polls += polls
			r.Packets += d(name+" work", k.id, at(p.Work, k.p), at(q.Work, k.c)) / sec
			r.Exhausted += d(name+" exhausted", k.id, at(p.Exhausted, k.p), at(q.Exhausted, k.c)) / sec
			if polls > 0 {
				r.CPUs = append(r.CPUs, k.id)
				if r.PollsPerCPU == nil {
					r.PollsPerCPU = map[int]float64{}
				}
				r.PollsPerCPU[k.id] = polls
			}
		}
		if r.Polls > 0 {
			c.NAPI = append(c.NAPI, r)
		}
	}
	sort.SliceStable(c.NAPI, func(i, j int) bool { return c.NAPI[i].Packets > c.NAPI[j].Packets })

	if l, ok := delta64(prev.LostIRQ+prev.LostNAPI, cur.LostIRQ+cur.LostNAPI); ok {
		c.Lost = l
	}
	return c, nil
}
