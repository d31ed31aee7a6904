package coalesce

import (
	"fmt"
	"sort"
	"strings"
)

// Entry is one row of the vIC table: at MinCIF commands in flight or more
// (up to the next row), deliver CountUp of every SkipUp completions, so the
// delivery ratio is R = CountUp/SkipUp. CountUp == SkipUp means R = 1.
type Entry struct {
	MinCIF  int    `json:"min_cif"`
	CountUp uint32 `json:"count_up"`
	SkipUp  uint32 `json:"skip_up"`
}

func (e Entry) String() string { return fmt.Sprintf("%d/%d", e.CountUp, e.SkipUp) }

// Held is the most completions this entry ever holds at once (SkipUp-CountUp).
func (e Entry) Held() int { return int(e.SkipUp - e.CountUp) }

// DefaultTable is irqpilot's vIC table. The paper's table is not public;
// this one follows the slides' reasoning (docs/coalescing.md derives it):
//   - R falls as CIF rises ("vary delivery ratio R inversely with CIF");
//   - at most about CIF/8 completions are held, so the device pipeline stays
//     ≥ ~87 % full ("with CIF 32 the pipeline stays mostly full, with CIF 4
//     coalescing 2 leaves it half empty");
//   - no step from R = 1 straight to 1/2 ("1.0 → 0.5 jump too drastic"): the
//     first steps are 4/5 and 2/3;
//   - coalescing is off at or below the CIF threshold (default 4).
var DefaultTable = []Entry{
	{MinCIF: 5, CountUp: 4, SkipUp: 5},  // R 0.80, holds ≤ 1
	{MinCIF: 8, CountUp: 2, SkipUp: 3},  // R 0.67, holds ≤ 1
	{MinCIF: 12, CountUp: 1, SkipUp: 2}, // R 0.50, holds ≤ 1
	{MinCIF: 16, CountUp: 1, SkipUp: 3}, // R 0.33, holds ≤ 2
	{MinCIF: 24, CountUp: 1, SkipUp: 4}, // R 0.25, holds ≤ 3
	{MinCIF: 32, CountUp: 1, SkipUp: 5}, // R 0.20, holds ≤ 4
	{MinCIF: 48, CountUp: 1, SkipUp: 6}, // R 0.17, holds ≤ 5
	{MinCIF: 64, CountUp: 1, SkipUp: 8}, // R 0.125, holds ≤ 7
}

// MaxTableCIF is the largest CIF the lookup array resolves individually;
// higher CIF uses the last row. Keeping a flat array indexed by CIF makes the
// per-completion lookup a bounds check and a load, with no search or division.
const MaxTableCIF = 255

// VICConfig configures vIC.
type VICConfig struct {
	// Table maps CIF to the delivery ratio; nil means DefaultTable.
	Table []Entry
	// CIFThreshold: at or below this many commands in flight coalescing is
	// off (every completion is delivered). Default 4 (the slides' CIF 4
	// example: coalescing 2 would leave the pipeline half empty).
	CIFThreshold int
	// TrickleIOPS: when an epoch saw fewer completions than this rate,
	// coalescing is off for the next epoch (slides: "trickle I/O — measure and
	// automatically enable/disable vIC"). Default 2000.
	TrickleIOPS int
	// EpochNs is the epoch length the caller uses between Epoch calls.
	// Default 10 ms.
	EpochNs int64
}

// VIC is virtual interrupt coalescing. The per-completion path (Complete)
// uses only integer compares, increments and an array load: no floating
// point, no division, no clock read, no allocation (see BenchmarkVICComplete
// and docs/coalescing.md for how that was checked).
type VIC struct {
	lookup       [MaxTableCIF + 1]ratio
	threshold    int
	trickleCount uint32 // completions per epoch below which vIC is off
	enabled      bool   // trickle switch, updated by Epoch
	counter      uint32 // position in the current skipUp cycle, 1-based
	pending      int
	epochCount   uint32 // completions seen this epoch

	table   []Entry
	Stats   VICStats
	trickle int
	epochNs int64
}

type ratio struct{ countUp, skipUp uint32 }

// VICStats counts what vIC did.
type VICStats struct {
	Completions uint64
	Delivered   uint64 // completions that raised an interrupt
	Held        uint64 // completions held for a later interrupt
}

// NewVIC validates cfg and builds the CIF lookup.
func NewVIC(cfg VICConfig) (*VIC, error) {
	if cfg.Table == nil {
		cfg.Table = DefaultTable
	}
	if cfg.CIFThreshold == 0 {
		cfg.CIFThreshold = 4
	}
	if cfg.CIFThreshold < 0 {
		return nil, fmt.Errorf("vic: CIF threshold %d must not be negative (holding at CIF 0 could never be released)", cfg.CIFThreshold)
	}
	if cfg.TrickleIOPS == 0 {
		cfg.TrickleIOPS = 2000
	}
	if cfg.EpochNs == 0 {
		cfg.EpochNs = 10_000_000
	}
	if cfg.TrickleIOPS < 0 || cfg.EpochNs < 0 {
		return nil, fmt.Errorf("vic: trickle IOPS %d and epoch %d ns must be positive", cfg.TrickleIOPS, cfg.EpochNs)
	}
	t := append([]Entry(nil), cfg.Table...)
	sort.Slice(t, func(i, j int) bool { return t[i].MinCIF < t[j].MinCIF })
	for i, e := range t {
		if e.CountUp == 0 || e.SkipUp == 0 || e.CountUp > e.SkipUp {
			return nil, fmt.Errorf("vic: table row %d (cif ≥ %d): need 1 ≤ countUp %d ≤ skipUp %d", i, e.MinCIF, e.CountUp, e.SkipUp)
		}
		if e.SkipUp > 1<<16 {
			return nil, fmt.Errorf("vic: table row %d: skipUp %d too large", i, e.SkipUp)
		}
		if i > 0 && e.MinCIF == t[i-1].MinCIF {
			return nil, fmt.Errorf("vic: table rows %d and %d both start at cif %d", i-1, i, e.MinCIF)
		}
	}
	v := &VIC{threshold: cfg.CIFThreshold, table: t, trickle: cfg.TrickleIOPS, epochNs: cfg.EpochNs}
	// Completions per epoch at the trickle rate; division here is at setup,
	// not on the per-completion path.
	v.trickleCount = uint32(int64(cfg.TrickleIOPS) * cfg.EpochNs / 1_000_000_000)
	for cif := 0; cif <= MaxTableCIF; cif++ {
		r := ratio{1, 1}
		for _, e := range t {
			if cif >= e.MinCIF {
				r = ratio{e.CountUp, e.SkipUp}
			}
		}
		v.lookup[cif] = r
	}
	return v, nil
}

