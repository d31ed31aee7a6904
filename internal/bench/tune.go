package bench

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/irqpilot/irqpilot/internal/bench/stats"
	"github.com/irqpilot/irqpilot/internal/bench/workload"
	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/policy"
)

// subsets lists the non-empty subsets of the online CPUs (2^n − 1; callers
// bound n).
func subsets(cpus []int) []cpuset.Set {
	var out []cpuset.Set
	for m := 1; m < 1<<len(cpus); m++ {
		var s cpuset.Set
		for i, c := range cpus {
			if m&(1<<i) != 0 {
				s = s.Add(c)
			}
		}
		out = append(out, s)
	}
	return out
}

func onlineCPUs(h *host.Host) []int {
	var out []int
	for _, c := range h.CPUs {
		if c.Online {
			out = append(out, c.ID)
		}
	}
	return out
}

// ExhaustiveSpace is every distinct explicit placement on a small machine
// (at most 4 online CPUs): application CPUs × client CPUs (unless the
// scenario fixes the client) × RPS mask (off or any subset) × NAPI-thread
// CPUs (threaded NAPI only). For storage (no network device) only the
// application's CPUs vary. "default" is always first.
func ExhaustiveSpace(h *host.Host, app workload.AppInfo) ([]string, error) {
	cpus := onlineCPUs(h)
	if len(cpus) > 4 {
		return nil, fmt.Errorf("exhaustive search is for machines with at most 4 CPUs (this one has %d): %d plans", len(cpus), 1<<(4*len(cpus)))
	}
	sets := subsets(cpus)
	out := []string{"default"}
	if app.Device == "" {
		for _, a := range sets {
			a := a
			out = append(out, (&Spec{App: &a}).String())
		}
		return out, nil
	}
	rps := append([]cpuset.Set{{}}, sets...)
	napi := []*cpuset.Set{nil}
	if len(app.NAPIThreads) > 0 {
		napi = nil
		for _, s := range sets {
			s := s
			napi = append(napi, &s)
		}
	}
	clients := []*cpuset.Set{nil}
	if !app.ClientFixed {
		clients = nil
		for _, s := range sets {
			s := s
			clients = append(clients, &s)
		}
	}
	for _, a := range sets {
		for _, c := range clients {
			for _, r := range rps {
				for _, n := range napi {
					a, r := a, r
					out = append(out, (&Spec{App: &a, Client: c, RPS: &r, NAPI: n}).String())
				}
			}
		}
	}
	return out, nil
}

// Candidates is tune --auto's space: the baseline, irqbalance, every policy
// (auto included) and, for each CPU c as the receive CPU, the explicit
// placements that separate the application from the receive work
// (application on c, RPS/NAPI on the others; RPS only on c with the
// application elsewhere), that put the application with its steered
// receive work (application and RPS on c), and the client off the
// application (unless the scenario fixes the client); plus RPS over all
// CPUs — a few dozen instead of the exhaustive space.
func Candidates(h *host.Host, app workload.AppInfo) []string {
	out := []string{"default", "irqbalance"}
	out = append(out, policy.PolicyNames()...)
	cpus := onlineCPUs(h)
	all := cpuset.Of(cpus...)
	seen := map[string]bool{}
	add := func(s *Spec) {
		if c := s.String(); !seen[c] {
			seen[c] = true
			out = append(out, c)
		}
	}
	for _, c := range cpus {
		one := cpuset.Of(c)
		rest := all.Difference(one)
		if rest.IsEmpty() {
			continue
		}
		if app.Device == "" {
			add(&Spec{App: &one})
			add(&Spec{App: &rest})
			continue
		}
		napi := func(s *Spec, cpus cpuset.Set) *Spec {
			if len(app.NAPIThreads) > 0 {
				s.NAPI = &cpus
			}
			return s
		}
		add(napi(&Spec{App: &one, RPS: &rest}, rest))
		add(napi(&Spec{App: &one, RPS: &all}, rest))
		add(napi(&Spec{App: &rest, RPS: &one}, one))
		add(napi(&Spec{App: &one, RPS: &one}, one))
		if !app.ClientFixed {
			add(&Spec{App: &one, Client: &rest})
		}
	}
	if app.Device != "" {
		add(&Spec{RPS: &all})
	}
	return out
}

