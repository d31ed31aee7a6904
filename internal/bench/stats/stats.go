// Package stats is bench's and tune's statistics, pure and without I/O:
// medians with distribution-free intervals (golang.org/x/perf/benchmath's
// for one sample, equal-tailed order statistics for a ratio), the sign test
// of ratios paired by round, the Mann-Whitney U test of unpaired groups
// with its ratio interval, the verdict words, how many rounds a verdict
// needs (MinRounds), and successive halving for tune's search.
package stats

import (
	"encoding/json"
	"math"
	"sort"

	"github.com/aclements/go-moremath/stats"
	"golang.org/x/perf/benchmath"
)

// Median of xs (mean of the middle two for an even count); NaN when empty.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// Interval is a point estimate with a confidence interval.
type Interval struct {
	Point float64 `json:"point"`
	Low   float64 `json:"low"`
	High  float64 `json:"high"`
}

// MarshalJSON writes a missing value (NaN: a configuration with no
// successful run) as null; encoding/json refuses NaN, and one failed
// configuration must not cost the whole report.
func (i Interval) MarshalJSON() ([]byte, error) {
	f := func(v float64) *float64 {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil
		}
		return &v
	}
	return json.Marshal(struct {
		Point *float64 `json:"point"`
		Low   *float64 `json:"low"`
		High  *float64 `json:"high"`
	}{f(i.Point), f(i.Low), f(i.High)})
}

// UnmarshalJSON reads null back as NaN.
func (i *Interval) UnmarshalJSON(b []byte) error {
	var v struct{ Point, Low, High *float64 }
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	g := func(p *float64) float64 {
		if p == nil {
			return math.NaN()
		}
		return *p
	}
	*i = Interval{Point: g(v.Point), Low: g(v.Low), High: g(v.High)}
	return nil
}

// Contains reports whether v lies inside the interval.
func (i Interval) Contains(v float64) bool { return v >= i.Low && v <= i.High }

// Finite reports whether the interval has two finite ends: a sample too
// small for the confidence has none (see MinRounds).
func (i Interval) Finite() bool {
	return !math.IsNaN(i.Low) && !math.IsNaN(i.High) && !math.IsInf(i.Low, 0) && !math.IsInf(i.High, 0)
}

// Confidence is the confidence of every interval bench and tune report,
// and 1 − Confidence the level of every test behind a verdict.
const Confidence = 0.95

// MinRuns is the fewest successful runs (rounds, when paired) per
// configuration from which bench and tune report an interval and a
// verdict at Confidence: MinRounds(Confidence), 6 for 95 %. Below it a
// ratio is "indicative": its direction, no verdict.
var MinRuns = MinRounds(Confidence)

// Verdicts.
const (
	VerdictBaseline   = "baseline"
	VerdictBetter     = "better"
	VerdictWorse      = "worse"
	VerdictNoise      = "within noise"
	VerdictIndicative = "indicative"
	VerdictNoData     = "no data"
)

// Verdict judges a comparison to the baseline at Confidence: within noise
// unless its test rejects "no difference", else better or worse by the
// ratio's direction (below 1 is better when lowerIsBetter: a latency).
func Verdict(c Comparison, lowerIsBetter bool) string {
	switch {
	case !c.Significant(Confidence):
		return VerdictNoise
	case c.Ratio.Point > 1 && !lowerIsBetter, c.Ratio.Point < 1 && lowerIsBetter:
		return VerdictBetter
	}
	return VerdictWorse
}

// MinRounds is the fewest observations from which a distribution-free
// (order-statistic) interval of the median at the given confidence has two
// finite ends, and from which a sign test can reach the matching level at
// all: the smallest n with 2·(1/2)^n ≤ 1 − confidence. With n observations
// the widest interval, from the smallest to the largest, misses the median
// only when all n fall on one side of it, which happens with probability
// 2·(1/2)^n; for 95 % that needs 6 (3 rounds cover the median only 75 % of
// the time: "all three agreed" is a sign test at p = 0.25).
func MinRounds(confidence float64) int {
	for n := 1; ; n++ {
		if medianOrder(n, confidence) >= 1 {
			return n
		}
	}
}

