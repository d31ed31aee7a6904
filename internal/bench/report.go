package bench

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/irqpilot/irqpilot/internal/bench/stats"
	"github.com/irqpilot/irqpilot/internal/load"
)

// Summary is one configuration over all its runs.
type Summary struct {
	Config     string         `json:"config"`
	N          int            `json:"runs"`
	Failed     int            `json:"failed"`
	Throughput stats.Interval `json:"throughput"`
	Unit       string         `json:"unit"`
	// PerCPUSecond is the work per busy CPU-second (median, interval).
	PerCPUSecond *stats.Interval `json:"per_cpu_second,omitempty"`
	// Ratio to the baseline (nil for the baseline itself or without one).
	Ratio *stats.Interval `json:"ratio,omitempty"`
	// Paired is how many rounds the ratio was paired over (the median of
	// per-round ratios, see Summarize); 0: the ratio of the medians.
	Paired int `json:"paired_rounds,omitempty"`
	// P is the p-value of the test behind the verdict, Test its name
	// (TestSign when paired, TestU when not); absent for "indicative".
	P    float64 `json:"p_value,omitempty"`
	Test string  `json:"test,omitempty"`
	// Verdict: "baseline", "better", "worse", "within noise", "indicative"
	// (fewer rounds than the confidence needs: a direction, no verdict) or
	// "no data".
	Verdict    string  `json:"verdict"`
	LatencyP50 float64 `json:"latency_p50_us,omitempty"`
	LatencyP99 float64 `json:"latency_p99_us,omitempty"`
	// LatencyP999, Rate and ServerCPUPerOp are medians over the runs of
	// the Result fields of those names (sockperf).
	LatencyP999    float64 `json:"latency_p999_us,omitempty"`
	Rate           float64 `json:"rate,omitempty"`
	ServerCPUPerOp float64 `json:"server_cpu_us_per_op,omitempty"`
	// LowerIsBetter: Throughput is a latency (Objective names it), and a
	// ratio below 1 is the better one.
	LowerIsBetter bool   `json:"lower_is_better,omitempty"`
	Objective     string `json:"objective,omitempty"`
	CPUs          []CPU  `json:"cpus"` // per-CPU medians over the runs
	// Warnings say what the measurement of this configuration cannot
	// carry (see Warnings): "saturated", "shared", "placement unknown".
	Warnings []string `json:"warnings,omitempty"`
}

// Report is a whole bench.
type Report struct {
	Workload string        `json:"workload"`
	Host     string        `json:"host"`
	Kernel   string        `json:"kernel"`
	CPUs     int           `json:"cpus"`
	Rounds   int           `json:"rounds"`
	Duration time.Duration `json:"duration_ns"`
	Baseline string        `json:"baseline"`
	Started  time.Time     `json:"started"`
	Finished time.Time     `json:"finished"`
	// Restored is true when every IRQ affinity and queue steering value read
	// the same after the bench as before; Diff lists any that did not.
	Restored bool      `json:"restored"`
	Diff     []string  `json:"diff,omitempty"`
	Summary  []Summary `json:"summary"`
	Runs     []Run     `json:"runs"`
	// Scope is what the configurations were allowed to change; Dropped the
	// changes each configuration wanted outside it (not applied).
	Scope   *Scope              `json:"scope,omitempty"`
	Dropped map[string][]string `json:"dropped,omitempty"`
	// MachineWide lists, per configuration, the machine-wide settings it
	// changed for its runs (kept by Scope.Restrict because a device under
	// test needs them: RFS's net.core.rps_sock_flow_entries).
	MachineWide map[string][]string `json:"machine_wide,omitempty"`
	// Decisions is, per configuration that decided something (a policy:
	// its plan's why; auto: the evidence and the candidates it compared),
	// what its first measured run set up, in words; Changes counts the
	// kernel writes it made for its runs.
	Decisions map[string]Decision `json:"decisions,omitempty"`
}

