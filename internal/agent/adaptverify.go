package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/load"
	"github.com/irqpilot/irqpilot/internal/plan"
	"github.com/irqpilot/irqpilot/internal/policy"
	"github.com/irqpilot/irqpilot/internal/verify"
)

// An adaptation is verified against its prediction the way `apply --verify`
// verifies a plan (package verify): the plan's prediction (plan.Prediction,
// made by the cost model from the load the planner was given), the
// measurement before the change (the baseline intervals: the evidence that
// persisted), and the measurement after it, read the same way
// (policy.Observed). The verdict — confirmed, missed, worse, inconclusive —
// is kept beside the agent's own keep/revert reason (Verdict).
//
// What each verdict does:
//   - worse: undone at once. Every settled interval (all but the first
//     after the change, which may still hold moves pending) is judged on
//     its own; when two in a row are worse, and the two together are
//     worse too, the adaptation is reverted there, without waiting for the
//     end of the window: one noisy interval is not enough. A worse verdict
//     at the end of the window (the settled second half judged as one
//     measurement) reverts as well. Either way the plan is remembered with
//     the load it was made on and not retried while the load stays within
//     the tolerance of that load (blockedPlan).
//   - confirmed: kept, even where the interval rules alone would not keep
//     it because the triggering evidence still holds or the hot CPUs'
//     interrupt time did not fall (the model predicted what happened).
//     It is still reverted for harm the model does not predict: softnet
//     drops up, a new finding, the user metric worse.
//   - missed and inconclusive: the interval rules (Verdict) decide.

// worseRun is how many settled intervals in a row must be worse before an
// adaptation is undone ahead of the end of its window.
const worseRun = 2

// maxBlocked bounds the plans remembered as worse.
const maxBlocked = 16

// Verification is an adaptation's verification: verify's result (the same
// fields as `apply --verify --json`'s verification) and how it was judged.
type Verification struct {
	verify.Result
	// Intervals is how many settled intervals after the change were
	// judged together.
	Intervals int `json:"intervals"`
	// Early is set when a worse verdict undid the adaptation before the
	// end of its window.
	Early bool `json:"early,omitempty"`
	// Note says where the prediction came from when it is not the plan's
	// own (the plan carried none, or it was made on another load).
	Note string `json:"note,omitempty"`
}

// blockedPlan is a plan whose adaptation verified worse, with the load it
// was made on: not retried while the load is within tolerance of it.
type blockedPlan struct {
	key    string
	when   time.Time
	reason string
	before verify.Measurement
	// told: the refusal was logged and recorded once already.
	told bool
}