// MustVIC is NewVIC for known-good configurations (defaults, tests).
func MustVIC(cfg VICConfig) *VIC {
	v, err := NewVIC(cfg)
	if err != nil {
		panic(err)
	}
	return v
}

// Name implements Policy.
func (v *VIC) Name() string { return "vic" }

// Complete implements Policy: the per-completion path.
func (v *VIC) Complete(_ int64, cif int) bool {
	v.epochCount++
	v.Stats.Completions++
	if cif <= v.threshold || !v.enabled {
		// Short-circuit for low CIF and trickle I/O: deliver now, which also
		// flushes anything held.
		v.counter = 0
		v.pending = 0
		v.Stats.Delivered++
		return true
	}
	if cif > MaxTableCIF {
		cif = MaxTableCIF
	}
	r := v.lookup[cif]
	v.counter++
	if v.counter > r.skipUp {
		v.counter = 1
	}
	if v.counter <= r.countUp {
		v.pending = 0
		v.Stats.Delivered++
		return true
	}
	v.pending++
	v.Stats.Held++
	return false
}

// Deadline implements Policy: vIC never needs a timer; a held completion is
// released by a later completion, which exists because it held only while
// more than CIFThreshold ≥ 0 commands were in flight.
func (v *VIC) Deadline() (int64, bool) { return 0, false }

// Expire implements Policy.
func (v *VIC) Expire(int64) bool { return false }

// Pending implements Policy.
func (v *VIC) Pending() int { return v.pending }

// Epoch ends a measurement epoch: coalescing is enabled for the next epoch
// only if this one saw at least the trickle rate.
func (v *VIC) Epoch() {
	v.enabled = v.epochCount >= v.trickleCount
	v.epochCount = 0
}

// Enabled reports whether the trickle switch currently allows coalescing.
func (v *VIC) Enabled() bool { return v.enabled }

// Ratio returns the table entry vIC uses at cif (R = 1/1 at or below the
// threshold).
func (v *VIC) Ratio(cif int) Entry {
	if cif <= v.threshold {
		return Entry{MinCIF: 0, CountUp: 1, SkipUp: 1}
	}
	if cif > MaxTableCIF {
		cif = MaxTableCIF
	}
	r := v.lookup[cif]
	return Entry{MinCIF: cif, CountUp: r.countUp, SkipUp: r.skipUp}
}

// Table returns the sorted table in use.
func (v *VIC) Table() []Entry { return append([]Entry(nil), v.table...) }

// Threshold is the CIF at or below which coalescing is off.
func (v *VIC) Threshold() int { return v.threshold }

// TrickleCount is the number of completions per epoch below which vIC turns
// itself off.
func (v *VIC) TrickleCount() uint32 { return v.trickleCount }

// FormatTable renders a table for people.
func FormatTable(t []Entry, threshold int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "cif ≤ %d: off (R 1/1)\n", threshold)
	for i, e := range t {
		hi := "∞"
		if i+1 < len(t) {
			hi = fmt.Sprint(t[i+1].MinCIF - 1)
		}
		fmt.Fprintf(&b, "cif %d–%s: R %d/%d (%.0f %%), holds ≤ %d\n", e.MinCIF, hi, e.CountUp, e.SkipUp, 100*float64(e.CountUp)/float64(e.SkipUp), e.Held())
	}
	return b.String()
}

// IPICoalescer decides whether to send an inter-processor interrupt to a
// CPU to notify it of completions: it skips the IPI when the target was
// interrupted less than Threshold ns ago (the target will find the work
// when it next checks, bounded by the threshold). Time is passed in.
type IPICoalescer struct {
	Threshold int64
	last      map[int]int64
	Sent      uint64
	Skipped   uint64
}

// NewIPICoalescer returns a coalescer with the given threshold in ns
// (default 100 µs when 0).
func NewIPICoalescer(threshold int64) *IPICoalescer {
	if threshold == 0 {
		threshold = 100_000
	}
	return &IPICoalescer{Threshold: threshold, last: map[int]int64{}}
}

// Interrupted records that cpu was interrupted at now (by anything).
func (c *IPICoalescer) Interrupted(cpu int, now int64) { c.last[cpu] = now }

// Send reports whether to send an IPI to cpu at now, and records it if so.
func (c *IPICoalescer) Send(cpu int, now int64) bool {
	if t, ok := c.last[cpu]; ok && now-t < c.Threshold {
		c.Skipped++
		return false
	}
	c.last[cpu] = now
	c.Sent++
	return true
}

// LastInterrupt returns when cpu was last interrupted.
func (c *IPICoalescer) LastInterrupt(cpu int) (int64, bool) {
	t, ok := c.last[cpu]
	return t, ok
}
