package coalesce

// This file reproduces the behaviour of Linux's dynamic interrupt moderation
// (lib/dim/dim.c, lib/dim/net_dim.c, include/linux/dim.h): a sample is taken
// at every interrupt; after DIMNEvents interrupts the rates since the start
// sample are compared with the previous window, and the profile index walks
// right (more moderation) while things get better, turns when they get worse,
// parks on top when it turned twice around the best point or hit an edge,
// and parks "tired" after too many steps. Written from the kernel's logic,
// in Go idiom; the constants and comparisons are the kernel's.

// DIM constants from include/linux/dim.h and lib/dim/net_dim.c.
const (
	DIMNEvents      = 64 // DIM_NEVENTS: interrupts per measurement window
	DIMNumProfiles  = 5  // NET_DIM_PARAMS_NUM_PROFILES
	DIMDefProfileIx = 1  // NET_DIM_DEF_PROFILE_EQE / _CQE
)

// DIM measurement states (dim->state).
const (
	DIMStartMeasure = iota
	DIMMeasureInProgress
	DIMApplyNewProfile
)

// DIM tuning states (dim->tune_state).
const (
	DIMParkingOnTop = iota
	DIMParkingTired
	DIMGoingRight
	DIMGoingLeft
)

// Results of comparing two windows.
const (
	DIMStatsWorse = iota
	DIMStatsSame
	DIMStatsBetter
)

// Results of a step.
const (
	DIMStepped = iota
	DIMTooTired
	DIMOnEdge
)

// DIMProfile is one moderation setting: hold up to Usec µs or Pkts
// completions.
type DIMProfile struct {
	Usec int
	Pkts int
}

// Kernel profile tables (net_dim.c). EQE mode restarts the timer at the
// first event after an interrupt; CQE mode at each completion.
var (
	DIMRxEQE = [DIMNumProfiles]DIMProfile{{1, 256}, {8, 256}, {64, 256}, {128, 256}, {256, 256}}
	DIMRxCQE = [DIMNumProfiles]DIMProfile{{2, 256}, {8, 128}, {16, 64}, {32, 64}, {64, 64}}
	DIMTxEQE = [DIMNumProfiles]DIMProfile{{1, 128}, {8, 128}, {32, 128}, {64, 128}, {128, 128}}
	DIMTxCQE = [DIMNumProfiles]DIMProfile{{5, 128}, {8, 64}, {16, 32}, {32, 32}, {64, 32}}
)

// DIMSample is struct dim_sample: free-running counters at one moment.
type DIMSample struct {
	TimeNs int64
	Pkts   uint32
	Bytes  uint32
	Events uint16
	Comps  uint32
}

// DIMStats is struct dim_stats: rates per millisecond over a window.
type DIMStats struct {
	PPMS, BPMS, EPMS, CPMS, CPERatio int
}

// DIM is the state of one moderated queue (struct dim).
type DIM struct {
	State      int
	TuneState  int
	ProfileIx  int
	StepsRight int
	StepsLeft  int
	Tired      int
	PrevStats  DIMStats
	Start      DIMSample
}

// NewDIM returns DIM in its initial state: start measuring, parked on top at
// the default profile (drivers zero struct dim and set profile_ix to the
// default).
func NewDIM() *DIM {
	return &DIM{State: DIMStartMeasure, TuneState: DIMParkingOnTop, ProfileIx: DIMDefProfileIx}
}

// isSignificantDiff is IS_SIGNIFICANT_DIFF: more than 10 % difference.
func isSignificantDiff(val, ref int) bool {
	if ref == 0 {
		return false
	}
	d := val - ref
	if d < 0 {
		d = -d
	}
	return 100*d/ref > 10
}