// TuneResult is what tune decided and why.
type TuneResult struct {
	Search     string               `json:"search"`
	Baseline   string               `json:"baseline"`
	Candidates []string             `json:"candidates"`
	Ranked     []string             `json:"ranked"`
	Obs        map[string][]float64 `json:"observations"`
	Best       string               `json:"best"`
	// Objective is what the search ranked and the confirmation judged;
	// Obs holds its figures.
	Objective Objective `json:"objective"`
	// Ratio and P are the best's paired comparison with the baseline in
	// the confirmation (Confirm), the sign test's p-value behind Kept.
	Ratio   stats.Interval `json:"ratio_to_baseline"`
	P       float64        `json:"p_value,omitempty"`
	Confirm *Confirmation  `json:"confirmation,omitempty"`
	// Notes say which candidates the machine could not have and why.
	Notes   []string      `json:"notes,omitempty"`
	Kept    bool          `json:"kept"`
	Why     string        `json:"why"`
	Setup   *Setup        `json:"setup,omitempty"`
	Elapsed time.Duration `json:"elapsed_ns"`
	// Summary is every measured candidate's medians and per-CPU load (in
	// Ranked order), Runs every measurement.
	Summary []Summary `json:"summary"`
	Runs    []Run     `json:"runs"`
	// Dropped: changes candidates wanted outside the devices under test.
	Dropped map[string][]string `json:"dropped,omitempty"`
	// Merged are the candidates set aside before any run, with why: "no
	// change" (its setup writes nothing here: the baseline stands for it),
	// "same as X" (the same writes and placement as candidate X), or "not
	// measured: …" (it cannot be set up on this machine).
	Merged map[string]string `json:"merged,omitempty"`
	// Cut says what the budget left out, "" when nothing.
	Cut string `json:"cut,omitempty"`
}

// distinct sets aside, before any run is spent, the candidates that need
// no measurement of their own: those whose setup writes nothing and places
// nothing (the baseline measures that), those identical to an earlier
// candidate, and those that cannot be set up here. Candidate 0, the
// baseline, is always kept. The setups are made as Measure will make them
// (the current load and processes), so a setup decided from the load
// (auto) is judged by what it decides now.
func (r *Runner) distinct(cands []string) (keep []string, merged map[string]string) {
	merged = map[string]string{}
	seen := map[string]string{}
	for i, c := range cands {
		if i == 0 {
			keep = append(keep, c)
			continue
		}
		s, err := r.Setup(c, r.measureApp())
		if err != nil {
			merged[c] = "not measured: " + err.Error()
			continue
		}
		fp := setupFingerprint(s)
		if fp == "" {
			merged[c] = "no change"
			continue
		}
		if first, dup := seen[fp]; dup {
			merged[c] = "same as " + first
			continue
		}
		seen[fp] = c
		keep = append(keep, c)
	}
	return keep, merged
}

// setupFingerprint is what a setup does, in a canonical form: its writes
// (target, kind, value) and where it places the workload's processes; ""
// when it does nothing.
func setupFingerprint(s *Setup) string {
	var parts []string
	for _, c := range s.Changes {
		parts = append(parts, fmt.Sprintf("%s|%s|%s|%s", c.Kind, c.Target, c.Path, c.Value))
	}
	slices.Sort(parts)
	if !s.AppCPUs.IsEmpty() {
		parts = append(parts, "app="+s.AppCPUs.String())
	}
	if !s.ClientCPUs.IsEmpty() {
		parts = append(parts, "client="+s.ClientCPUs.String())
	}
	if s.BusyPoll != nil && !s.BusyPoll.IsZero() {
		parts = append(parts, fmt.Sprintf("busypoll=%+v", *s.BusyPoll))
	}
	if s.Irqbalance {
		parts = append(parts, "irqbalance")
	}
	return strings.Join(parts, ";")
}