// Decision is what a configuration set up for its runs.
type Decision struct {
	Notes   []string `json:"notes,omitempty"`
	Changes int      `json:"changes"`
	// NoChange: the configuration wrote nothing and placed nothing here
	// (auto without evidence of harm, a policy whose writes fell outside
	// the devices under test), so it measured the baseline again.
	NoChange bool `json:"no_change,omitempty"`
}

// Summarize computes medians with their distribution-free intervals at
// Confidence and ratios to baseline (the first configuration when baseline
// is "").
//
// With paired, runs carry true interleaved rounds (Runner.All: every
// configuration once per round, in order), and a configuration's ratio is
// the median of its per-round ratios to the baseline's run of the same
// round, its interval the order statistics of those ratios and its verdict
// a sign test against 1 (PairedRatio), from at least MinRuns such rounds;
// without, or with fewer, it is the ratio of the two medians judged by the
// Mann-Whitney U test (UnpairedRatio), from at least MinRuns runs of each.
// Below that the ratio is a point and the verdict "indicative".
func Summarize(configs []string, runs []Run, baseline string, paired bool) []Summary {
	if baseline == "" && len(configs) > 0 {
		baseline = configs[0]
	}
	by := map[string][]Run{}
	for _, r := range runs {
		by[r.Config] = append(by[r.Config], r)
	}
	tp := func(c string) []float64 {
		var xs []float64
		for _, r := range by[c] {
			if r.Error == "" {
				xs = append(xs, r.Throughput)
			}
		}
		return xs
	}
	base := tp(baseline)
	var out []Summary
	for _, c := range configs {
		xs := tp(c)
		s := Summary{Config: c, N: len(by[c]), Failed: len(by[c]) - len(xs)}
		var eff []float64
		for _, r := range by[c] {
			if r.Error == "" && r.PerCPUSecond > 0 {
				eff = append(eff, r.PerCPUSecond)
			}
		}
		if len(eff) > 0 {
			e := stats.SampleMedian(eff, stats.Confidence)
			s.PerCPUSecond = &e
		}
		s.Throughput = stats.SampleMedian(xs, stats.Confidence)
		var p50, p99, p999, rate, cpuOp []float64
		cpuRuns := map[int][]load.CPUTime{}
		for _, r := range by[c] {
			if r.Error == "" {
				s.Unit = r.Unit
				s.LowerIsBetter, s.Objective = r.LowerIsBetter, r.Objective
				for _, v := range []struct {
					x   float64
					dst *[]float64
				}{{r.LatencyP999, &p999}, {r.Rate, &rate}, {r.ServerCPUPerOp, &cpuOp}} {
					if v.x > 0 {
						*v.dst = append(*v.dst, v.x)
					}
				}
				if r.LatencyP50 > 0 {
					p50 = append(p50, r.LatencyP50)
				}
				if r.LatencyP99 > 0 {
					p99 = append(p99, r.LatencyP99)
				}
			}
			for _, cs := range r.CPUs {
				cpuRuns[cs.ID] = append(cpuRuns[cs.ID], cs.CPUTime)
			}
		}
		if len(p50) > 0 {
			s.LatencyP50, s.LatencyP99 = stats.Median(p50), stats.Median(p99)
		}
		if len(p999) > 0 {
			s.LatencyP999 = stats.Median(p999)
		}
		if len(rate) > 0 {
			s.Rate = stats.Median(rate)
		}
		if len(cpuOp) > 0 {
			s.ServerCPUPerOp = stats.Median(cpuOp)
		}
		var ids []int
		for id := range cpuRuns {
			ids = append(ids, id)
		}
		sort.Ints(ids)
		for _, id := range ids {
			med := load.CombineCPUTimes(cpuRuns[id], func(v []float64) float64 { return round1(stats.Median(v)) })
			s.CPUs = append(s.CPUs, CPU{ID: id, CPUTime: med})
		}
		s.Warnings = Warnings(by[c], s.CPUs)
		var pa, pb []float64
		if paired {
			pa, pb = roundPairs(by[baseline], by[c])
		}
		switch {
		case c == baseline:
			s.Verdict = stats.VerdictBaseline
		case len(xs) == 0 || len(base) == 0:
			s.Verdict = stats.VerdictNoData
		case len(pa) < stats.MinRuns && (len(xs) < stats.MinRuns || len(base) < stats.MinRuns):
			// No interval and no verdict from fewer rounds than the
			// confidence needs: the ratio is a point (paired when it can
			// be; Low = High = Point in JSON) and its direction only.
			s.Verdict = stats.VerdictIndicative
			pt := stats.Median(xs) / stats.Median(base)
			if len(pa) > 0 {
				pt = stats.PairedRatio(pa, pb, stats.Confidence).Ratio.Point
				s.Paired = len(pa)
			}
			ratio := stats.Interval{Point: pt, Low: pt, High: pt}
			s.Ratio = &ratio
		default:
			var cmp stats.Comparison
			if len(pa) >= stats.MinRuns {
				cmp = stats.PairedRatio(pa, pb, stats.Confidence)
			} else {
				cmp = stats.UnpairedRatio(base, xs, stats.Confidence)
			}
			s.Ratio, s.Paired, s.P, s.Test = &cmp.Ratio, cmp.Paired, cmp.P, cmp.Test
			s.Verdict = stats.Verdict(cmp, s.LowerIsBetter)
		}
		out = append(out, s)
	}
	return out
}

