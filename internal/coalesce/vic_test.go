package coalesce

import (
	"math/rand/v2"
	"testing"
)

func enabledVIC(t *testing.T) *VIC {
	t.Helper()
	v := MustVIC(VICConfig{TrickleIOPS: 1, EpochNs: 1_000_000_000})
	v.Complete(0, 0) // one completion ≥ trickle count of 1
	v.Epoch()
	if !v.Enabled() {
		t.Fatal("vic not enabled after an epoch above the trickle rate")
	}
	return v
}

// Every table row delivers exactly countUp of every skipUp completions.
func TestVICRatioExactForEveryEntry(t *testing.T) {
	for _, e := range DefaultTable {
		for _, cif := range []int{e.MinCIF, e.MinCIF + 1} {
			v := enabledVIC(t)
			if got := v.Ratio(cif); got.CountUp != e.CountUp || got.SkipUp != e.SkipUp {
				t.Fatalf("cif %d: ratio %s, want %s", cif, got, e)
			}
			const cycles = 1000
			delivered := 0
			for i := 0; i < cycles*int(e.SkipUp); i++ {
				if v.Complete(0, cif) {
					delivered++
				}
				if p := v.Pending(); p > e.Held() {
					t.Fatalf("cif %d: %d pending, table allows %d", cif, p, e.Held())
				}
			}
			if want := cycles * int(e.CountUp); delivered != want {
				t.Errorf("cif %d (R %s): delivered %d of %d, want %d", cif, e, delivered, cycles*int(e.SkipUp), want)
			}
		}
	}
}

// The 80 % example from the slides: deliver 4, skip the 5th.
func TestVICPatternFourOfFive(t *testing.T) {
	v := enabledVIC(t)
	var got []bool
	for i := 0; i < 10; i++ {
		got = append(got, v.Complete(0, 6))
	}
	want := []bool{true, true, true, true, false, true, true, true, true, false}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("cif 6 pattern %v, want %v", got, want)
		}
	}
}

// Liveness under random CIF traces: a completion is held only while more
// than the threshold (≥ 0) commands remain in flight, so a later completion
// exists; whenever CIF falls to the threshold nothing is pending; when the
// device drains, everything has been delivered.
func TestVICLivenessRandomTraces(t *testing.T) {
	for seed := uint64(1); seed <= 50; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		v := MustVIC(VICConfig{TrickleIOPS: 1000, EpochNs: 1_000_000})
		inflight := 0
		steps := 20000
		for i := 0; i < steps || inflight > 0; i++ {
			if i%97 == 0 {
				v.Epoch()
			}
			if i < steps && (inflight == 0 || rng.IntN(2) == 0) {
				inflight += 1 + rng.IntN(40) // burst of submissions
				if inflight > 300 {
					inflight = 300
				}
				continue
			}
			inflight--
			d := v.Complete(0, inflight)
			if !d && inflight <= v.Threshold() {
				t.Fatalf("seed %d step %d: held a completion at cif %d ≤ threshold", seed, i, inflight)
			}
			if inflight <= v.Threshold() && v.Pending() != 0 {
				t.Fatalf("seed %d step %d: %d pending at cif %d", seed, i, v.Pending(), inflight)
			}
			if !d && inflight == 0 {
				t.Fatalf("seed %d: held with nothing in flight", seed)
			}
		}
		if v.Pending() != 0 {
			t.Fatalf("seed %d: %d completions pending after the device drained", seed, v.Pending())
		}
		if v.Stats.Held == 0 {
			t.Fatalf("seed %d: trace never coalesced; the property was not exercised", seed)
		}
	}
}

func TestVICLowCIFSwitch(t *testing.T) {
	v := enabledVIC(t)
	for cif := 0; cif <= 4; cif++ {
		for i := 0; i < 20; i++ {
			if !v.Complete(0, cif) {
				t.Fatalf("held at cif %d ≤ default threshold 4", cif)
			}
		}
	}
	// Hold at high CIF, then a low-CIF completion flushes.
	v.Complete(0, 64)
	if v.Complete(0, 64) || v.Pending() != 1 {
		t.Fatalf("cif 64 (R 1/8): second completion should be held, pending %d", v.Pending())
	}
	if !v.Complete(0, 3) || v.Pending() != 0 {
		t.Fatalf("completion at cif 3 must deliver and flush, pending %d", v.Pending())
	}
	v2 := MustVIC(VICConfig{CIFThreshold: 8, TrickleIOPS: 1, EpochNs: 1e9})
	v2.Complete(0, 0)
	v2.Epoch()
	for i := 0; i < 20; i++ {
		if !v2.Complete(0, 8) {
			t.Fatal("threshold 8: held at cif 8")
		}
	}
}

