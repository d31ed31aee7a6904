package load

import "math"

// CPUTime is how one CPU's time splits over the kernel's accounting
// categories, the columns of a cpuN line of /proc/stat. It is the one type
// for that split: the unit is its holder's, seconds in a Sample
// (CPUTimes), percent of the CPU's time in a Load (CPULoad) and in what is
// derived from one (top's frames, bench runs, report means).
//
// Counted in seconds, as the kernel counts, User includes Guest and Nice
// includes GuestNice; in percent (Percent) they exclude them, as mpstat
// shows them.
type CPUTime struct {
	User      float64 `json:"user"`
	Nice      float64 `json:"nice"`
	System    float64 `json:"system"`
	IOWait    float64 `json:"iowait"`
	IRQ       float64 `json:"irq"`
	SoftIRQ   float64 `json:"softirq"`
	Steal     float64 `json:"steal"`
	Guest     float64 `json:"guest"`
	GuestNice float64 `json:"guest_nice"`
	Idle      float64 `json:"idle"`
}

// Busy is the percentage neither idle nor waiting for I/O (t in percent).
func (t *CPUTime) Busy() float64 { return 100 - t.Idle - t.IOWait }

// IRQTime is the percentage spent in hard and soft interrupt context (t in
// percent).
func (t *CPUTime) IRQTime() float64 { return t.IRQ + t.SoftIRQ }

// Percent turns time spent in each category over an interval (seconds, or
// seconds per second; negative values count as 0) into percentages of the
// CPU's time. The whole is the sum of every category but Guest and
// GuestNice, which User and Nice already include (kernel
// account_guest_time), so that each tick counts once; it is not the
// interval, so an idle counter that stalls on a tickless CPU does not break
// the sum. ok is false when no time was counted at all (the percentages are
// then all 0).
func (t CPUTime) Percent() (pct CPUTime, ok bool) {
	user, nice, sys, idle := math.Max(0, t.User), math.Max(0, t.Nice), math.Max(0, t.System), math.Max(0, t.Idle)
	iow, irq, soft, steal := math.Max(0, t.IOWait), math.Max(0, t.IRQ), math.Max(0, t.SoftIRQ), math.Max(0, t.Steal)
	guest, gnice := math.Max(0, t.Guest), math.Max(0, t.GuestNice)
	total := user + nice + sys + idle + iow + irq + soft + steal
	if total <= 0 {
		return CPUTime{}, false
	}
	p := func(v float64) float64 { return 100 * v / total }
	return CPUTime{
		User: p(math.Max(0, user-guest)), Nice: p(math.Max(0, nice-gnice)), System: p(sys),
		IOWait: p(iow), IRQ: p(irq), SoftIRQ: p(soft), Steal: p(steal),
		Guest: p(guest), GuestNice: p(gnice), Idle: p(idle),
	}, true
}

// IdleOrIOWait is the percentage idle or waiting for I/O (t in percent):
// 100 − Busy.
func (t *CPUTime) IdleOrIOWait() float64 { return t.Idle + t.IOWait }

// categories are t's fields, in declaration order.
func (t *CPUTime) categories() [10]*float64 {
	return [10]*float64{&t.User, &t.Nice, &t.System, &t.IOWait, &t.IRQ, &t.SoftIRQ, &t.Steal, &t.Guest, &t.GuestNice, &t.Idle}
}

// CombineCPUTimes applies f, category by category, to the values the
// category has in ts (a per-category median over runs, for one).
func CombineCPUTimes(ts []CPUTime, f func([]float64) float64) CPUTime {
	var out CPUTime
	for k, dst := range out.categories() {
		v := make([]float64, len(ts))
		for i := range ts {
			v[i] = *ts[i].categories()[k]
		}
		*dst = f(v)
	}
	return out
}

// AddScaled adds w times each category of o to t (weighted sums, as for
// a mean over intervals of different lengths).
func (t *CPUTime) AddScaled(w float64, o CPUTime) {
	t.User += w * o.User
	t.Nice += w * o.Nice
	t.System += w * o.System
	t.IOWait += w * o.IOWait
	t.IRQ += w * o.IRQ
	t.SoftIRQ += w * o.SoftIRQ
	t.Steal += w * o.Steal
	t.Guest += w * o.Guest
	t.GuestNice += w * o.GuestNice
	t.Idle += w * o.Idle
}

// Scaled is t with each category divided by d.
func (t CPUTime) Scaled(d float64) CPUTime {
	return CPUTime{
		User: t.User / d, Nice: t.Nice / d, System: t.System / d, IOWait: t.IOWait / d,
		IRQ: t.IRQ / d, SoftIRQ: t.SoftIRQ / d, Steal: t.Steal / d,
		Guest: t.Guest / d, GuestNice: t.GuestNice / d, Idle: t.Idle / d,
	}
}