// roundPairs returns the throughputs of the rounds in which both the
// baseline's and the configuration's run succeeded, in round order.
func roundPairs(base, cfg []Run) (a, b []float64) {
	at := map[int]float64{}
	for _, r := range base {
		if r.Error == "" {
			at[r.Round] = r.Throughput
		}
	}
	for _, r := range cfg {
		if v, ok := at[r.Round]; ok && r.Error == "" {
			a, b = append(a, v), append(b, r.Throughput)
		}
	}
	return a, b
}

func round1(v float64) float64 { return math.Round(v*10) / 10 }

// Method says, in words, how the table's intervals and verdicts are made.
func (r *Report) Method() string {
	paired, sign, u := false, false, false
	for _, s := range r.Summary {
		paired = paired || s.Paired > 0
		sign = sign || s.Test == stats.TestSign
		u = u || s.Test == stats.TestU
	}
	how := fmt.Sprintf("medians with %.0f %% distribution-free intervals (order statistics)", 100*stats.Confidence)
	if paired {
		how += "; ratios paired by round (the median of each round's ratio to " + r.Baseline + "'s run of that round, its interval the order statistics of those ratios)"
	}
	if sign {
		how += fmt.Sprintf("; verdicts by a sign test of the per-round ratios at %.0f %%", 100*(1-stats.Confidence))
	}
	if u {
		how += fmt.Sprintf("; unpaired ratios (of the medians) judged by a Mann-Whitney U test at %.0f %%", 100*(1-stats.Confidence))
	}
	if obj, lower := r.Objective(); lower {
		how += "; the objective is the " + obj + ": lower is better, a ratio below 1 is an improvement"
	}
	return how + fmt.Sprintf("; a verdict needs %d rounds or more (fewer: \"indicative\", a direction only)", stats.MinRuns)
}

// Objective names the report's figure of merit and whether lower is
// better (a latency workload's).
func (r *Report) Objective() (string, bool) {
	for _, s := range r.Summary {
		if s.LowerIsBetter {
			obj := s.Objective
			if obj == "" {
				obj = "latency"
			}
			return obj, true
		}
	}
	return "throughput", false
}