// TuneFor measures the candidates on objective obj ("": the workload's,
// see ObjectiveFor). With search "auto" it runs successive halving within
// budget (each measurement costs about r.Duration plus the apply/revert
// overhead; the confirmation's 3 × rounds measurements and up to rounds of a combined candidate come out of it);
// with "exhaustive" every candidate is measured rounds times, interleaved.
// The best is then confirmed (Confirmation) and kept only if it beats the
// baseline ("default", candidate 0) beyond the A/A noise on obj.
func TuneFor(ctx context.Context, r *Runner, cands []string, search string, budget time.Duration, rounds int, obj Objective) (*TuneResult, error) {
	obj, err := ObjectiveFor(r.Workload, obj)
	if err != nil {
		return nil, err
	}
	// The search ranks by the highest score: the objective's figure,
	// negated when lower is better.
	sign := 1.0
	if obj.LowerIsBetter() {
		sign = -1
	}
	if err := r.prime(ctx); err != nil { // outside the budget: no candidate measures a cold machine
		return nil, err
	}
	start := time.Now()
	res := &TuneResult{Search: search, Baseline: cands[0], Obs: map[string][]float64{}, Objective: obj}
	cands, res.Merged = r.distinct(cands)
	res.Candidates = cands
	per := r.Duration + 700*time.Millisecond
	done := 0
	rounds = max(rounds, 1)
	// expected is how many measurements the search will take, for the ETA.
	expected := rounds*len(cands) + 3*rounds
	if search != "exhaustive" {
		expected = max(int(budget/per), len(cands)+3*rounds)
	}
	var firstErr error
	// overBudget is the hard limit of the auto search, checked before each
	// run: a run that would end past the budget is not started.
	overBudget := func(runs int) bool {
		if search == "exhaustive" {
			return false
		}
		each := per
		if done > 0 {
			each = time.Since(start) / time.Duration(done)
		}
		return time.Since(start)+time.Duration(runs)*each > budget
	}
	cut := map[string]int{}
	measure := func(c, n int) []float64 {
		var xs []float64
		for i := 0; i < n; i++ {
			if ctx.Err() != nil || firstErr != nil {
				return xs
			}
			if overBudget(1) {
				cut[cands[c]] += n - i
				return xs
			}
			each := per
			if done > 0 {
				each = time.Since(start) / time.Duration(done)
			}
			eta := time.Duration(max(expected-done, 1)) * each
			if search != "exhaustive" {
				eta = min(eta, max(budget-time.Since(start), each))
			}
			r.progress("[%s] candidate %d/%d %s  measurement %d of about %d  ETA %s", search, c+1, len(cands), cands[c], done+1, expected, eta.Round(time.Second))
			run, err := r.Measure(ctx, cands[c], i)
			done++
			if err != nil {
				firstErr = err
				return xs
			}
			res.Runs = append(res.Runs, run)
			if v, ok := obj.Value(run); ok {
				xs = append(xs, sign*v)
			}
		}
		return xs
	}
	switch search {
	case "exhaustive":
		for round := 0; round < rounds; round++ {
			for i, c := range cands {
				res.Obs[c] = append(res.Obs[c], measure(i, 1)...)
			}
		}
		res.Ranked = append([]string(nil), cands...)
		sort.SliceStable(res.Ranked, func(i, j int) bool {
			return stats.Median(res.Obs[res.Ranked[i]]) > stats.Median(res.Obs[res.Ranked[j]])
		})
	default:
		idx := make([]int, len(cands))
		for i := range idx {
			idx[i] = i
		}
		// The confirmation's measurements, and a combined candidate's,
		// come out of the budget; every candidate is planned its
		// MinRankRuns (the clock, checked before each run, may cut them).
		total := max(int(budget/per)-4*rounds, stats.MinRankRuns*len(cands))
		ranked, obs := stats.SuccessiveHalving(idx, total, stats.MinRankRuns, func(c, n int) []float64 { return measure(c, n) })
		for c, xs := range obs {
			res.Obs[cands[c]] = xs
		}
		for _, c := range ranked {
			res.Ranked = append(res.Ranked, cands[c])
		}
	}
	if firstErr == nil && ctx.Err() == nil {
		if combo, place := Combination(res.Ranked, res.Obs, res.Baseline, func(c string) (bool, bool) { return setupKind(c, r.Setups[c]) }); combo != "" && !slices.Contains(cands, combo) {
			// Set up as Measure will (the measured load, the current
			// processes): a refusal is a note, not the end of the search.
			if _, err := r.Setup(combo, r.measureApp()); err != nil {
				res.Notes = append(res.Notes, fmt.Sprintf("no combined candidate: %s", err))
			} else {
				expected += min(max(len(res.Obs[place]), 1), rounds)
				cands = append(slices.Clip(cands), combo) // never into the caller's array
				res.Candidates = cands
				// As many runs as the placement had, at most --rounds
				// (a successive-halving survivor may have had many more).
				res.Obs[combo] = measure(len(cands)-1, min(max(len(res.Obs[place]), 1), rounds))
				res.Ranked = insertRanked(res.Ranked, res.Obs, combo)
			}
		}
	}
	for c, xs := range res.Obs { // scores back to the objective's figures
		for i := range xs {
			xs[i] *= sign
		}
		res.Obs[c] = xs
	}
	res.Dropped = r.Dropped
	var measured []string
	for _, c := range res.Ranked {
		if len(res.Obs[c]) > 0 {
			measured = append(measured, c)
		}
	}
	if len(res.Obs[res.Baseline]) > 0 && (len(measured) == 0 || measured[0] != res.Baseline) {
		measured = append([]string{res.Baseline}, removeStr(measured, res.Baseline)...)
	}
	res.Summary = Summarize(measured, obj.Project(res.Runs), res.Baseline, false)
	if firstErr != nil {
		res.Elapsed = time.Since(start)
		return res, firstErr
	}
	for _, c := range res.Ranked {
		if len(res.Obs[c]) > 0 {
			res.Best = c
			break
		}
	}
	if res.Best == "" {
		res.Elapsed = time.Since(start)
		if len(cut) > 0 {
			return res, fmt.Errorf("the budget %s ended before any candidate was measured (one measurement takes about %s)", budget, per.Round(100*time.Millisecond))
		}
		return res, fmt.Errorf("no candidate measured a %s", obj)
	}
	if res.Best == res.Baseline {
		res.Elapsed = time.Since(start)
		res.Why = fmt.Sprintf("objective %s: the baseline %s measured best (median %s over %d runs); nothing to change", obj.Describe(), res.Baseline, FormatFigure(stats.Median(res.Obs[res.Baseline])), len(res.Obs[res.Baseline]))
		return res, nil
	}
	if len(cut) > 0 {
		res.Cut = fmt.Sprintf("the budget (%s) ended the search: %d planned measurements not made", budget, sumValues(cut))
	}
	if overBudget(3 * rounds) { // the confirmation runs whole or not at all
		res.Elapsed = time.Since(start)
		res.Cut = strings.TrimPrefix(res.Cut+"; ", "; ") + fmt.Sprintf("no time left to confirm %s against the baseline and its A/A twin (%d × 3 runs)", res.Best, rounds)
		res.Why = fmt.Sprintf("objective %s: %s ranked best over %d runs, but the budget %s ended before its confirmation, so nothing is kept (a longer --budget confirms it)",
			obj.Describe(), res.Best, len(res.Obs[res.Best]), budget)
		return res, nil
	}
	conf, j, err := confirm(ctx, r, obj, res.Baseline, res.Best, rounds, func(config string, round int) (Run, error) {
		r.progress("[confirm] %s against %s and its A/A twin, round %d of %d", res.Best, res.Baseline, round+1, rounds)
		return r.Measure(ctx, config, round)
	})
	res.Confirm = conf
	res.Elapsed = time.Since(start)
	if err != nil {
		return res, err
	}
	res.Kept, res.Why, res.P = j.Kept, j.Why, j.P
	if j.Ratio != nil {
		res.Ratio = *j.Ratio
	}
	if s := r.Setups[res.Best]; res.Kept && s != nil {
		// The winner's setup as it was measured, carrying the measurement
		// that justifies it.
		w := *s
		w.Notes = append([]string{"tune: " + res.Why}, s.Notes...)
		res.Setup = &w
	}
	return res, nil
}

