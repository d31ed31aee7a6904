package bench

import (
	"context"
	"fmt"
	"sort"
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
	Ratio      stats.Interval       `json:"ratio_to_baseline"`
	// P is the Mann-Whitney U test's p-value behind Kept (the runs of a
	// search are not paired by round).
	P       float64       `json:"p_value,omitempty"`
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
}

// Tune measures the candidates. With search "auto" it runs successive
// halving within budget (each measurement costs about r.Duration plus the
// apply/revert overhead); with "exhaustive" every candidate is measured
// rounds times, interleaved. The best is kept only if its ratio to the
// baseline ("default", candidate 0) is above 1 beyond the noise.
func Tune(ctx context.Context, r *Runner, cands []string, search string, budget time.Duration, rounds int) (*TuneResult, error) {
	// The search ranks by the highest median: on a latency it would keep
	// the worst candidate.
	if l, ok := r.Workload.(interface{ LowerIsBetter() bool }); ok && l.LowerIsBetter() {
		return nil, fmt.Errorf("tune maximises throughput; %s's objective is a latency (lower is better), which tune does not search yet: measure it with bench", r.Workload.Name())
	}
	if err := r.prime(ctx); err != nil { // outside the budget: no candidate measures a cold machine
		return nil, err
	}
	start := time.Now()
	res := &TuneResult{Search: search, Baseline: cands[0], Candidates: cands, Obs: map[string][]float64{}}
	per := r.Duration + 700*time.Millisecond
	done := 0
	rounds = max(rounds, 1)
	// expected is how many measurements the search will take, for the ETA.
	expected := rounds * len(cands)
	if search != "exhaustive" {
		expected = max(int(budget/per), 1) + 2*rounds
	}
	var firstErr error
	measure := func(c, n int) []float64 {
		var xs []float64
		for i := 0; i < n; i++ {
			if ctx.Err() != nil || firstErr != nil {
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
			if run.Error == "" {
				xs = append(xs, run.Throughput)
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
		total := int(budget / per)
		// The baseline is measured alongside the final round, so keep some
		// budget for it.
		ranked, obs := stats.SuccessiveHalving(idx, total-4, func(c, n int) []float64 { return measure(c, n) })
		for c, xs := range obs {
			res.Obs[cands[c]] = xs
		}
		for _, c := range ranked {
			res.Ranked = append(res.Ranked, cands[c])
		}
		// Give the baseline as many observations as the best, and both at
		// least rounds, for a fair interval.
		if len(ranked) > 0 {
			best := cands[ranked[0]]
			for (len(res.Obs[res.Baseline]) < max(len(res.Obs[best]), rounds) || len(res.Obs[best]) < rounds) && ctx.Err() == nil && firstErr == nil {
				n0, n1 := len(res.Obs[res.Baseline]), len(res.Obs[best])
				if best != res.Baseline {
					res.Obs[res.Baseline] = append(res.Obs[res.Baseline], measure(0, 1)...)
				}
				res.Obs[best] = append(res.Obs[best], measure(ranked[0], 1)...)
				if len(res.Obs[best]) > max(8, rounds) || (len(res.Obs[res.Baseline]) == n0 && len(res.Obs[best]) == n1) {
					break
				}
			}
		}
	}
	res.Elapsed = time.Since(start)
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
	res.Summary = Summarize(measured, res.Runs, res.Baseline, false)
	if firstErr != nil {
		return res, firstErr
	}
	if len(res.Ranked) == 0 {
		return res, fmt.Errorf("no candidate measured")
	}
	res.Best = res.Ranked[0]
	base := res.Obs[res.Baseline]
	cmp := stats.UnpairedRatio(base, res.Obs[res.Best], stats.Confidence)
	res.Ratio, res.P = cmp.Ratio, cmp.P
	switch {
	case res.Best == res.Baseline:
		res.Why = "the baseline measured best; nothing to change"
	// Too few runs give no interval and no verdict: with 2 runs each two
	// identical placements measured 1.12x apart on this machine
	// (memcached, docs/benchmarks.md), and with 3 the best a test can say
	// is p = 0.1.
	case len(base) < stats.MinRuns || len(res.Obs[res.Best]) < stats.MinRuns:
		res.Why = fmt.Sprintf("%s measured best (%.3fx, indicative) but with fewer than %d runs each no test at %.0f %% can tell it from the noise; keeping the baseline", res.Best, res.Ratio.Point, stats.MinRuns, 100*stats.Confidence)
	case cmp.Significant(stats.Confidence) && res.Ratio.Point > 1:
		res.Kept = true
		res.Why = fmt.Sprintf("%s beats %s by %.3fx (%.0f %% interval %.3f–%.3f, %s p = %.3f), outside the noise", res.Best, res.Baseline, res.Ratio.Point, 100*stats.Confidence, res.Ratio.Low, res.Ratio.High, cmp.Test, cmp.P)
	default:
		res.Why = fmt.Sprintf("%s measured best (%.3fx, %.0f %% interval %.3f–%.3f, %s p = %.3f) but not outside the noise; keeping the baseline", res.Best, res.Ratio.Point, 100*stats.Confidence, res.Ratio.Low, res.Ratio.High, cmp.Test, cmp.P)
	}
	if res.Kept {
		s, err := r.Setup(res.Best, r.app)
		if err == nil {
			res.Setup = s
		}
	}
	return res, nil
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
