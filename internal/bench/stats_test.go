package bench

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
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

func TestBootstrapMedianKnownAnswers(t *testing.T) {
	// All equal: the interval collapses to the value.
	iv := BootstrapMedian([]float64{5, 5, 5, 5, 5}, 0.95, 1)
	if iv != (Interval{5, 5, 5}) {
		t.Errorf("constant sample: %+v", iv)
	}
	// 1..11: the median is 6. A resampled median is ≤ k with probability
	// P(Binomial(11, k/11) ≥ 6): 0.72 % for k=2, 5.1 % for k=3, 94.9 % for
	// k=8 and 99.3 % for k=9, so the exact 95 % percentile interval is
	// [3, 9], far enough from the 2.5 %/97.5 % edges that 2000 resamples
	// always find it.
	iv = BootstrapMedian([]float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, 0.95, 42)
	if iv.Point != 6 || iv.Low != 3 || iv.High != 9 {
		t.Errorf("1..11: %+v, want 6 [3, 9]", iv)
	}
	// Same seed, same answer.
	if again := BootstrapMedian([]float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, 0.95, 42); again != iv {
		t.Errorf("not reproducible: %+v vs %+v", again, iv)
	}
}

func TestBootstrapRatio(t *testing.T) {
	base := []float64{100, 101, 99, 100, 102, 98}
	faster := []float64{120, 121, 119, 120, 122, 118}
	iv := BootstrapRatio(base, faster, 0.95, 7)
	if iv.Point != 1.2 || !iv.Significant() || iv.Low < 1.15 || iv.High > 1.25 {
		t.Errorf("1.2x: %+v", iv)
	}
	same := []float64{101, 99, 100, 102, 98, 100}
	iv = BootstrapRatio(base, same, 0.95, 7)
	if iv.Significant() || !iv.Contains(1) {
		t.Errorf("equal groups judged different: %+v", iv)
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
	ranked, obs := SuccessiveHalving([]int{0, 1, 2, 3, 4, 5, 6, 7}, 40, measure)
	if ranked[0] != 7 {
		t.Fatalf("ranked %v, want 7 first", ranked)
	}
	total := 0
	for _, o := range obs {
		total += len(o)
	}
	if total > 40 {
		t.Errorf("used %d measurements, budget 40", total)
	}
	// Losers of round 0 were measured once; the winner more often.
	if len(obs[0]) != 1 || len(obs[7]) < 3 {
		t.Errorf("measurements: loser %d, winner %d", len(obs[0]), len(obs[7]))
	}
}

// A configuration whose every run failed has no throughput: its interval
// is NaN, and the report must still encode (as null) and decode (as NaN).
func TestIntervalJSONMissing(t *testing.T) {
	sums := Summarize([]string{"default", "broken"}, []Run{
		{Config: "default", Result: Result{Throughput: 100, Unit: "ops/s"}},
		{Config: "broken", Error: "memcaslap: exit status 1"},
	}, "default", true)
	b, err := json.Marshal(sums)
	if err != nil {
		t.Fatalf("report with a failed configuration: %v", err)
	}
	if !strings.Contains(string(b), `"throughput":{"point":null,"low":null,"high":null}`) {
		t.Errorf("failed configuration's throughput not null: %s", b)
	}
	var back []Summary
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !math.IsNaN(back[1].Throughput.Point) || back[0].Throughput.Point != 100 {
		t.Errorf("decoded %+v, %+v", back[0].Throughput, back[1].Throughput)
	}
}

// Rounds of an interleaved bench drift together (this VM: one round's every
// configuration 35 % below the next). Paired by round, the A/A twin's
// ratio is 1 with a narrow interval and a 5 % better configuration is
// "better"; resampled as two independent groups, both drown in the drift.
func TestSummarizePairedRounds(t *testing.T) {
	level := []float64{1329, 1040, 1018, 1218, 693, 1060, 683, 1009} // udp default, k dgram/s, session 4
	var runs []Run
	for r, l := range level {
		wobble := 1 + 0.004*float64(r%3-1)
		runs = append(runs,
			Run{Config: "default", Round: r, Result: Result{Throughput: l}},
			Run{Config: "default#aa", Round: r, Result: Result{Throughput: l * wobble}},
			Run{Config: "better", Round: r, Result: Result{Throughput: l * 1.05 * wobble}})
	}
	runs = append(runs, Run{Config: "better", Round: 8, Error: "no baseline in this round"})
	configs := []string{"default", "default#aa", "better"}
	paired := Summarize(configs, runs, "default", true)
	if aa := paired[1]; aa.Paired != 8 || aa.Ratio.Low < 0.99 || aa.Ratio.High > 1.01 || aa.Verdict != "within noise" {
		t.Errorf("paired A/A: %d rounds, %+v, %s", aa.Paired, *aa.Ratio, aa.Verdict)
	}
	if b := paired[2]; b.Paired != 8 || b.Verdict != "better" || math.Abs(b.Ratio.Point-1.05) > 0.005 {
		t.Errorf("paired better: %d rounds, %+v, %s", b.Paired, *b.Ratio, b.Verdict)
	}
	unpaired := Summarize(configs, runs, "default", false)
	if b := unpaired[2]; b.Paired != 0 || b.Verdict != "within noise" || b.Ratio.High-b.Ratio.Low < 0.2 {
		t.Errorf("unpaired: %+v, %s (want the drift's wide interval)", *b.Ratio, b.Verdict)
	}
}

// Each configuration takes every position of a round in turn.
func TestRoundOrder(t *testing.T) {
	// Row 0 interleaves from both ends; the next row adds one.
	cs := []string{"a", "b", "c", "d"}
	for r, w := range []string{"a b d c", "b c a d", "c d b a", "d a c b", "a b d c"} {
		if got := strings.Join(RoundOrder(cs, r), " "); got != w {
			t.Errorf("round %d: %s, want %s", r, got, w)
		}
	}
	// Balanced over a full period, for even and odd counts (odd ones take
	// the rows and then the rows reversed): every configuration once per
	// round, equally often in every position, and, inside the rounds,
	// after every other configuration equally often (the carry-over a
	// rotation left fixed). The pair that spans two rounds (the last run
	// of one, the first of the next) is not balanced.
	for n := 1; n <= 11; n++ {
		var configs []string
		for i := range n {
			configs = append(configs, fmt.Sprintf("c%d", i))
		}
		period := n
		if n%2 == 1 {
			period = 2 * n
		}
		pos := map[string]map[int]int{}
		after := map[[2]string]int{}
		for r := range period {
			order := RoundOrder(configs, r)
			seen := map[string]bool{}
			for j, c := range order {
				if seen[c] || !slices.Contains(configs, c) {
					t.Fatalf("n=%d round %d: %v is not a permutation", n, r, order)
				}
				seen[c] = true
				if pos[c] == nil {
					pos[c] = map[int]int{}
				}
				pos[c][j]++
				if j > 0 {
					after[[2]string{order[j-1], c}]++
				}
			}
			if n > 0 && len(seen) != n {
				t.Fatalf("n=%d round %d: %v", n, r, order)
			}
		}
		for _, c := range configs {
			for j := range n {
				if pos[c][j] != period/n {
					t.Errorf("n=%d: %s in position %d %d times, want %d", n, c, j, pos[c][j], period/n)
				}
			}
			for _, d := range configs {
				if c != d && after[[2]string{c, d}] != period/n {
					t.Errorf("n=%d: %s after %s %d times, want %d", n, d, c, after[[2]string{c, d}], period/n)
				}
			}
		}
	}
	if RoundOrder(nil, 3) != nil {
		t.Error("RoundOrder invented configurations")
	}
}

// A saved report is summarised again, paired, whatever its file said;
// garbage and empty reports are refused by name.
func TestReadReportResummarises(t *testing.T) {
	var runs []Run
	for r, l := range []float64{100, 60, 100, 60} {
		runs = append(runs,
			Run{Config: "default", Round: r, Result: Result{Throughput: l, Unit: "ops/s"}},
			Run{Config: "b", Round: r, Result: Result{Throughput: l * 1.1, Unit: "ops/s"}})
	}
	saved := Report{Workload: "memcached", Rounds: 4, Baseline: "default", Runs: runs,
		Summary: []Summary{{Config: "default"}, {Config: "b", Verdict: "within noise"}}} // as an older version wrote it
	b, err := json.Marshal(saved)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := ReadReport(b, "")
	if err != nil {
		t.Fatal(err)
	}
	if s := rep.Summary[1]; s.Config != "b" || s.Paired != 4 || s.Verdict != "better" || math.Abs(s.Ratio.Point-1.1) > 1e-9 {
		t.Errorf("re-summarised b: %+v ratio %+v", s, s.Ratio)
	}
	for _, bad := range []string{"{", `{"runs":[]}`, `{"baseline":"x","runs":[{"config":"default","throughput":1}]}`} {
		if _, err := ReadReport([]byte(bad), ""); err == nil {
			t.Errorf("ReadReport(%s) accepted", bad)
		}
	}
	// Against another configuration: b is the baseline, default 1/1.1 of it.
	if rep, err = ReadReport(b, "b"); err != nil {
		t.Fatal(err)
	}
	if s := rep.Summary[0]; rep.Baseline != "b" || s.Config != "default" || s.Verdict != "worse" || math.Abs(s.Ratio.Point-1/1.1) > 1e-9 {
		t.Errorf("against b: baseline %q, %+v ratio %+v", rep.Baseline, s, s.Ratio)
	}
	for base, want := range map[string]string{"nope": `baseline "nope" is not one of`, "#x": `baseline "#x" is not one of`} {
		if _, err := ReadReport(b, base); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ReadReport(--baseline %s): %v, want %q", base, err, want)
		}
	}
}

// "#TAG" finds the one configuration with that tag, and refuses two.
func TestFindConfig(t *testing.T) {
	cs := []string{"default", "default#aa", "spec:app=0,rps=1#best", "auto#tune"}
	if got, err := FindConfig(cs, "#best"); err != nil || got != "spec:app=0,rps=1#best" {
		t.Errorf("#best: %q %v", got, err)
	}
	if got, err := FindConfig(cs, "default"); err != nil || got != "default" {
		t.Errorf("default: %q %v", got, err)
	}
	if _, err := FindConfig(append(cs, "x#best"), "#best"); err == nil || !strings.Contains(err.Error(), "names 2 configurations") {
		t.Errorf("two #best: %v", err)
	}
}