// medianOrder is k, 1-based, such that [x(k), x(n+1−k)] of n sorted
// observations is the narrowest equal-tailed interval that covers the
// median with at least the given confidence: the largest k with
// P(Binomial(n, ½) ≤ k−1) ≤ (1 − confidence)/2. 0 when n is too small.
func medianOrder(n int, confidence float64) int {
	tail := (1 - confidence) / 2
	d := stats.BinomialDist{N: n, P: 0.5}
	k := 0
	// A little slack for the rounding of the CDF's sums (2·(1/2)^6 is
	// exactly 0.03125, but a CDF may land an ulp above a tail it equals).
	for k < n/2 && d.CDF(float64(k)) <= tail+1e-12 {
		k++
	}
	return k
}

// MedianInterval is the median of xs with its distribution-free interval:
// the order statistics [x(k), x(n+1−k)] (medianOrder), which cover the
// population median with at least the given confidence whatever the
// distribution. Below MinRounds(confidence) observations the ends are
// −Inf and +Inf.
//
// Why not benchmath.AssumeNothing.Summary, which bench uses for the
// throughput of one configuration: its interval grows from the mode with
// a left bias, so for some n it is not equal-tailed (n = 8: [x(1), x(7)],
// n = 5: (−∞, x(5)]). For a ratio, whether the interval excludes 1 is the
// verdict, and only the equal-tailed interval is exactly the two-sided
// sign test inverted (SignTest): "outside the interval" and "p < 1 −
// confidence" then always agree. Where benchmath's interval is
// equal-tailed the two are the same order statistics (tested).
func MedianInterval(xs []float64, confidence float64) Interval {
	iv := Interval{Point: Median(xs), Low: math.Inf(-1), High: math.Inf(1)}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if k := medianOrder(len(s), confidence); k >= 1 {
		iv.Low, iv.High = s[k-1], s[len(s)-k]
	}
	return iv
}

// SampleMedian is the median of xs with benchmath's distribution-free
// interval (benchmath.AssumeNothing: order statistics, coverage at least
// the confidence), for one configuration's throughput; no verdict rests
// on it. Below MinRounds(confidence) observations at least one end is
// infinite.
func SampleMedian(xs []float64, confidence float64) Interval {
	if len(xs) == 0 {
		return Interval{Point: math.NaN(), Low: math.NaN(), High: math.NaN()}
	}
	s := benchmath.AssumeNothing.Summary(benchmath.NewSample(append([]float64(nil), xs...), &benchmath.DefaultThresholds), confidence)
	return Interval{Point: s.Center, Low: s.Lo, High: s.Hi}
}

// SignTest is the exact two-sided sign test of ratios against 1: the
// probability, were each ratio as likely above 1 as below, of a split at
// least as lopsided as the one seen. n is the number of ratios.
//
// Ratios of exactly 1 (ties: latencies that come in fixed steps make them
// common) count against the difference: each is put on the side with
// fewer ratios. Dropping them instead, as textbooks often do, tests fewer
// ratios than the interval printed beside the verdict covers: [1, 1, 1,
// 1.1 × 7] would be "better" at p = 0.016 next to an interval [1, 1.1]
// that holds 1. Counted this way, the test rejects exactly when the
// order-statistic interval of all the ratios (MedianInterval) excludes 1.
//
// Why a sign test for ratios paired by round (and why not benchmath, which
// has no paired test; its Compare is the unpaired Mann-Whitney U test):
// pairing by round removes the drift of whole rounds, which an unpaired
// test would count as noise (see Summarize). Of the paired tests, the
// sign test assumes nothing about the ratios' distribution beyond
// independent rounds — Wilcoxon's signed-rank test also assumes the
// ratios are symmetric about their median, which one slow round per ten
// (seen on this harness) breaks — and its inversion is exactly the
// order-statistic interval of the median ratio printed beside it
// (MedianInterval), so a verdict and its interval never disagree.
func SignTest(ratios []float64) (p float64, n int) {
	below, above := 0, 0
	for _, r := range ratios {
		switch {
		case r < 1:
			below++
		case r > 1:
			above++
		}
	}
	n = len(ratios)
	if n == 0 {
		return 1, 0
	}
	ties := n - below - above
	k := min(below, above) + ties
	return min(1, 2*stats.BinomialDist{N: n, P: 0.5}.CDF(float64(k))), n
}

// Comparison is a ratio to a baseline with its interval and the test
// behind its verdict.
type Comparison struct {
	Ratio Interval
	// P is the test's p-value; Test names it.
	P    float64
	Test string
	// Paired is how many rounds the ratio was paired over (0: unpaired).
	Paired int
}

// Test names, as reports print them.
const (
	TestSign = "sign test"
	TestU    = "Mann-Whitney U"
)