// calcStats is dim_calc_stats: counter gaps wrap like the kernel's u32/u16.
func calcStats(start, end DIMSample) (DIMStats, bool) {
	deltaUs := uint32((end.TimeNs - start.TimeNs) / 1000)
	if deltaUs == 0 {
		return DIMStats{}, false
	}
	npkts := uint64(end.Pkts - start.Pkts)
	nbytes := uint64(end.Bytes - start.Bytes)
	ncomps := uint64(end.Comps - start.Comps)
	d := uint64(deltaUs)
	up := func(n uint64) int { return int((n*1000 + d - 1) / d) }
	s := DIMStats{PPMS: up(npkts), BPMS: up(nbytes), EPMS: up(DIMNEvents), CPMS: up(ncomps)}
	if s.EPMS != 0 {
		s.CPERatio = s.CPMS * 100 / s.EPMS
	}
	return s, true
}

// compare is net_dim_stats_compare: bytes, then packets, then events (fewer
// events per ms is better).
func compare(curr, prev DIMStats) int {
	if r, ok := compareRate(curr.BPMS, prev.BPMS); ok {
		return r
	}
	if r, ok := compareRate(curr.PPMS, prev.PPMS); ok {
		return r
	}
	if prev.EPMS == 0 {
		return DIMStatsSame
	}
	if isSignificantDiff(curr.EPMS, prev.EPMS) {
		if curr.EPMS < prev.EPMS {
			return DIMStatsBetter
		}
		return DIMStatsWorse
	}
	return DIMStatsSame
}

// compareRate is compare's step for a rate where more is better (bytes,
// packets): its verdict, or false when the rate leaves it to the next.
func compareRate(curr, prev int) (int, bool) {
	if prev == 0 {
		if curr != 0 {
			return DIMStatsBetter, true
		}
		return DIMStatsSame, true
	}
	if isSignificantDiff(curr, prev) {
		if curr > prev {
			return DIMStatsBetter, true
		}
		return DIMStatsWorse, true
	}
	return 0, false
}

func (d *DIM) onTop() bool {
	switch d.TuneState {
	case DIMParkingOnTop, DIMParkingTired:
		return true
	case DIMGoingRight:
		return d.StepsLeft > 1 && d.StepsRight == 1
	default:
		return d.StepsRight > 1 && d.StepsLeft == 1
	}
}

func (d *DIM) turn() {
	switch d.TuneState {
	case DIMGoingRight:
		d.TuneState = DIMGoingLeft
		d.StepsLeft = 0
	case DIMGoingLeft:
		d.TuneState = DIMGoingRight
		d.StepsRight = 0
	}
}

func (d *DIM) parkOnTop() {
	d.StepsRight, d.StepsLeft, d.Tired = 0, 0, 0
	d.TuneState = DIMParkingOnTop
}

func (d *DIM) parkTired() {
	d.StepsRight, d.StepsLeft = 0, 0
	d.TuneState = DIMParkingTired
}

func (d *DIM) step() int {
	if d.Tired == DIMNumProfiles*2 {
		return DIMTooTired
	}
	switch d.TuneState {
	case DIMGoingRight:
		if d.ProfileIx == DIMNumProfiles-1 {
			return DIMOnEdge
		}
		d.ProfileIx++
		d.StepsRight++
	case DIMGoingLeft:
		if d.ProfileIx == 0 {
			return DIMOnEdge
		}
		d.ProfileIx--
		d.StepsLeft++
	}
	d.Tired++
	return DIMStepped
}

func (d *DIM) exitParking() {
	if d.ProfileIx != 0 {
		d.TuneState = DIMGoingLeft
	} else {
		d.TuneState = DIMGoingRight
	}
	d.step()
}

