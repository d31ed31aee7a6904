package bench

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"sort"
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

// bootstrapIters is the number of resamples; 2000 keeps the 2.5 % and
// 97.5 % quantiles stable to well under the run-to-run noise.
const bootstrapIters = 2000

// BootstrapMedian is the median of xs with a percentile-bootstrap interval
// at the given confidence (0.95). seed makes it reproducible.
func BootstrapMedian(xs []float64, confidence float64, seed uint64) Interval {
	iv := Interval{Point: Median(xs)}
	if len(xs) < 2 {
		iv.Low, iv.High = iv.Point, iv.Point
		return iv
	}
	rng := rand.New(rand.NewPCG(seed, 0x1bd11bda))
	meds := make([]float64, bootstrapIters)
	buf := make([]float64, len(xs))
	for i := range meds {
		for j := range buf {
			buf[j] = xs[rng.IntN(len(xs))]
		}
		meds[i] = Median(buf)
	}
	iv.Low, iv.High = quantiles(meds, confidence)
	return iv
}

// BootstrapRatio is median(b)/median(a) with a percentile-bootstrap interval,
// resampling both groups independently: "configuration b is 1.12x (1.05–1.19)
// of baseline a".
func BootstrapRatio(a, b []float64, confidence float64, seed uint64) Interval {
	iv := Interval{Point: Median(b) / Median(a)}
	if len(a) < 2 || len(b) < 2 {
		iv.Low, iv.High = iv.Point, iv.Point
		return iv
	}
	rng := rand.New(rand.NewPCG(seed, 0x2545f491))
	ratios := make([]float64, bootstrapIters)
	ba, bb := make([]float64, len(a)), make([]float64, len(b))
	for i := range ratios {
		for j := range ba {
			ba[j] = a[rng.IntN(len(a))]
		}
		for j := range bb {
			bb[j] = b[rng.IntN(len(b))]
		}
		ratios[i] = Median(bb) / Median(ba)
	}
	iv.Low, iv.High = quantiles(ratios, confidence)
	return iv
}

// BootstrapPairedRatio is the median of per-pair ratios b[i]/a[i] with a
// percentile-bootstrap interval over the pairs. Each pair is one round of
// an interleaved bench: configuration b measured next to baseline a, so a
// slow minute of the machine (seen on this VM: every configuration of one
// round 35 % below the next) divides out instead of widening both groups.
func BootstrapPairedRatio(a, b []float64, confidence float64, seed uint64) Interval {
	n := min(len(a), len(b))
	rs := make([]float64, 0, n)
	for i := 0; i < n; i++ {
		if a[i] > 0 {
			rs = append(rs, b[i]/a[i])
		}
	}
	return BootstrapMedian(rs, confidence, seed)
}

func quantiles(xs []float64, confidence float64) (float64, float64) {
	sort.Float64s(xs)
	alpha := (1 - confidence) / 2
	lo := int(math.Floor(alpha * float64(len(xs)-1)))
	hi := int(math.Ceil((1 - alpha) * float64(len(xs)-1)))
	return xs[lo], xs[hi]
}

// Significant reports whether a ratio interval excludes 1: the difference
// is outside the noise.
func (i Interval) Significant() bool { return i.Low > 1 || i.High < 1 }

// SuccessiveHalving runs a budgeted tournament: every candidate is measured
// in round 0, the better half (by median score, higher is better) goes on to
// the next round with twice the measurements, and so on until one remains or
// the budget (total measurements) runs out. measure(c, n) returns n new
// observations of candidate c. It returns the survivors in rank order and
// every observation taken.
func SuccessiveHalving(candidates []int, budget int, measure func(c, n int) []float64) (ranked []int, obs map[int][]float64) {
	obs = map[int][]float64{}
	alive := append([]int(nil), candidates...)
	per := 1
	used := 0
	for len(alive) > 1 && used+len(alive)*per <= budget {
		for _, c := range alive {
			obs[c] = append(obs[c], measure(c, per)...)
			used += per
		}
		sort.SliceStable(alive, func(i, j int) bool { return Median(obs[alive[i]]) > Median(obs[alive[j]]) })
		if len(alive) <= 2 && per >= 4 {
			break
		}
		keep := (len(alive) + 1) / 2
		if keep < 2 && len(alive) > 1 {
			keep = 2 // the final pair is compared with more data before one is dropped
			if per >= 4 {
				keep = 1
			}
		}
		alive = alive[:keep]
		per *= 2
	}
	sort.SliceStable(alive, func(i, j int) bool { return Median(obs[alive[i]]) > Median(obs[alive[j]]) })
	return alive, obs
}