// Combination is tune's combined candidate: the best-ranked placement and
// the best-ranked NAPI setting (as kindOf tells them apart; TuneFor's
// reads each candidate's measured setup, setupKind), each with a median score above the
// baseline's (scores: higher is better), as one configuration "P&K" —
// and P, whose number of measurements the combination gets. Their effects
// need not add up (deferral can undo what a placement gained), so the
// combination is measured as a candidate of its own, not inferred. ""
// when either kind has no candidate better than the baseline.
// TuneFor measures it as often as P was measured, at most its rounds.
func Combination(ranked []string, obs map[string][]float64, baseline string, kindOf func(string) (placement, knob bool)) (combo, placement string) {
	if len(obs[baseline]) == 0 {
		return "", ""
	}
	base := stats.Median(obs[baseline])
	var knob string
	for _, c := range ranked {
		if len(obs[c]) == 0 || stats.Median(obs[c]) <= base {
			continue
		}
		p, k := kindOf(c)
		if p && placement == "" {
			placement = c
		}
		if k && knob == "" {
			knob = c
		}
	}
	if placement == "" || knob == "" {
		return "", ""
	}
	return placement + CombineSep + knob, placement
}

// insertRanked puts c into ranked before the first candidate whose median
// score it beats (scores: higher is better).
func insertRanked(ranked []string, obs map[string][]float64, c string) []string {
	m := stats.Median(obs[c])
	out := removeStr(ranked, c)
	for i, x := range out {
		if len(obs[c]) > 0 && (len(obs[x]) == 0 || m > stats.Median(obs[x])) {
			return append(out[:i], append([]string{c}, out[i:]...)...)
		}
	}
	return append(out, c)
}

func removeStr(xs []string, x string) []string {
	var out []string
	for _, v := range xs {
		if v != x {
			out = append(out, v)
		}
	}
	return out
}

func sumValues(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
