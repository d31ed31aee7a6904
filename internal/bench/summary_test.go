package bench

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/irqpilot/irqpilot/internal/bench/stats"
	"github.com/irqpilot/irqpilot/internal/bench/workload"
	"github.com/irqpilot/irqpilot/internal/load"
)

// 3 rounds: no verdict however clear; 6 rounds with a clear shift: one.
func TestVerdictNeedsRounds(t *testing.T) {
	mk := func(rounds int, shift float64) []Run {
		var runs []Run
		for r := range rounds {
			l := 1000 + 37*float64(r%4)
			runs = append(runs,
				Run{Config: "default", Round: r, Result: workload.Result{Throughput: l}},
				Run{Config: "b", Round: r, Result: workload.Result{Throughput: l * shift}})
		}
		return runs
	}
	for _, c := range []struct {
		rounds int
		shift  float64
		want   string
	}{
		{3, 1.3, stats.VerdictIndicative},
		{3, 0.7, stats.VerdictIndicative},
		{5, 1.3, stats.VerdictIndicative},
		{6, 1.3, stats.VerdictBetter},
		{6, 0.7, stats.VerdictWorse},
		{10, 1.05, stats.VerdictBetter},
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
			if c.want == stats.VerdictIndicative && (s.Ratio.Low != s.Ratio.Point || s.Test != "" || s.P != 0) {
				t.Errorf("%d rounds: indicative yet an interval or a test: %+v %s %v", c.rounds, *s.Ratio, s.Test, s.P)
			}
			if c.want != stats.VerdictIndicative && paired && (s.Test != stats.TestSign || s.Paired != c.rounds) {
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
				Run{Config: "default", Round: r, Result: workload.Result{Throughput: level * (1 + 0.03*rng.NormFloat64())}},
				Run{Config: "default#aa", Round: r, Result: workload.Result{Throughput: level * (1 + 0.03*rng.NormFloat64())}})
		}
		return runs
	}
	cs := []string{"default", "default#aa"}
	if s := Summarize(cs, draw(2, 10), "default", true)[1]; s.Verdict != stats.VerdictNoise || !s.Ratio.Contains(1) {
		t.Errorf("A/A: %s %+v p=%v", s.Verdict, *s.Ratio, s.P)
	}
	false_, trials := 0, 1000
	for seed := range uint64(trials) {
		if v := Summarize(cs, draw(seed, 10), "default", true)[1].Verdict; v != stats.VerdictNoise {
			false_++
		}
	}
	// The sign test over 10 rounds is exact but discrete: it rejects an
	// A/A pair with probability size (≈ 2.1 %), not the nominal 5 %. The
	// measured rate must be that, within its binomial band (4 standard
	// deviations of 1000 draws), and never above the nominal level.
	const rounds = 10
	size := 0.0
	for below := 0; below <= rounds; below++ {
		rs := make([]float64, rounds)
		for i := range rs {
			rs[i] = 1.1
			if i < below {
				rs[i] = 0.9
			}
		}
		if p, _ := stats.SignTest(rs); p < 1-stats.Confidence {
			size += binomial(rounds, below) / math.Pow(2, rounds)
		}
	}
	rate := float64(false_) / float64(trials)
	band := 4 * math.Sqrt(size*(1-size)/float64(trials))
	if rate > 1-stats.Confidence || math.Abs(rate-size) > band {
		t.Errorf("A/A judged different in %.1f %% of %d draws; the test's exact size is %.2f %% (band ±%.2f), the nominal level %.0f %%",
			100*rate, trials, 100*size, 100*band, 100*(1-stats.Confidence))
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
			Run{Config: "default", Round: r, Result: workload.Result{Throughput: l}},
			Run{Config: "default#aa", Round: r, Result: workload.Result{Throughput: l * wobble}},
			Run{Config: "better", Round: r, Result: workload.Result{Throughput: l * 1.05 * wobble}})
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
			Run{Config: "default", Round: r, Result: workload.Result{Throughput: l, Unit: "ops/s"}},
			Run{Config: "b", Round: r, Result: workload.Result{Throughput: l * 1.1, Unit: "ops/s"}})
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
	cpus := []CPU{{ID: 0, CPUTime: load.CPUTime{User: 60, SoftIRQ: 38, Idle: 2}}, {ID: 1, CPUTime: load.CPUTime{User: 50, Idle: 4.9}}, {ID: 2}}
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
	if got := Warnings(run("0-1", "0-1"), []CPU{{ID: 0, CPUTime: load.CPUTime{User: 50, Idle: 5}}, {ID: 1, CPUTime: load.CPUTime{User: 50, Idle: 50}}}); strings.Join(got, ";") != "shared CPU 0-1" {
		t.Errorf("5 %% idle counts as saturated: %v", got)
	}
}

