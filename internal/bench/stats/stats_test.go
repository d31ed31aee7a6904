package stats

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		xs   []float64
		want float64
	}{
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{7}, 7},
	} {
		if got := Median(c.xs); got != c.want {
			t.Errorf("Median(%v) = %v, want %v", c.xs, got, c.want)
		}
	}
	if !math.IsNaN(Median(nil)) {
		t.Error("Median(nil) is not NaN")
	}
}

// The rounds a verdict needs follow from the confidence: with n rounds
// the widest interval [x(1), x(n)] misses the median with probability
// 2·(1/2)^n, so 95 % needs 6 (2/64 = 3.1 %; 5 rounds: 6.3 %), 90 % needs 5
// and 99 % needs 8 (2/256 = 0.8 %; 7 rounds: 1.6 %). benchmath's own
// order-statistic interval agrees: finite from that count, not before.
func TestMinRounds(t *testing.T) {
	for conf, want := range map[float64]int{0.95: 6, 0.90: 5, 0.99: 8, 0.5: 2} {
		if got := MinRounds(conf); got != want {
			t.Errorf("MinRounds(%v) = %d, want %d", conf, got, want)
		}
	}
	if MinRuns != 6 {
		t.Errorf("MinRuns = %d at %v, want 6", MinRuns, Confidence)
	}
	xs := []float64{3, 1, 4, 1.5, 9, 2.6, 5, 3.5}
	for _, conf := range []float64{0.9, 0.95, 0.99} {
		n := MinRounds(conf)
		if iv := SampleMedian(xs[:n], conf); !iv.Finite() {
			t.Errorf("benchmath at %v: %d values give %+v", conf, n, iv)
		}
		if iv := SampleMedian(xs[:n-1], conf); iv.Finite() {
			t.Errorf("benchmath at %v: %d values give a finite %+v", conf, n-1, iv)
		}
	}
}

// Intervals against order statistics computed by hand (B = Binomial(n, ½),
// the interval [x(k), x(n+1−k)] with the largest k whose tail
// P(B ≤ k−1) ≤ 2.5 %).
func TestMedianIntervalOrderStatistics(t *testing.T) {
	seq := func(n int) []float64 { // n values 10, 20, …, shuffled
		var xs []float64
		for i := 1; i <= n; i++ {
			xs = append(xs, float64(10*i))
		}
		rand.New(rand.NewPCG(uint64(n), 1)).Shuffle(n, func(i, j int) { xs[i], xs[j] = xs[j], xs[i] })
		return xs
	}
	for _, c := range []struct {
		n, k int
		why  string
	}{
		{6, 1, "P(B≤0) = 1/64 = 1.6 %; P(B≤1) = 7/64 = 10.9 %"},
		{7, 1, "P(B≤0) = 1/128; P(B≤1) = 8/128 = 6.3 %"},
		{8, 1, "P(B≤1) = 9/256 = 3.5 % > 2.5 %"},
		{9, 2, "P(B≤1) = 10/512 = 2.0 %; P(B≤2) = 46/512 = 9.0 %"},
		{10, 2, "P(B≤1) = 11/1024 = 1.1 %; P(B≤2) = 56/1024 = 5.5 %"},
		{17, 5, "P(B≤4) = 3214/131072 = 2.45 %; P(B≤5) = 9402/131072 = 7.2 %"},
	} {
		iv := MedianInterval(seq(c.n), 0.95)
		lo, hi := float64(10*c.k), float64(10*(c.n+1-c.k))
		if iv.Low != lo || iv.High != hi {
			t.Errorf("n=%d: %+v, want [x(%d), x(%d)] = [%v, %v] (%s)", c.n, iv, c.k, c.n+1-c.k, lo, hi, c.why)
		}
		// Where benchmath's interval is equal-tailed it is the same one.
		if c.n != 8 {
			if b := SampleMedian(seq(c.n), 0.95); b.Low != lo || b.High != hi {
				t.Errorf("n=%d: benchmath %+v, want [%v, %v]", c.n, b, lo, hi)
			}
		}
	}
	// 5 values: the median lies outside [x(1), x(5)] with probability
	// 2/32 = 6.25 %, so no 95 % interval exists.
	if iv := MedianInterval(seq(5), 0.95); iv.Finite() || iv.Point != 30 {
		t.Errorf("n=5: %+v, want median 30 and no finite interval", iv)
	}
	if iv := MedianInterval([]float64{5, 5, 5, 5, 5, 5}, 0.95); iv != (Interval{5, 5, 5}) {
		t.Errorf("constant sample: %+v", iv)
	}
}

// The sign test's exact p-values: "all three rounds agreed" is p = 0.25.
func TestSignTest(t *testing.T) {
	for _, c := range []struct {
		rs []float64
		p  float64
		n  int
	}{
		{[]float64{0.95, 0.96, 0.97}, 0.25, 3},
		{[]float64{1.1, 1.2, 1.05, 1.01, 1.3, 1.02}, 2.0 / 64, 6},
		{[]float64{1.1, 1.2, 1.05, 1.01, 1.3, 1.02, 1.1, 1.2, 1.05, 0.99}, 2 * 11.0 / 1024, 10},
		{[]float64{1.1, 1.2, 1.05, 1.01, 1.3, 1.02, 1.1, 1.2, 0.98, 0.99}, 2 * 56.0 / 1024, 10},
		{[]float64{1, 1, 1.1, 0.9}, 1, 4}, // ratios of exactly 1 count against a difference
		{[]float64{1, 1, 1, 1.1, 1.1, 1.1, 1.1, 1.1, 1.1, 1.1}, 2 * 176.0 / 1024, 10},
	} {
		p, n := SignTest(c.rs)
		if math.Abs(p-c.p) > 1e-12 || n != c.n {
			t.Errorf("SignTest(%v) = %v, %d; want %v, %d", c.rs, p, n, c.p, c.n)
		}
	}
}

