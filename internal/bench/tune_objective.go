package bench

import (
	"context"
	"fmt"
	"math"
	"strings"

	"github.com/irqpilot/irqpilot/internal/bench/stats"
)

// Confirmation is tune's last stage: the search's best measured again,
// interleaved with the baseline and the baseline's A/A twin, and judged
// on the objective by bench's own statistics.
//
// Why a stage of its own: the search picks the best of many candidates by
// their medians, and the best of many noisy medians is high by luck as
// well as by merit (the winner's curse); judged on the observations that
// picked it, a candidate no better than the baseline would be "better" far
// more often than the test's 5 %. Fresh rounds judge it without that bias,
// paired by round (a slow minute of the machine divides out), and the twin
// measures in the same rounds how far two identical configurations land
// apart: the noise floor the winner has to clear.
type Confirmation struct {
	Configs []string `json:"configs"`
	Rounds  int      `json:"rounds"`
	// Summary is Summarize's reading of the runs projected on the
	// objective: baseline, twin, best.
	Summary []Summary `json:"summary"`
	// NoiseFloor is the A/A width: the twin's ratio interval's widest
	// distance from 1 (0.05: ±5 %); nil when the twin has no finite
	// interval (fewer than stats.MinRuns rounds).
	NoiseFloor *float64 `json:"noise_floor,omitempty"`
	Runs       []Run    `json:"runs"`
}

// AAWidth is the noise floor an A/A twin's summary gives, as the report's
// noise-floor line states it: NoiseBand(its ratio interval) − 1 (0.05:
// ratios from 1/1.05 to 1.05 are not resolved); NaN without a finite
// interval (an indicative twin).
func AAWidth(twin Summary) float64 {
	if twin.Ratio == nil || twin.Verdict == stats.VerdictIndicative || !twin.Ratio.Finite() {
		return math.NaN()
	}
	return NoiseBand(*twin.Ratio) - 1
}

// NoiseBand is the factor F ≥ 1 an A/A twin's ratio interval spans around
// 1: max(1/low, high). Ratios from 1/F to F are inside the noise. The band
// is multiplicative because ratios are: a configuration that halves a
// latency (0.5x) is as far from 1 as one that doubles it (2x), and on a
// linear scale an improvement of a lower-is-better figure could never lie
// beyond a twin that spread more than 100 % upward — however consistently
// it won. For narrow bands the two readings agree (a twin at 0.951–0.993:
// ±5.2 % here, 4.9 % below 1 on the linear scale).
func NoiseBand(twin stats.Interval) float64 {
	f := math.Max(twin.High, 1)
	if twin.Low > 0 {
		f = math.Max(f, 1/twin.Low)
	} else {
		f = math.Inf(1)
	}
	return f
}

// OutsideNoise says whether ratio lies beyond the band of width (AAWidth):
// above 1 + width or below 1/(1 + width).
func OutsideNoise(ratio, width float64) bool {
	f := 1 + width
	return ratio > f || ratio < 1/f
}

// Judgement is whether the best beat the baseline beyond the noise on the
// objective, and why, in words that state the objective, the numbers and
// the interval.
type Judgement struct {
	Kept bool
	Why  string
	// Ratio, P and Test are the best's paired comparison with the
	// baseline (Ratio nil without data).
	Ratio *stats.Interval
	P     float64
	Test  string
}