// planKey is a fingerprint of a plan's settings: every entry without its
// reason, and nothing of the plan's explanation or prediction.
func planKey(p *plan.Plan) string {
	cp := *p
	cp.Why, cp.Notes, cp.Host, cp.Prediction, cp.Policy, cp.File = "", nil, "", nil, "", ""
	b, err := json.Marshal(&cp)
	if err != nil {
		return ""
	}
	var v any
	if json.Unmarshal(b, &v) != nil {
		return ""
	}
	dropReasons(v)
	b, _ = json.Marshal(v) // maps marshal with sorted keys
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

func dropReasons(v any) {
	switch x := v.(type) {
	case map[string]any:
		delete(x, "reason")
		for _, e := range x {
			dropReasons(e)
		}
	case []any:
		for _, e := range x {
			dropReasons(e)
		}
	}
}

// loadChanged says how the load now differs from the load a plan was made
// on ("" when it is within tolerance): the packet rate by more than the
// traffic tolerance, or a CPU's busy time by more than the tolerance, or
// another set of CPUs.
func loadChanged(then, now verify.Measurement) string {
	if hi := math.Max(then.Traffic, now.Traffic); hi >= verify.MinTraffic && math.Abs(then.Traffic-now.Traffic) > verify.DefaultTrafficTolerance*hi {
		return fmt.Sprintf("traffic %.0f → %.0f packets/s (more than %.0f %% apart)", then.Traffic, now.Traffic, 100*verify.DefaultTrafficTolerance)
	}
	for _, c := range sortedKeys(now.CPUs) {
		b, ok := then.CPUs[c]
		if !ok {
			return fmt.Sprintf("CPU %d was not measured then", c)
		}
		if d := now.CPUs[c].Busy - b.Busy; math.Abs(d) > verify.DefaultTolerance {
			return fmt.Sprintf("CPU %d %.0f%% → %.0f%% busy (more than %.0f points apart)", c, b.Busy, now.CPUs[c].Busy, verify.DefaultTolerance)
		}
	}
	for c := range then.CPUs {
		if _, ok := now.CPUs[c]; !ok {
			return fmt.Sprintf("CPU %d is no longer measured", c)
		}
	}
	return ""
}

func sortedKeys[V any](m map[int]V) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// measureObs reads the intervals os as one window the way the cost model
// reads a measurement: each CPU's busy and interrupt time and the packet
// rate, averaged over the intervals weighted by their length; the noise is
// the difference between the first and the second half of the intervals
// (one interval: none measured, verify.NoiseFloor stands for it).
func measureObs(h *host.Host, ivs []Observation) (verify.Measurement, bool) {
	var ms []verify.Measurement
	for _, o := range ivs {
		if o.load == nil {
			continue
		}
		ms = append(ms, verify.FromLoads(h, o.load, o.load, o.load))
	}
	if len(ms) == 0 {
		return verify.Measurement{}, false
	}
	if len(ms) == 1 {
		return ms[0], true
	}
	k := len(ms) / 2
	whole, a, b := combine(ms), combine(ms[:k]), combine(ms[k:])
	whole.TrafficHalves = [2]float64{a.Traffic, b.Traffic}
	whole.Noise = map[int]verify.Figures{}
	for c, x := range a.CPUs {
		if y, ok := b.CPUs[c]; ok {
			whole.Noise[c] = verify.Figures{Busy: math.Abs(x.Busy - y.Busy), IRQ: math.Abs(x.IRQ - y.IRQ)}
		}
	}
	return whole, true
}

// combine averages measurements of consecutive intervals, weighted by their
// length: a CPU measured in only some of them is averaged over those.
func combine(ms []verify.Measurement) verify.Measurement {
	out := verify.Measurement{CPUs: map[int]verify.Figures{}, Noise: map[int]verify.Figures{}, Source: ms[0].Source}
	wt := map[int]float64{}
	var total float64
	for _, m := range ms {
		w := m.Seconds
		if w <= 0 {
			w = 1
		}
		total += w
		out.Seconds += m.Seconds
		out.Traffic += w * m.Traffic
		if m.Source != out.Source {
			out.Source = load.CostCounts // mixed: the rougher of the two
		}
		for c, f := range m.CPUs {
			x := out.CPUs[c]
			x.Busy += w * f.Busy
			x.IRQ += w * f.IRQ
			out.CPUs[c] = x
			wt[c] += w
		}
	}
	out.Traffic /= total
	out.TrafficHalves = [2]float64{out.Traffic, out.Traffic}
	for c, x := range out.CPUs {
		out.CPUs[c] = verify.Figures{Busy: x.Busy / wt[c], IRQ: x.IRQ / wt[c]}
	}
	return out
}

// adaptPrediction is the prediction an adaptation is verified against: the
// plan's own when it describes the load measured before the change, else
// one made by the same model from the last interval measured (note says
// which and why).
func adaptPrediction(h *host.Host, l *load.Load, p *plan.Plan, before verify.Measurement, appPIDs []int) (*plan.Prediction, string) {
	if p.Prediction != nil {
		ok, why := verify.Agrees(p.Prediction, before, verify.Options{})
		if ok {
			return p.Prediction, ""
		}
		return policy.Predict(h, l, p, appPIDs), "the plan's prediction was made on another load (" + why + "): predicted again from the last interval before the change"
	}
	return policy.Predict(h, l, p, appPIDs), "the plan carries no prediction: predicted from the last interval before the change"
}

// judge verifies the current adaptation's prediction against the intervals
// ivs after the change.
func (s *adaptState) judge(h *host.Host, ivs []Observation) Verification {
	v := Verification{Intervals: len(ivs), Note: s.note}
	after, ok := measureObs(h, ivs)
	if !ok || !s.beforeOK || s.pred == nil {
		v.Verdict, v.Reason = verify.Inconclusive, "the load was not measured before and after the change"
		return v
	}
	v.Result = verify.Judge(s.pred, s.before, after, verify.Options{})
	return v
}

// blockedFor returns the remembered worse plan with key whose load the
// measurement now is within tolerance of (nil: none), dropping one whose
// load changed (changed says how).
func (s *adaptState) blockedFor(key string, now verify.Measurement) (b *blockedPlan, changed string) {
	for i := range s.blocked {
		if s.blocked[i].key != key {
			continue
		}
		if why := loadChanged(s.blocked[i].before, now); why != "" {
			s.blocked = slices.Delete(s.blocked, i, i+1)
			return nil, why
		}
		return &s.blocked[i], ""
	}
	return nil, ""
}

// block remembers the current adaptation's plan as worse on the load it
// was made on.
func (s *adaptState) block(now time.Time, reason string) {
	if s.planKey == "" || !s.beforeOK {
		return
	}
	s.blocked = slices.DeleteFunc(s.blocked, func(b blockedPlan) bool { return b.key == s.planKey })
	s.blocked = append(s.blocked, blockedPlan{key: s.planKey, when: now, reason: reason, before: s.before})
	if len(s.blocked) > maxBlocked {
		s.blocked = s.blocked[len(s.blocked)-maxBlocked:]
	}
}

// Line is the verification in one line for the log and status text.
func (v *Verification) Line() string {
	if v == nil {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "prediction %s", v.Verdict)
	if len(v.CPUs) > 0 {
		fmt.Fprintf(&b, " (busy error mean %.1f, worst %.1f points; interrupt time mean %.1f, worst %.1f)", v.MeanBusyError, v.MaxBusyError, v.MeanIRQError, v.MaxIRQError)
	}
	if v.Reason != "" {
		b.WriteString(": " + v.Reason)
	}
	return b.String()
}