// A configuration whose every run failed has no throughput: its interval
// is NaN, and the report must still encode (as null) and decode (as NaN).
func TestIntervalJSONMissing(t *testing.T) {
	sums := Summarize([]string{"default", "broken"}, []Run{
		{Config: "default", Result: workload.Result{Throughput: 100, Unit: "ops/s"}},
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

// A latency objective: lower is better. A configuration whose p99 is
// below its baseline's in every round is "better", with the ratio below
// 1; the same numbers as a throughput would be "worse".
func TestSummarizeLowerIsBetter(t *testing.T) {
	var runs []Run
	for round := 0; round < 8; round++ {
		base := 40 + float64(round%3)
		runs = append(runs,
			Run{Config: "default", Round: round, Result: workload.Result{Throughput: base, Unit: "µs", LowerIsBetter: true, Objective: "p99 latency", LatencyP999: 90, Rate: 30000, ServerCPUPerOp: 4}},
			Run{Config: "rps-spread", Round: round, Result: workload.Result{Throughput: base * 0.8, Unit: "µs", LowerIsBetter: true, Objective: "p99 latency", Rate: 31000}},
		)
	}
	s := Summarize([]string{"default", "rps-spread"}, runs, "", true)
	if got := s[1]; got.Verdict != stats.VerdictBetter || got.Ratio == nil || got.Ratio.Point >= 1 || !got.LowerIsBetter {
		t.Errorf("lower latency: verdict %q ratio %+v, want better below 1", got.Verdict, got.Ratio)
	}
	if s[0].LatencyP999 != 90 || s[0].Rate != 30000 || s[0].ServerCPUPerOp != 4 {
		t.Errorf("baseline medians: %+v", s[0])
	}
	for i := range runs {
		runs[i].LowerIsBetter = false
	}
	if got := Summarize([]string{"default", "rps-spread"}, runs, "", true)[1]; got.Verdict != stats.VerdictWorse {
		t.Errorf("the same numbers as throughput: verdict %q, want worse", got.Verdict)
	}
	rep := &Report{Workload: "sockperf", Baseline: "default", Summary: s}
	var b strings.Builder
	if err := rep.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"p99 latency (median, lower is better)", "lower is better, a ratio below 1 is an improvement", "default: p99.9 90.0 µs, 30000 messages/s, server CPU 4.00 µs per message"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}

// A report written before CPU held the whole split ("usr", "sys", "soft")
// reads into the split's fields, one written since reads back as written,
// and a CPU writes exactly the keys docs/json.md lists for cpus[], however
// much of load's row it holds.
func TestCPUReadsOldAndNewKeys(t *testing.T) {
	b, err := os.ReadFile("../../docs/evidence/campaign/memcached.json")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := ReadReport(b, "")
	if err != nil {
		t.Fatal(err)
	}
	// The file's first run, CPU 0, as written.
	want := CPU{ID: 0, CPUTime: load.CPUTime{User: 16.075650118203207, System: 39.95271867611762,
		SoftIRQ: 13.475177304962557, Idle: 30.496453900716617}, NetRx: 57415.27235644459, Interrupts: 0.2365065345621451}
	if d := cmp.Diff(want, rep.Runs[0].CPUs[0]); d != "" {
		t.Errorf("old report's run 0 CPU 0 (-want +got):\n%s", d)
	}

	c := CPU{ID: 3, CPUTime: load.CPUTime{User: 1, Nice: 2, System: 3, IOWait: 4, IRQ: 5, SoftIRQ: 6, Steal: 7,
		Guest: 8, GuestNice: 9, Idle: 10}, NetRx: 11, Interrupts: 12}
	out, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var got CPU
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(c, got); d != "" {
		t.Errorf("round trip of %s (-want +got):\n%s", out, d)
	}

	// load's other fields stay out of the file.
	c.NetTx, c.Block, c.Reschedule, c.HardirqTime, c.NoTicks = 13, 14, 15, 16, true
	c.Softirqs, c.SoftirqTime = map[string]float64{"NET_RX": 11}, map[string]float64{"NET_RX": 0.1}
	if out, err = json.Marshal([]CPU{c}); err != nil {
		t.Fatal(err)
	}
	var keys []map[string]float64
	if err := json.Unmarshal(out, &keys); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	wantKeys := map[string]float64{"cpu": 3, "user": 1, "nice": 2, "system": 3, "iowait": 4, "irq": 5, "softirq": 6,
		"steal": 7, "guest": 8, "guest_nice": 9, "idle": 10, "net_rx_per_s": 11, "irqs_per_s": 12}
	if len(keys) != 1 || !maps.Equal(keys[0], wantKeys) {
		t.Errorf("cpus[] entry %s, want the keys and values of %v", out, wantKeys)
	}
}

// A report written by this version (every key of the split) reads and
// writes back with each run's cpus[] as in the file.
func TestCPUWritesBackAsRead(t *testing.T) {
	b, err := os.ReadFile("../../docs/evidence/workloads/mysql.json")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Runs []struct {
			CPUs []map[string]any `json:"cpus"`
		} `json:"runs"`
	}
	if err := json.Unmarshal(b, &file); err != nil {
		t.Fatal(err)
	}
	rep, err := ReadReport(b, "")
	if err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(rep.Runs)
	if err != nil {
		t.Fatal(err)
	}
	var again []struct {
		CPUs []map[string]any `json:"cpus"`
	}
	if err := json.Unmarshal(out, &again); err != nil {
		t.Fatal(err)
	}
	if len(file.Runs) == 0 || len(file.Runs[0].CPUs) == 0 || len(file.Runs[0].CPUs[0]) != 13 || len(again) != len(file.Runs) {
		t.Fatalf("%d runs read, %d written; first run's first CPU %v", len(file.Runs), len(again), file.Runs[0].CPUs)
	}
	for i := range again {
		if d := cmp.Diff(file.Runs[i].CPUs, again[i].CPUs); d != "" {
			t.Errorf("run %d cpus[] (-file +written):\n%s", i, d)
		}
	}
}

// binomial is n choose k.
func binomial(n, k int) float64 {
	r := 1.0
	for i := 1; i <= k; i++ {
		r = r * float64(n-k+i) / float64(i)
	}
	return r
}
