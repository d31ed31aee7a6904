package agent

import (
	"fmt"
	"maps"
	"slices"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/diagnose"
	"github.com/irqpilot/irqpilot/internal/load"
)

// Observation is what one interval showed, for verification.
type Observation struct {
	// Findings are the ids of the evidence of harm (policy.Harm).
	Findings map[string]bool
	// Busiest is the highest hardirq+softirq percentage of any CPU.
	Busiest float64
	// IRQ is each CPU's hardirq+softirq percentage, and FindingCPUs the
	// CPUs each finding names: an adaptation is judged on the CPUs its
	// trigger named (work moved off a hot CPU onto one with headroom is
	// the point, though the busiest CPU's interrupt time may not fall).
	IRQ         map[int]float64
	FindingCPUs map[string][]int
	// Drops are softnet drops per second, all CPUs.
	Drops float64
	// Metric is the user metric (nil: none or unreadable).
	Metric *float64
	// load is the interval's load, for the verification against the
	// prediction (nil: not kept).
	load *load.Load
}

func observation(l *load.Load, fs []diagnose.Finding) Observation {
	o := Observation{Findings: map[string]bool{}, IRQ: map[int]float64{}, FindingCPUs: map[string][]int{}}
	for _, f := range fs {
		o.Findings[f.ID] = true
		o.FindingCPUs[f.ID] = append(o.FindingCPUs[f.ID], f.CPUs...)
	}
	if l != nil {
		for _, c := range l.CPUs {
			o.Busiest = max(o.Busiest, c.IRQTime())
			o.IRQ[c.ID] = c.IRQTime()
		}
		for _, s := range l.Softnet {
			o.Drops += s.Dropped
		}
	}
	return o
}

// Verdict decides whether to keep an adaptation: the triggering finding
// gone, no new harmful finding, the interrupt time of the CPUs the trigger
// named lower (of the busiest CPU when it named none or no per-CPU times
// were kept), drops not higher and the user metric not worse, comparing
// the window after the change with the baseline before it.
func Verdict(trigger string, baseline, window []Observation, higherIsBetter bool) (keep bool, reason string) {
	keep, reason, _ = verdictRule(trigger, baseline, window, higherIsBetter, false)
	return keep, reason
}

// The rules of Verdict, as verdictRule names the one that did not keep an
// adaptation.
const (
	ruleNothing    = "nothing-measured"
	ruleStillHolds = "still-holds"
	ruleNew        = "new-finding"
	ruleDidNotFall = "did-not-fall"
	ruleDrops      = "drops"
	ruleMetric     = "user-metric"
)

// verdictRule is Verdict, naming the rule that did not keep (rule "" when
// kept). confirmed skips the rule a confirmed prediction answers (the
// trigger still holding: the model predicted the relief that was
// measured, though the finding's thresholds may still be crossed) and
// applies the others: the hot CPUs' interrupt time must still fall, and
// drops, new findings and the user metric judge what the model does not
// predict.
func verdictRule(trigger string, baseline, window []Observation, higherIsBetter, confirmed bool) (keep bool, reason, rule string) {
	if len(window) == 0 || len(baseline) == 0 {
		return false, "nothing measured", ruleNothing
	}
	// Judge the settled second half of the window.
	w := window[len(window)/2:]
	var hot []int
	for _, o := range baseline {
		for _, c := range o.FindingCPUs[trigger] {
			if !slices.Contains(hot, c) {
				hot = append(hot, c)
			}
		}
	}
	slices.Sort(hot)
	what := "busiest CPU's interrupt time"
	measure := func(o Observation) float64 { return o.Busiest }
	if len(hot) > 0 && len(baseline[0].IRQ) > 0 {
		what = fmt.Sprintf("interrupt time of CPU %s (the finding's)", cpuset.Of(hot...))
		measure = func(o Observation) float64 {
			m := 0.0
			for _, c := range hot {
				m = max(m, o.IRQ[c])
			}
			return m
		}
	}
	before, after := mean(baseline, measure), mean(w, measure)
	dropsBefore, dropsAfter := mean(baseline, func(o Observation) float64 { return o.Drops }), mean(w, func(o Observation) float64 { return o.Drops })
	held := 0
	for _, o := range w {
		if o.Findings[trigger] {
			held++
		}
	}
	if held*2 > len(w) && !confirmed {
		return false, fmt.Sprintf("%s still holds in %d of %d intervals", trigger, held, len(w)), ruleStillHolds
	}
	ids := map[string]bool{}
	for _, o := range w {
		maps.Copy(ids, o.Findings)
	}
	for _, id := range slices.Sorted(maps.Keys(ids)) {
		if id == trigger {
			continue
		}
		was := slices.ContainsFunc(baseline, func(o Observation) bool { return o.Findings[id] })
		n := 0
		for _, o := range w {
			if o.Findings[id] {
				n++
			}
		}
		if !was && n*2 > len(w) {
			return false, "new finding " + id, ruleNew
		}
	}
	if after >= before {
		return false, fmt.Sprintf("%s did not fall (%.1f%% → %.1f%%)", what, before, after), ruleDidNotFall
	}
	if dropsAfter > dropsBefore*1.05+1 {
		return false, fmt.Sprintf("softnet drops rose (%.0f/s → %.0f/s)", dropsBefore, dropsAfter), ruleDrops
	}
	mb, okb := meanMetric(baseline)
	ma, oka := meanMetric(w)
	if okb && oka {
		worse := ma > mb*1.05
		if higherIsBetter {
			worse = ma < mb*0.95
		}
		if worse {
			return false, fmt.Sprintf("user metric worse (%.4g → %.4g)", mb, ma), ruleMetric
		}
	}
	return true, fmt.Sprintf("%s gone; %s %.1f%% → %.1f%%; drops %.0f/s → %.0f/s", trigger, what, before, after, dropsBefore, dropsAfter), ""
}

func mean(os []Observation, f func(Observation) float64) float64 {
	var t float64
	for _, o := range os {
		t += f(o)
	}
	return t / float64(len(os))
}

func meanMetric(os []Observation) (float64, bool) {
	var t float64
	n := 0
	for _, o := range os {
		if o.Metric != nil {
			t += *o.Metric
			n++
		}
	}
	if n == 0 {
		return 0, false
	}
	return t / float64(n), true
}