// JudgeConfirmation judges best against baseline from a confirmation's
// runs (baseline, its "#aa" twin and best, interleaved and paired by
// round), on obj. The rule is the bench's, applied twice: best's verdict
// must be "better" (the sign test of its per-round ratios at 1 −
// stats.Confidence, from at least stats.MinRuns rounds), and its ratio must lie
// outside the twin's A/A band (beyond F or below 1/F, F = NoiseBand of the
// twin's interval) — the report's noise floor, inside which
// "a ratio is not resolved by this run, whatever its verdict". Anything
// short of both keeps the baseline.
func JudgeConfirmation(obj Objective, runs []Run, baseline, best string) (Judgement, []Summary, float64) {
	twin := BaseConfig(baseline) + "#aa"
	sums := Summarize([]string{baseline, twin, best}, obj.Project(runs), baseline, true)
	b, t, w := sums[0], sums[1], sums[2]
	width := AAWidth(t)
	j := Judgement{Ratio: w.Ratio, P: w.P, Test: w.Test}
	unit := w.Unit
	if unit == "" {
		unit = b.Unit
	}
	head := fmt.Sprintf("objective %s: %s measured %s %s against %s's %s %s (medians)", obj.Describe(), best, FormatFigure(w.Throughput.Point), unit, baseline, FormatFigure(b.Throughput.Point), unit)
	twinText := "no A/A twin measured"
	if t.Ratio != nil {
		twinText = fmt.Sprintf("A/A twin %s %.3fx", twin, t.Ratio.Point)
		switch {
		case math.IsInf(width, 1):
			twinText += fmt.Sprintf(" (%.3f–%.3f): no finite noise band", t.Ratio.Low, t.Ratio.High)
		case !math.IsNaN(width):
			twinText += fmt.Sprintf(" (%.3f–%.3f): noise ±%.1f %% (ratios %.3f–%.3f)", t.Ratio.Low, t.Ratio.High, 100*width, 1/(1+width), 1+width)
		}
	}
	switch {
	case w.Verdict == stats.VerdictNoData || w.Ratio == nil:
		j.Why = fmt.Sprintf("objective %s: %s or %s has no measured %s; keeping the baseline", obj.Describe(), best, baseline, obj)
	case w.Verdict == stats.VerdictIndicative || math.IsNaN(width):
		j.Why = fmt.Sprintf("%s; per-round ratio %.3fx over %d paired rounds (indicative: a verdict and an A/A interval need %d rounds or more); %s; keeping the baseline",
			head, w.Ratio.Point, w.Paired, stats.MinRuns, twinText)
	case w.Verdict != stats.VerdictBetter:
		j.Why = fmt.Sprintf("%s; per-round ratio %.3fx (%.0f %% interval %.3f–%.3f, %s p = %.3f over %d rounds): %s; %s; keeping the baseline",
			head, w.Ratio.Point, 100*stats.Confidence, w.Ratio.Low, w.Ratio.High, w.Test, w.P, w.Paired, w.Verdict, twinText)
	case !OutsideNoise(w.Ratio.Point, width):
		j.Why = fmt.Sprintf("%s; per-round ratio %.3fx (%.0f %% interval %.3f–%.3f, %s p = %.3f over %d rounds): better by the test but inside the A/A noise; %s; keeping the baseline",
			head, w.Ratio.Point, 100*stats.Confidence, w.Ratio.Low, w.Ratio.High, w.Test, w.P, w.Paired, twinText)
	default:
		j.Kept = true
		j.Why = fmt.Sprintf("%s; per-round ratio %.3fx (%.0f %% interval %.3f–%.3f, %s p = %.3f over %d rounds), beyond the A/A noise; %s; kept",
			head, w.Ratio.Point, 100*stats.Confidence, w.Ratio.Low, w.Ratio.High, w.Test, w.P, w.Paired, twinText)
	}
	if j.Kept && w.PerCPUSecond != nil && b.PerCPUSecond != nil && obj != ObjectiveCPUPerOp {
		j.Why += fmt.Sprintf(" (work per busy CPU-second %.0f against %.0f)", w.PerCPUSecond.Point, b.PerCPUSecond.Point)
	}
	if len(w.Warnings) > 0 { // what the winner's measurement cannot carry
		j.Why += "; " + best + "'s runs: " + strings.Join(w.Warnings, "; ")
	}
	return j, sums, width
}

// FormatFigure prints an objective's figure: whole numbers for rates, one
// decimal for latencies and costs of a few µs.
func FormatFigure(v float64) string {
	if math.Abs(v) >= 1000 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

// confirm measures baseline, its A/A twin and best in rounds interleaved
// rounds (RoundOrder, as bench does) and judges best (JudgeConfirmation).
func confirm(ctx context.Context, r *Runner, obj Objective, baseline, best string, rounds int, each func(config string, round int) (Run, error)) (*Confirmation, Judgement, error) {
	c := &Confirmation{Configs: WithTwin([]string{baseline, best}, baseline), Rounds: rounds}
	for round := 0; round < rounds; round++ {
		for _, cfg := range RoundOrder(c.Configs, round) {
			if err := ctx.Err(); err != nil {
				return c, Judgement{}, err
			}
			run, err := each(cfg, round)
			if err != nil {
				return c, Judgement{}, err
			}
			c.Runs = append(c.Runs, run)
		}
	}
	j, sums, width := JudgeConfirmation(obj, c.Runs, baseline, best)
	c.Summary = sums
	if !math.IsNaN(width) {
		c.NoiseFloor = &width
	}
	return c, j, nil
}