func TestVICTrickleSwitch(t *testing.T) {
	// 2000 IOPS over a 10 ms epoch = 20 completions.
	v := MustVIC(VICConfig{})
	if v.TrickleCount() != 20 {
		t.Fatalf("trickle count %d, want 20", v.TrickleCount())
	}
	// Before any epoch: off.
	for i := 0; i < 30; i++ {
		if !v.Complete(0, 64) {
			t.Fatal("held before the first epoch measured a rate")
		}
	}
	v.Epoch() // 30 ≥ 20: on
	held := 0
	for i := 0; i < 19; i++ {
		if !v.Complete(0, 64) {
			held++
		}
	}
	if held == 0 {
		t.Fatal("no coalescing after a busy epoch")
	}
	v.Epoch() // 19 < 20: trickle, off
	if v.Enabled() {
		t.Fatal("still enabled after an epoch of 19 completions (< 20)")
	}
	for i := 0; i < 19; i++ {
		if !v.Complete(0, 64) || v.Pending() != 0 {
			t.Fatal("held during trickle I/O")
		}
	}
	v.Epoch()
	if v.Enabled() {
		t.Fatal("19 completions re-enabled vic")
	}
}

func TestVICRejectsBadTables(t *testing.T) {
	bad := [][]Entry{
		{{MinCIF: 5, CountUp: 0, SkipUp: 2}},
		{{MinCIF: 5, CountUp: 3, SkipUp: 2}},
		{{MinCIF: 5, CountUp: 1, SkipUp: 2}, {MinCIF: 5, CountUp: 1, SkipUp: 3}},
	}
	for _, tb := range bad {
		if _, err := NewVIC(VICConfig{Table: tb}); err == nil {
			t.Errorf("table %v accepted", tb)
		}
	}
	if _, err := NewVIC(VICConfig{CIFThreshold: -1}); err == nil {
		t.Error("negative threshold accepted")
	}
}

func TestIPICoalescing(t *testing.T) {
	c := NewIPICoalescer(0)
	if c.Threshold != 100_000 {
		t.Fatalf("default threshold %d, want 100 µs", c.Threshold)
	}
	if !c.Send(1, 1_000_000) {
		t.Fatal("first IPI to cpu 1 skipped")
	}
	if c.Send(1, 1_099_999) {
		t.Fatal("IPI sent 99.999 µs after the last one")
	}
	if !c.Send(2, 1_050_000) {
		t.Fatal("other CPU's IPI skipped")
	}
	if !c.Send(1, 1_100_000) {
		t.Fatal("IPI skipped 100 µs after the last one")
	}
	c.Interrupted(1, 1_150_000) // e.g. a device interrupt
	if c.Send(1, 1_200_000) {
		t.Fatal("IPI sent 50 µs after the target was interrupted")
	}
	if c.Sent != 3 || c.Skipped != 2 {
		t.Fatalf("sent %d skipped %d, want 3 and 2", c.Sent, c.Skipped)
	}
}

func TestFixedAndAdaptive(t *testing.T) {
	f, err := NewFixed("mcc+midl", 4, 100_000)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if f.Complete(int64(i)*10_000, 99) {
			t.Fatalf("delivered completion %d of 4", i+1)
		}
	}
	if at, ok := f.Deadline(); !ok || at != 100_000 {
		t.Fatalf("deadline %d %v, want 100000", at, ok)
	}
	if !f.Complete(30_000, 99) || f.Pending() != 0 {
		t.Fatal("4th completion did not deliver")
	}
	f.Complete(200_000, 0)
	if f.Expire(299_999) || !f.Expire(300_000) {
		t.Fatal("midl timer wrong")
	}
	if _, err := NewFixed("mcc", 4, 0); err == nil {
		t.Fatal("mcc without a delay bound accepted")
	}
	a, _ := NewAdaptive(3, 6_000)
	a.Complete(0, 9)
	a.Complete(5_000, 9)
	if at, _ := a.Deadline(); at != 11_000 {
		t.Fatalf("adaptive deadline %d, want 11000 (quiet period restarts)", at)
	}
	if !a.Complete(7_000, 9) {
		t.Fatal("adaptive: threshold 3 reached without delivery")
	}
	a.Complete(20_000, 9)
	if a.Expire(25_999) || !a.Expire(26_000) {
		t.Fatal("adaptive quiet-period expiry wrong")
	}
}

// BenchmarkVICComplete measures the per-completion path: expect 0 allocs/op.
func BenchmarkVICComplete(b *testing.B) {
	v := MustVIC(VICConfig{TrickleIOPS: 1, EpochNs: 1e9})
	v.Complete(0, 0)
	v.Epoch()
	cifs := [8]int{3, 6, 9, 13, 17, 30, 40, 100}
	b.ReportAllocs()
	n := 0
	for i := 0; b.Loop(); i++ {
		if v.Complete(0, cifs[i&7]) {
			n++
		}
	}
	_ = n
}

func TestVICCompleteDoesNotAllocate(t *testing.T) {
	v := enabledVIC(t)
	allocs := testing.AllocsPerRun(1000, func() { v.Complete(0, 40) })
	if allocs != 0 {
		t.Fatalf("Complete allocates %v times per call", allocs)
	}
}