// WriteTable prints the summary for people.
func (r *Report) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "workload %s on %s (%s, %d CPUs): %d rounds × %s, interleaved; %s\n",
		r.Workload, r.Host, r.Kernel, r.CPUs, r.Rounds, r.Duration, r.Method())
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := "throughput (median)"
	if obj, lower := r.Objective(); lower {
		head = obj + " (median, lower is better)"
	}
	fmt.Fprintf(tw, "config\t%s\t%.0f%% interval\tratio to %s\tp\tverdict\tp50 µs\tp99 µs\t%%soft per CPU\t%%idle per CPU\twarnings\t\n", head, 100*stats.Confidence, r.Baseline)
	latency := false
	for _, s := range r.Summary {
		ratio, p := "—", "—"
		if s.Ratio != nil {
			ratio = fmt.Sprintf("%.3f (%.3f–%.3f)", s.Ratio.Point, s.Ratio.Low, s.Ratio.High)
			if s.Verdict == stats.VerdictIndicative || !s.Ratio.Finite() {
				ratio = fmt.Sprintf("%.3f", s.Ratio.Point)
			}
		}
		if s.Test != "" {
			p = fmt.Sprintf("%.3f", s.P)
		}
		interval := fmt.Sprintf("%.0f–%.0f", s.Throughput.Low, s.Throughput.High)
		point := fmt.Sprintf("%.0f", s.Throughput.Point)
		if s.LowerIsBetter { // latencies of a few µs need their decimal
			interval = fmt.Sprintf("%.1f–%.1f", s.Throughput.Low, s.Throughput.High)
			point = fmt.Sprintf("%.1f", s.Throughput.Point)
		}
		if !s.Throughput.Finite() {
			interval = fmt.Sprintf("needs %d runs", stats.MinRuns)
		}
		var soft, idle []string
		for _, c := range s.CPUs {
			soft = append(soft, fmt.Sprintf("%d:%.1f", c.ID, c.SoftIRQ))
			idle = append(idle, fmt.Sprintf("%d:%.1f", c.ID, c.IdleOrIOWait()))
		}
		failed := ""
		if s.Failed > 0 {
			failed = fmt.Sprintf(" (%d failed)", s.Failed)
		}
		warn := "—"
		if len(s.Warnings) > 0 {
			warn = strings.Join(s.Warnings, "; ")
		}
		latency = latency || s.LatencyP50 > 0
		verdict := s.Verdict
		if d, ok := r.Decisions[s.Config]; ok && d.NoChange {
			verdict = "no change" // it measured the baseline again: its ratio is an A/A's
		}
		fmt.Fprintf(tw, "%s\t%s %s%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", s.Config, point, s.Unit, failed,
			interval, ratio, p, verdict, num(s.LatencyP50), num(s.LatencyP99),
			strings.Join(soft, " "), strings.Join(idle, " "), warn)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if latency {
		fmt.Fprintf(w, "latency: %s\n", LatencyResolution(r.Workload))
	}
	for _, s := range r.Summary {
		if s.LatencyP999 == 0 && s.Rate == 0 && s.ServerCPUPerOp == 0 {
			continue
		}
		fmt.Fprintf(w, "%s: p99.9 %s µs, %.0f messages/s, server CPU %.2f µs per message (medians over the runs)\n",
			s.Config, numOrNone(s.LatencyP999, "— (under 1000 observations)"), s.Rate, s.ServerCPUPerOp)
	}
	if line := r.noiseFloorLine(); line != "" {
		fmt.Fprintln(w, line)
	}
	for _, line := range r.warningLines() {
		fmt.Fprintln(w, line)
	}
	if r.Scope != nil {
		fmt.Fprintln(w, r.Scope.Describe())
	}
	fmt.Fprintln(w, r.machineWideLine())
	for _, c := range slices.Sorted(maps.Keys(r.Dropped)) {
		fmt.Fprintf(w, "%s: %d changes outside the devices under test dropped (see JSON \"dropped\"), e.g. %s\n", c, len(r.Dropped[c]), r.Dropped[c][0])
	}
	if r.Restored {
		fmt.Fprintln(w, "machine restored: every IRQ affinity and queue steering value is as before")
	} else if len(r.Diff) > 0 {
		fmt.Fprintf(w, "WARNING: %d values differ from before the bench:\n  %s\n", len(r.Diff), strings.Join(r.Diff, "\n  "))
	}
	return nil
}