// A verdict and its interval never disagree: the paired interval excludes
// 1 exactly when the sign test rejects at 5 %, for every split of 6–16
// rounds.
func TestPairedIntervalMatchesSignTest(t *testing.T) {
	for n := MinRuns; n <= 16; n++ {
		for below := 0; below <= n; below++ {
			a := make([]float64, n)
			b := make([]float64, n)
			for i := range a {
				a[i] = 100
				b[i] = 100 * (1.01 + 0.001*float64(i))
				if i < below {
					b[i] = 100 * (0.99 - 0.001*float64(i))
				}
			}
			c := PairedRatio(a, b, Confidence)
			if excl := !c.Ratio.Contains(1); excl != c.Significant(Confidence) {
				t.Errorf("n=%d, %d below: interval %+v, p = %v", n, below, c.Ratio, c.P)
			}
		}
	}
}

// With ties — ratios of exactly 1, common where a latency comes in fixed
// steps — the verdict and the interval still see the same data: over
// random ratios drawn from a few steps, the sign test rejects at 5 %
// exactly when the interval excludes 1.
func TestPairedVerdictNeverContradictsIntervalWithTies(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	steps := []float64{0.9, 0.95, 1, 1, 1, 1.05, 1.1}
	rejected := 0
	for trial := range 5000 {
		n := MinRuns + trial%11
		a, b := make([]float64, n), make([]float64, n)
		bias := rng.IntN(3) // some draws lean above 1, so that rejections occur
		for i := range a {
			a[i] = 100
			b[i] = 100 * steps[min(len(steps)-1, rng.IntN(len(steps))+bias)]
		}
		c := PairedRatio(a, b, Confidence)
		if excl := !c.Ratio.Contains(1); excl != c.Significant(Confidence) {
			t.Fatalf("ratios %v: interval %+v, p = %v", b, c.Ratio, c.P)
		}
		if c.Significant(Confidence) {
			rejected++
		}
	}
	if rejected == 0 {
		t.Fatal("no draw was rejected: the property was never tested on a verdict")
	}
}

// Unpaired: a clear shift of 6 runs against 6 is p = 2/C(12,6) = 2/924
// (U = 0) with an interval above 1; two equal groups are not told apart.
func TestUnpairedRatio(t *testing.T) {
	base := []float64{100, 101, 99, 100, 102, 98}
	faster := []float64{120, 121, 119, 120, 122, 118}
	c := UnpairedRatio(base, faster, Confidence)
	if c.Ratio.Point != 1.2 || !c.Significant(Confidence) || math.Abs(c.P-2.0/924) > 1e-9 || c.Ratio.Low <= 1 || c.Ratio.High > 1.25 {
		t.Errorf("1.2x: %+v", c)
	}
	// Hand-computed interval: U's lower tail for 6+6 (of C(12,6) = 924
	// equally likely rankings, how many give U ≤ u) is P(U ≤ 5) = 19/924
	// = 2.1 % and P(U ≤ 6) = 30/924 = 3.2 % > 2.5 %, so c = 6: the 6th
	// smallest and 6th largest of the 36 pairwise ratios.
	var ds []float64
	for _, x := range base {
		for _, y := range faster {
			ds = append(ds, y/x)
		}
	}
	slices.Sort(ds)
	if c.Ratio.Low != ds[5] || c.Ratio.High != ds[30] {
		t.Errorf("interval %+v, want [%v, %v]", c.Ratio, ds[5], ds[30])
	}
	same := []float64{101, 99, 100, 102, 98, 100}
	if c := UnpairedRatio(base, same, Confidence); c.Significant(Confidence) || !c.Ratio.Contains(1) {
		t.Errorf("equal groups judged different: %+v", c)
	}
}

func TestSuccessiveHalvingFindsBest(t *testing.T) {
	// Candidate c scores c*10 plus deterministic noise of ±3: the best is 7.
	calls := map[int]int{}
	measure := func(c, n int) []float64 {
		out := make([]float64, n)
		for i := range out {
			calls[c]++
			out[i] = float64(c*10) + float64((calls[c]*7)%7-3)
		}
		return out
	}
	ranked, obs := SuccessiveHalving([]int{0, 1, 2, 3, 4, 5, 6, 7}, 80, 1, measure)
	if ranked[0] != 7 {
		t.Fatalf("ranked %v, want 7 first", ranked)
	}
	total := 0
	for _, o := range obs {
		total += len(o)
	}
	if total > 80 {
		t.Errorf("used %d measurements, budget 80", total)
	}
	// Losers of round 0 were measured MinRankRuns times (never ranked on
	// one run); the winner more often.
	if len(obs[0]) != MinRankRuns || len(obs[7]) < 2*MinRankRuns {
		t.Errorf("measurements: loser %d, winner %d", len(obs[0]), len(obs[7]))
	}
}