// Decide is net_dim_decision: it updates the tuning state from the window's
// stats and reports whether the profile changed.
func (d *DIM) Decide(curr DIMStats) bool {
	prevState, prevIx := d.TuneState, d.ProfileIx
	switch d.TuneState {
	case DIMParkingOnTop:
		if compare(curr, d.PrevStats) != DIMStatsSame {
			d.exitParking()
		}
	case DIMParkingTired:
		d.Tired--
		if d.Tired == 0 {
			d.exitParking()
		}
	case DIMGoingRight, DIMGoingLeft:
		if compare(curr, d.PrevStats) != DIMStatsBetter {
			d.turn()
		}
		if d.onTop() {
			d.parkOnTop()
			break
		}
		switch d.step() {
		case DIMOnEdge:
			d.parkOnTop()
		case DIMTooTired:
			d.parkTired()
		}
	}
	if prevState != DIMParkingOnTop || d.TuneState != DIMParkingOnTop {
		d.PrevStats = curr
	}
	return d.ProfileIx != prevIx
}

// Sample is net_dim: feed the counters at an interrupt. It returns true when
// a new profile is to be applied; the caller applies it and calls Applied
// (the kernel's work handler sets the state back to start measuring).
func (d *DIM) Sample(end DIMSample) bool {
	switch d.State {
	case DIMMeasureInProgress:
		if end.Events-d.Start.Events < DIMNEvents {
			return false
		}
		st, ok := calcStats(d.Start, end)
		if !ok {
			return false
		}
		if d.Decide(st) {
			d.State = DIMApplyNewProfile
			return true
		}
		d.Start = end
		d.State = DIMMeasureInProgress
	case DIMStartMeasure:
		d.Start = end
		d.State = DIMMeasureInProgress
	case DIMApplyNewProfile:
	}
	return false
}

// Applied tells DIM the new profile is in force (the driver's work item).
func (d *DIM) Applied() { d.State = DIMStartMeasure }

// DIMPolicy drives fixed count/delay coalescing with DIM: every delivered
// interrupt is a DIM event; completions count as packets and BlockBytes
// each as bytes.
type DIMPolicy struct {
	DIM        *DIM
	Profiles   [DIMNumProfiles]DIMProfile
	BlockBytes uint32
	fixed      *Fixed
	ctr        DIMSample
	Changes    int
}

// NewDIMPolicy returns DIM over the given profile table (DIMRxEQE if nil)
// with blockBytes per completion (4096 if 0).
func NewDIMPolicy(profiles *[DIMNumProfiles]DIMProfile, blockBytes uint32) *DIMPolicy {
	if profiles == nil {
		profiles = &DIMRxEQE
	}
	if blockBytes == 0 {
		blockBytes = 4096
	}
	p := &DIMPolicy{DIM: NewDIM(), Profiles: *profiles, BlockBytes: blockBytes}
	pr := p.Profiles[p.DIM.ProfileIx]
	p.fixed = &Fixed{name: "dim", MCC: pr.Pkts, MIDL: int64(pr.Usec) * 1000}
	return p
}

// Name implements Policy.
func (p *DIMPolicy) Name() string { return "dim" }

// Profile returns the profile in force.
func (p *DIMPolicy) Profile() DIMProfile { return p.Profiles[p.DIM.ProfileIx] }

func (p *DIMPolicy) interrupt(now int64) {
	p.ctr.Events++
	p.ctr.TimeNs = now
	if p.DIM.Sample(p.ctr) {
		pr := p.Profiles[p.DIM.ProfileIx]
		p.fixed.SetProfile(pr.Pkts, int64(pr.Usec)*1000)
		p.Changes++
		p.DIM.Applied()
	}
}

// Complete implements Policy.
func (p *DIMPolicy) Complete(now int64, cif int) bool {
	p.ctr.Pkts++
	p.ctr.Comps++
	p.ctr.Bytes += p.BlockBytes
	if p.fixed.Complete(now, cif) {
		p.interrupt(now)
		return true
	}
	return false
}

// Deadline implements Policy.
func (p *DIMPolicy) Deadline() (int64, bool) { return p.fixed.Deadline() }

// Expire implements Policy.
func (p *DIMPolicy) Expire(now int64) bool {
	if p.fixed.Expire(now) {
		p.interrupt(now)
		return true
	}
	return false
}

// Pending implements Policy.
func (p *DIMPolicy) Pending() int { return p.fixed.Pending() }