// noiseFloorLine states the run's own noise when it measured the baseline
// twice (an A/A twin, "default#aa" beside "default"): the widest
// multiplicative distance from 1 of a twin's ratio interval (NoiseBand). One configuration's interval can be
// narrower than that — in the campaign of record's udp bench a bootstrap
// interval put the twin at 0.980 (0.963–0.993), "worse" than itself — so a
// difference inside the A/A width is not one this run resolves, whatever
// its verdict.
func (r *Report) noiseFloorLine() string {
	var twin *Summary
	width := 0.0
	for i, s := range r.Summary {
		if s.Config == r.Baseline || BaseConfig(s.Config) != BaseConfig(r.Baseline) || s.Ratio == nil ||
			s.Verdict == stats.VerdictIndicative || !s.Ratio.Finite() {
			continue
		}
		if w := NoiseBand(*s.Ratio) - 1; twin == nil || w > width {
			twin, width = &r.Summary[i], w
		}
	}
	if twin == nil {
		return ""
	}
	if math.IsInf(width, 1) { // a twin's interval reached 0: no band is finite
		return fmt.Sprintf("noise floor: %s, the same configuration as %s, measured %.3f (%.3f–%.3f): no ratio is resolved by this run, whatever its verdict",
			twin.Config, r.Baseline, twin.Ratio.Point, twin.Ratio.Low, twin.Ratio.High)
	}
	return fmt.Sprintf("noise floor: %s, the same configuration as %s, measured %.3f (%.3f–%.3f): ratios within ±%.1f %% of 1 (%.3f–%.3f) are not resolved by this run, whatever their verdict",
		twin.Config, r.Baseline, twin.Ratio.Point, twin.Ratio.Low, twin.Ratio.High, 100*width, 1/(1+width), 1+width)
}

// machineWideLine says what the configurations changed outside the devices
// under test: the machine-wide settings some kept (RFS's table), or nothing.
func (r *Report) machineWideLine() string {
	if len(r.MachineWide) == 0 {
		return "nothing outside the devices under test is changed"
	}
	var parts []string
	for _, c := range slices.Sorted(maps.Keys(r.MachineWide)) {
		parts = append(parts, c+": "+strings.Join(r.MachineWide[c], ", "))
	}
	return "machine-wide settings changed during their runs (restored after each run): " + strings.Join(parts, "; ")
}

// LatencyResolution says how exact a workload's latency percentiles are.
func LatencyResolution(workload string) string {
	switch workload {
	case "memcached":
		return "p50/p99 from memcaslap's log2 histogram: the upper bound of the bucket holding the percentile, up to 2× the true value"
	case "nginx":
		return "p50/p99 as wrk reports them (HdrHistogram, about 3 significant digits)"
	case "storage":
		return "p50/p99 completion latency as fio reports it (its histogram, within about 1.6 %)"
	case "mysql":
		return "p50/p99 per transaction from sysbench's latency histogram: log-spaced buckets about 1.8 % wide, printed to 1 µs"
	case "sockperf":
		return "p50/p99/p99.9 as sockperf reports them: half the round trip, exact order statistics of its observations (ping-pong: every message; under-load: one in 10), in µs to 1 ns; p99.9 only from 1000 observations on"
	}
	return "p50/p99 as the workload reports them"
}

func numOrNone(v float64, none string) string {
	if v == 0 {
		return none
	}
	return fmt.Sprintf("%.1f", v)
}

func num(v float64) string {
	if v == 0 {
		return "—"
	}
	return fmt.Sprintf("%.0f", v)
}
