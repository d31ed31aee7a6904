package coalesce

import "testing"

func st(b, p, e int) DIMStats { return DIMStats{BPMS: b, PPMS: p, EPMS: e} }

func TestDIMSignificanceAndCompare(t *testing.T) {
	if isSignificantDiff(110, 100) || !isSignificantDiff(111, 100) || !isSignificantDiff(89, 100) || isSignificantDiff(5, 0) {
		t.Fatal("IS_SIGNIFICANT_DIFF: more than 10 % only, ref 0 never")
	}
	cases := []struct {
		curr, prev DIMStats
		want       int
	}{
		{st(1, 0, 0), st(0, 0, 0), DIMStatsBetter},
		{st(0, 0, 0), st(0, 0, 0), DIMStatsSame},
		{st(120, 0, 0), st(100, 50, 50), DIMStatsBetter},
		{st(80, 0, 0), st(100, 50, 50), DIMStatsWorse},
		{st(105, 60, 50), st(100, 50, 50), DIMStatsBetter}, // bytes same, packets +20 %
		{st(105, 40, 50), st(100, 50, 50), DIMStatsWorse},
		{st(100, 50, 40), st(100, 50, 50), DIMStatsBetter}, // fewer events per ms is better
		{st(100, 50, 60), st(100, 50, 50), DIMStatsWorse},
		{st(100, 50, 55), st(100, 50, 50), DIMStatsSame},
		{st(100, 50, 55), st(100, 50, 0), DIMStatsSame},
	}
	for i, c := range cases {
		if got := compare(c.curr, c.prev); got != c.want {
			t.Errorf("case %d: compare(%+v, %+v) = %d, want %d", i, c.curr, c.prev, got, c.want)
		}
	}
}

// From the initial park: traffic appears (better) → leave parking going
// left from profile 1; better again at the left edge → park on top; same
// stats keep it parked without replacing the reference; worse → leave
// parking going right.
func TestDIMParkOnTopSequence(t *testing.T) {
	d := NewDIM()
	if !d.Decide(st(1000, 100, 50)) || d.TuneState != DIMGoingLeft || d.ProfileIx != 0 || d.StepsLeft != 1 || d.Tired != 1 {
		t.Fatalf("after first traffic: %+v", d)
	}
	if d.Decide(st(1200, 120, 50)) || d.TuneState != DIMParkingOnTop || d.ProfileIx != 0 || d.Tired != 0 {
		t.Fatalf("better at the edge should park on top: %+v", d)
	}
	ref := d.PrevStats
	if d.Decide(st(1250, 121, 52)) || d.TuneState != DIMParkingOnTop || d.PrevStats != ref {
		t.Fatalf("same stats while parked must not move or replace the reference: %+v", d)
	}
	if !d.Decide(st(900, 100, 50)) || d.TuneState != DIMGoingRight || d.ProfileIx != 1 || d.StepsRight != 1 {
		t.Fatalf("worse while parked should step right: %+v", d)
	}
	if d.PrevStats != st(900, 100, 50) {
		t.Fatalf("reference not updated after leaving park: %+v", d.PrevStats)
	}
}

func TestDIMTurnAndOnTop(t *testing.T) {
	// Going right, worse → turn left and step.
	d := &DIM{TuneState: DIMGoingRight, ProfileIx: 2, StepsRight: 1, PrevStats: st(1000, 100, 50)}
	if !d.Decide(st(800, 100, 50)) || d.TuneState != DIMGoingLeft || d.ProfileIx != 1 || d.StepsLeft != 1 {
		t.Fatalf("turn: %+v", d)
	}
	// Came from the left twice (steps_left > 1), one step right, better
	// → that is the top: park.
	d = &DIM{TuneState: DIMGoingRight, ProfileIx: 2, StepsLeft: 2, PrevStats: st(1000, 100, 50)}
	if !d.Decide(st(1200, 100, 50)) || d.ProfileIx != 3 || d.StepsRight != 1 {
		t.Fatalf("step right: %+v", d)
	}
	if d.Decide(st(1400, 100, 50)) || d.TuneState != DIMParkingOnTop || d.ProfileIx != 3 {
		t.Fatalf("on top not detected: %+v", d)
	}
	// Right edge → park on top.
	d = &DIM{TuneState: DIMGoingRight, ProfileIx: DIMNumProfiles - 1, PrevStats: st(1000, 100, 50)}
	if d.Decide(st(1300, 100, 50)) || d.TuneState != DIMParkingOnTop {
		t.Fatalf("edge: %+v", d)
	}
}

func TestDIMTired(t *testing.T) {
	d := &DIM{TuneState: DIMGoingRight, ProfileIx: 2, Tired: 2 * DIMNumProfiles, PrevStats: st(1000, 100, 50)}
	if d.Decide(st(1300, 100, 50)) || d.TuneState != DIMParkingTired || d.ProfileIx != 2 {
		t.Fatalf("too tired: %+v", d)
	}
	for i := 0; i < 2*DIMNumProfiles-1; i++ {
		if d.Decide(st(1300, 100, 50)) || d.TuneState != DIMParkingTired {
			t.Fatalf("tired round %d: %+v", i, d)
		}
	}
	if !d.Decide(st(1300, 100, 50)) || d.TuneState != DIMGoingLeft || d.ProfileIx != 1 || d.Tired != 1 {
		t.Fatalf("leaving tired park: %+v", d)
	}
}

func TestDIMSampleWindow(t *testing.T) {
	d := NewDIM()
	s := DIMSample{}
	if d.Sample(s) || d.State != DIMMeasureInProgress {
		t.Fatal("first sample should start measuring")
	}
	for i := 1; i < DIMNEvents; i++ {
		s = DIMSample{TimeNs: int64(i) * 15_625, Pkts: uint32(i * 100), Bytes: uint32(i * 409600), Events: uint16(i)}
		if d.Sample(s) {
			t.Fatalf("decision after %d < 64 events", i)
		}
	}
	// 64 events over 1 ms: 6400 packets → 6400 per ms, 64 events per ms.
	s = DIMSample{TimeNs: 1_000_000, Pkts: 6400, Bytes: 6400 * 4096, Events: DIMNEvents}
	st, ok := calcStats(d.Start, s)
	if !ok || st.PPMS != 6400 || st.EPMS != 64 || st.BPMS != 6400*4096 {
		t.Fatalf("stats %+v", st)
	}
	if !d.Sample(s) || d.State != DIMApplyNewProfile || d.ProfileIx != 0 {
		t.Fatalf("window end: %+v", d)
	}
	if d.Sample(DIMSample{TimeNs: 2_000_000, Events: 200}) {
		t.Fatal("decided while a profile is being applied")
	}
	d.Applied()
	if d.State != DIMStartMeasure {
		t.Fatal("Applied")
	}
	// Counter wrap (u16 events) still measures the gap.
	d.Sample(DIMSample{TimeNs: 0, Events: 65530})
	if d.Sample(DIMSample{TimeNs: 1000, Events: 24}) {
		t.Fatal("wrapped gap of 30 < 64 decided")
	}
}