// Significant reports whether the comparison's difference is outside the
// noise at the given confidence: the test rejects "no difference" at
// 1 − confidence.
func (c Comparison) Significant(confidence float64) bool { return c.P < 1-confidence }

// PairedRatio compares b with a round by round: the median of the ratios
// b[i]/a[i] with its order-statistic interval (MedianInterval) and the
// sign test of the ratios against 1. Each pair is one round of an
// interleaved bench: configuration b measured next to baseline a, so a
// slow minute of the machine (seen on this VM: every configuration of one
// round 35 % below the next) divides out instead of widening both groups.
func PairedRatio(a, b []float64, confidence float64) Comparison {
	n := min(len(a), len(b))
	rs := make([]float64, 0, n)
	for i := 0; i < n; i++ {
		if a[i] > 0 {
			rs = append(rs, b[i]/a[i])
		}
	}
	p, _ := SignTest(rs)
	return Comparison{Ratio: MedianInterval(rs, confidence), P: p, Test: TestSign, Paired: len(rs)}
}

// UnpairedRatio compares two independent groups: the ratio of their
// medians, the Mann-Whitney U test of benchmath.AssumeNothing for the
// verdict, and as the interval the ratios θ for which the U test would
// not tell b from θ·a: the order statistics [D(c), D(mn+1−c)] of the m·n
// ratios b[j]/a[i] (Bauer's distribution-free interval for a shift, here
// of the logarithms), c the largest with P(U ≤ c−1) ≤ (1 − confidence)/2.
// benchmath has the test but no interval for a ratio; this is the test
// inverted, so without ties the interval excludes 1 exactly when the test
// rejects.
func UnpairedRatio(a, b []float64, confidence float64) Comparison {
	c := Comparison{Ratio: Interval{Point: Median(b) / Median(a), Low: math.Inf(-1), High: math.Inf(1)}, P: 1, Test: TestU}
	if len(a) == 0 || len(b) == 0 {
		return c
	}
	th := benchmath.Thresholds{CompareAlpha: 1 - confidence}
	cmp := benchmath.AssumeNothing.Compare(benchmath.NewSample(append([]float64(nil), a...), &th), benchmath.NewSample(append([]float64(nil), b...), &th))
	c.P = cmp.P
	var ds []float64
	for _, x := range a {
		for _, y := range b {
			if x > 0 {
				ds = append(ds, y/x)
			}
		}
	}
	if len(ds) != len(a)*len(b) {
		return c
	}
	sort.Float64s(ds)
	u := stats.UDist{N1: len(a), N2: len(b)}
	tail := (1 - confidence) / 2
	k := 0
	for k < len(ds)/2 && u.CDF(float64(k)) <= tail+1e-12 {
		k++
	}
	if k >= 1 {
		c.Ratio.Low, c.Ratio.High = ds[k-1], ds[len(ds)-k]
	}
	return c
}

// MinRankRuns is the fewest measurements of a candidate a ranking rests on:
// one run is an anecdote (a slow minute of the machine decides it), and the
// median of three already ignores one outlier.
const MinRankRuns = 3

// SuccessiveHalving runs a budgeted tournament: every candidate is measured
// first times in round 0 (at least MinRankRuns), the better half (by median
// score, higher is better) goes on to the next round with twice the
// measurements, and so on until one remains or the budget (total
// measurements) runs out. measure(c, n) returns n new observations of
// candidate c. It returns the survivors in rank order and every observation
// taken.
func SuccessiveHalving(candidates []int, budget, first int, measure func(c, n int) []float64) (ranked []int, obs map[int][]float64) {
	obs = map[int][]float64{}
	alive := append([]int(nil), candidates...)
	per := max(first, MinRankRuns)
	used := 0
	for len(alive) > 1 && used+len(alive)*per <= budget {
		for _, c := range alive {
			obs[c] = append(obs[c], measure(c, per)...)
			used += per
		}
		sort.SliceStable(alive, func(i, j int) bool { return Median(obs[alive[i]]) > Median(obs[alive[j]]) })
		if len(alive) <= 2 && per >= 2*max(first, MinRankRuns) {
			break
		}
		keep := (len(alive) + 1) / 2
		if keep < 2 && len(alive) > 1 {
			keep = 2 // the final pair is compared with more data before one is dropped
			if per >= 2*max(first, MinRankRuns) {
				keep = 1
			}
		}
		alive = alive[:keep]
		per *= 2
	}
	sort.SliceStable(alive, func(i, j int) bool { return Median(obs[alive[i]]) > Median(obs[alive[j]]) })
	return alive, obs
}
