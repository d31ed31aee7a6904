package bench

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/irqpilot/irqpilot/internal/load"
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
		{[]float64{1, 1, 1.1, 0.9}, 1, 2}, // ratios of exactly 1 drop out
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

// 3 rounds: no verdict however clear; 6 rounds with a clear shift: one.
func TestVerdictNeedsRounds(t *testing.T) {
	mk := func(rounds int, shift float64) []Run {
		var runs []Run
		for r := range rounds {
			l := 1000 + 37*float64(r%4)
			runs = append(runs,
				Run{Config: "default", Round: r, Result: Result{Throughput: l}},
				Run{Config: "b", Round: r, Result: Result{Throughput: l * shift}})
		}
		return runs
	}
	for _, c := range []struct {
		rounds int
		shift  float64
		want   string
	}{
		{3, 1.3, VerdictIndicative},
		{3, 0.7, VerdictIndicative},
		{5, 1.3, VerdictIndicative},
		{6, 1.3, VerdictBetter},
		{6, 0.7, VerdictWorse},
		{10, 1.05, VerdictBetter},
	} {
		for _, paired := range []bool{true, false} {
			s := Summarize([]string{"default", "b"}, mk(c.rounds, c.shift), "default", paired)[1]
			if paired && c.shift == 1.05 {
				// paired only: 5 % inside rounds that differ by 11 %
			} else if !paired && c.shift == 1.05 {
				continue
			}
			if s.Verdict != c.want {
				t.Errorf("%d rounds × %v (paired %v): %s, want %s (%+v)", c.rounds, c.shift, paired, s.Verdict, c.want, s.Ratio)
			}
			if c.want == VerdictIndicative && (s.Ratio.Low != s.Ratio.Point || s.Test != "" || s.P != 0) {
				t.Errorf("%d rounds: indicative yet an interval or a test: %+v %s %v", c.rounds, *s.Ratio, s.Test, s.P)
			}
			if c.want != VerdictIndicative && paired && (s.Test != TestSign || s.Paired != c.rounds) {
				t.Errorf("%d rounds paired: test %q over %d", c.rounds, s.Test, s.Paired)
			}
		}
	}
	var b strings.Builder
	rep := &Report{Workload: "udp", Rounds: 3, Baseline: "default", Runs: mk(3, 1.3)}
	rep.Summary = Summarize([]string{"default", "b"}, rep.Runs, "default", true)
	if err := rep.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "indicative") || strings.Contains(b.String(), "better") {
		t.Errorf("3-round table:\n%s", b.String())
	}
}

// A/A: two copies of one configuration, drawn from the same distribution
// round after round, get "within noise" — in this seeded draw, and in no
// more than the 5 % the confidence allows over many (the sign test over
// 10 rounds rejects a true "no difference" 2.1 % of the time).
func TestAAWithinNoise(t *testing.T) {
	draw := func(seed uint64, rounds int) []Run {
		rng := rand.New(rand.NewPCG(seed, 99))
		var runs []Run
		for r := range rounds {
			level := 1000 * (0.7 + 0.6*rng.Float64()) // whole rounds drift
			runs = append(runs,
				Run{Config: "default", Round: r, Result: Result{Throughput: level * (1 + 0.03*rng.NormFloat64())}},
				Run{Config: "default#aa", Round: r, Result: Result{Throughput: level * (1 + 0.03*rng.NormFloat64())}})
		}
		return runs
	}
	cs := []string{"default", "default#aa"}
	if s := Summarize(cs, draw(2, 10), "default", true)[1]; s.Verdict != VerdictNoise || !s.Ratio.Contains(1) {
		t.Errorf("A/A: %s %+v p=%v", s.Verdict, *s.Ratio, s.P)
	}
	false_, trials := 0, 1000
	for seed := range uint64(trials) {
		if v := Summarize(cs, draw(seed, 10), "default", true)[1].Verdict; v != VerdictNoise {
			false_++
		}
	}
	if rate := float64(false_) / float64(trials); rate > 1-Confidence {
		t.Errorf("A/A judged different in %.1f %% of %d draws, more than %.0f %%", 100*rate, trials, 100*(1-Confidence))
	}
	t.Logf("A/A judged different in %d of %d draws", false_, trials)
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
	for r, l := range []float64{100, 60, 100, 60, 100, 60} {
		runs = append(runs,
			Run{Config: "default", Round: r, Result: Result{Throughput: l, Unit: "ops/s"}},
			Run{Config: "b", Round: r, Result: Result{Throughput: l * 1.1, Unit: "ops/s"}})
	}
	saved := Report{Workload: "memcached", Rounds: 6, Baseline: "default", Runs: runs,
		Summary: []Summary{{Config: "default"}, {Config: "b", Verdict: "within noise"}}} // as an older version wrote it
	b, err := json.Marshal(saved)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := ReadReport(b, "")
	if err != nil {
		t.Fatal(err)
	}
	if s := rep.Summary[1]; s.Config != "b" || s.Paired != 6 || s.Verdict != "better" || math.Abs(s.Ratio.Point-1.1) > 1e-9 {
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

// --aa's twin: a copy of the baseline right after it, once.
func TestWithTwin(t *testing.T) {
	for _, c := range []struct {
		configs  []string
		baseline string
		want     string
	}{
		{[]string{"default", "auto"}, "", "default default#aa auto"},
		{[]string{"auto", "default"}, "default", "auto default default#aa"},
		{[]string{"default", "default#aa", "auto"}, "", "default default#aa auto"},
		{[]string{"default", "spec:app=0,rps=1#best"}, "spec:app=0,rps=1#best", "default spec:app=0,rps=1#best spec:app=0,rps=1#aa"},
	} {
		if got := strings.Join(WithTwin(c.configs, c.baseline), " "); got != c.want {
			t.Errorf("WithTwin(%v, %q) = %s, want %s", c.configs, c.baseline, got, c.want)
		}
	}
}

// Warnings: saturated only on the server's measured CPUs, shared only
// where the load generator's CPUs meet the server's.
func TestWarnings(t *testing.T) {
	cpus := []CPUStat{{ID: 0, CPUTime: load.CPUTime{User: 60, SoftIRQ: 38, Idle: 2}}, {ID: 1, CPUTime: load.CPUTime{User: 50, Idle: 4.9}}, {ID: 2}}
	run := func(app, client string) []Run { return []Run{{Config: "x", AppCPUs: app, ClientCPUs: client}} }
	for _, c := range []struct {
		runs []Run
		want string
	}{
		{run("1", "0"), "saturated CPU 1"},
		{run("0-2", "0"), "saturated CPU 0,1; shared CPU 0"},
		{run("0-1", "0-1"), "saturated CPU 0,1; shared CPU 0-1"},
		{run("2", "0-1"), ""},              // CPU 2 not measured (no ticks): no claim
		{run("", ""), "saturated CPU 0,1"}, // not recorded: every measured CPU
		{run("0", ""), "saturated CPU 0"},  // storage: no load generator
	} {
		if got := strings.Join(Warnings(c.runs, cpus), "; "); got != c.want {
			t.Errorf("app %q client %q: %q, want %q", c.runs[0].AppCPUs, c.runs[0].ClientCPUs, got, c.want)
		}
	}
	if got := Warnings(run("0-1", "0-1"), []CPUStat{{ID: 0, CPUTime: load.CPUTime{User: 50, Idle: 5}}, {ID: 1, CPUTime: load.CPUTime{User: 50, Idle: 50}}}); strings.Join(got, ";") != "shared CPU 0-1" {
		t.Errorf("5 %% idle counts as saturated: %v", got)
	}
}
