package workload

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/irqpilot/irqpilot/internal/program"
)

// Result is what one workload run reports.
type Result struct {
	// Throughput is the figure of merit: operations, requests or I/Os per second.
	Throughput float64 `json:"throughput"`
	// Unit names Throughput ("ops/s", "req/s", "IOPS", or the user's).
	Unit string `json:"unit"`
	// LatencyP50/P99 in microseconds; 0 when the workload does not report them.
	LatencyP50 float64 `json:"latency_p50_us,omitempty"`
	LatencyP99 float64 `json:"latency_p99_us,omitempty"`
	// LatencyP999 in microseconds (sockperf); 0 when not reported or when
	// the run had fewer than the 1000 observations a 99.9th percentile
	// needs to be more than the largest one.
	LatencyP999 float64 `json:"latency_p999_us,omitempty"`
	// LowerIsBetter marks a latency objective: Throughput then holds a
	// latency in Unit (sockperf: the p99 in µs), and a configuration is
	// better when its ratio to the baseline is below 1. Objective names
	// the figure ("p99 latency"); empty for throughput.
	LowerIsBetter bool   `json:"lower_is_better,omitempty"`
	Objective     string `json:"objective,omitempty"`
	// Rate is the messages per second a latency workload exchanged (its
	// throughput, which is not its objective).
	Rate float64 `json:"rate,omitempty"`
	// ServerCPUPerOp is the server process's CPU time (user + system, from
	// /proc/PID/stat) per message it handled over the run, in µs.
	ServerCPUPerOp float64 `json:"server_cpu_us_per_op,omitempty"`
}

// ParseMemcaslap reads memcaslap's output. The throughput is the final
// "Run time: … TPS: N" line. With --stat_freq memcaslap also prints a log2
// latency histogram ("Total Statistics (N events)" … "Log2 Dist:"); p50 and
// p99 are then read from it as the upper bound of the bucket holding the
// percentile (an over-estimate by at most 2x, the histogram's resolution).
func ParseMemcaslap(out []byte) (Result, error) {
	r := Result{Unit: "ops/s"}
	tps := regexp.MustCompile(`(?m)^Run time: \S+ Ops: \d+ TPS: (\d+)`).FindSubmatch(out)
	if tps == nil {
		return r, fmt.Errorf("memcaslap output has no final 'Run time: … TPS:' line (did it run to the end?)")
	}
	r.Throughput, _ = strconv.ParseFloat(string(tps[1]), 64)
	if h := log2Dist(out, "Total Statistics ("); h != nil {
		r.LatencyP50 = histPercentile(h, 0.50)
		r.LatencyP99 = histPercentile(h, 0.99)
	}
	return r, nil
}

// log2Dist returns counts by bucket (bucket i holds latencies in [2^i, 2^(i+1)) µs)
// of the histogram after the section header, or nil.
func log2Dist(out []byte, section string) []uint64 {
	i := bytes.Index(out, []byte(section))
	if i < 0 {
		return nil
	}
	sc := bufio.NewScanner(bytes.NewReader(out[i:]))
	var hist []uint64
	in := false
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "Log2 Dist:" {
			in = true
			continue
		}
		if !in {
			continue
		}
		label, rest, ok := strings.Cut(line, ":")
		base, err := strconv.Atoi(label)
		if !ok || err != nil {
			break
		}
		for j, f := range strings.Fields(rest) {
			n, err := strconv.ParseUint(f, 10, 64)
			if err != nil {
				return nil
			}
			b := base + j
			for len(hist) <= b {
				hist = append(hist, 0)
			}
			hist[b] += n
		}
	}
	return hist
}

func histPercentile(hist []uint64, q float64) float64 {
	var total uint64
	for _, n := range hist {
		total += n
	}
	if total == 0 {
		return 0
	}
	want := uint64(math.Ceil(q * float64(total)))
	var seen uint64
	for b, n := range hist {
		seen += n
		if seen >= want {
			return math.Ldexp(1, b+1)
		}
	}
	return math.Ldexp(1, len(hist))
}

// ParseWrk reads wrk's output (run with --latency for percentiles).
func ParseWrk(out []byte) (Result, error) {
	r := Result{Unit: "req/s"}
	m := regexp.MustCompile(`(?m)^Requests/sec:\s+([0-9.]+)`).FindSubmatch(out)
	if m == nil {
		return r, fmt.Errorf("wrk output has no 'Requests/sec:' line")
	}
	r.Throughput, _ = strconv.ParseFloat(string(m[1]), 64)
	if errs := regexp.MustCompile(`(?m)^\s+Socket errors: connect (\d+)`).FindSubmatch(out); errs != nil && string(errs[1]) != "0" {
		return r, fmt.Errorf("wrk could not connect (%s connect errors)", errs[1])
	}
	for _, p := range []struct {
		label string
		dst   *float64
	}{{"50%", &r.LatencyP50}, {"99%", &r.LatencyP99}} {
		m := regexp.MustCompile(`(?m)^\s+` + p.label + `\s+([0-9.]+)(us|ms|s)\s*$`).FindSubmatch(out)
		if m == nil {
			continue
		}
		v, _ := strconv.ParseFloat(string(m[1]), 64)
		switch string(m[2]) {
		case "ms":
			v *= 1e3
		case "s":
			v *= 1e6
		}
		*p.dst = v
	}
	return r, nil
}

// ParseFio reads fio's --output-format=json and sums all jobs' read and
// write IOPS; latency is the completion latency (clat) percentiles of the
// first job that reports them.
func ParseFio(out []byte) (Result, error) {
	r := Result{Unit: "IOPS"}
	// fio may print warnings before the JSON document.
	if i := bytes.IndexByte(out, '{'); i > 0 {
		out = out[i:]
	}
	var doc struct {
		Jobs []struct {
			Error int `json:"error"`
			Read  fioDir
			Write fioDir
		} `json:"jobs"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		return r, fmt.Errorf("fio JSON: %w", err)
	}
	if len(doc.Jobs) == 0 {
		return r, fmt.Errorf("fio JSON has no jobs")
	}
	for _, j := range doc.Jobs {
		if j.Error != 0 {
			return r, fmt.Errorf("fio job failed with error %d", j.Error)
		}
		r.Throughput += j.Read.IOPS + j.Write.IOPS
		for _, d := range []fioDir{j.Read, j.Write} {
			if r.LatencyP50 == 0 && d.IOPS > 0 {
				r.LatencyP50 = d.Clat.Percentile["50.000000"] / 1e3
				r.LatencyP99 = d.Clat.Percentile["99.000000"] / 1e3
			}
		}
	}
	return r, nil
}

type fioDir struct {
	IOPS float64 `json:"iops"`
	Clat struct {
		Percentile map[string]float64 `json:"percentile"`
	} `json:"clat_ns"`
}

// ParsePattern reads the figure of merit of any command: the first capture
// group of pattern (a regular expression) in its output, as a number.
func ParsePattern(out []byte, pattern, unit string) (Result, error) {
	re, err := regexp.Compile(pattern)
	if err != nil {
		return Result{}, fmt.Errorf("pattern %q: %w", pattern, err)
	}
	if re.NumSubexp() < 1 {
		return Result{}, fmt.Errorf("pattern %q needs a capture group around the number", pattern)
	}
	m := re.FindSubmatch(out)
	if m == nil {
		return Result{}, fmt.Errorf("pattern %q does not match the command's output", pattern)
	}
	v, err := strconv.ParseFloat(strings.ReplaceAll(string(m[1]), ",", ""), 64)
	if err != nil {
		return Result{}, fmt.Errorf("pattern %q captured %q, not a number", pattern, m[1])
	}
	return Result{Throughput: v, Unit: unit}, nil
}

// Run implements Workload: sysbench oltp_point_select for d at the
// workload's concurrency.
func (w *DBWorkload) Run(ctx context.Context, d time.Duration, s Placement) (Result, error) {
	secs := strconv.Itoa(max(1, int(d.Round(time.Second)/time.Second)))
	argv := w.client(append([]string{"sysbench"}, w.sysbenchArgs("run",
		"--threads="+strconv.Itoa(w.Opts.Connections), "--time="+secs, "--report-interval=0",
		"--percentile=99", "--histogram=on")...)...)
	out, err := runPinned(ctx, s, d, s.ClientCPUs, argv)
	if err != nil {
		return Result{}, err
	}
	return ParseSysbench(out)
}

var (
	sysbenchTPS    = regexp.MustCompile(`(?m)^\s*transactions:\s+(\d+)\s+\(([0-9.]+) per sec\.\)`)
	sysbenchP99    = regexp.MustCompile(`(?m)^\s*99th percentile:\s+([0-9.]+)`)
	sysbenchErrors = regexp.MustCompile(`(?m)^\s*ignored errors:\s+(\d+)`)
)

// ParseSysbench reads the output of sysbench 1.0's `run` of an OLTP
// test: transactions per second as the throughput and, from its latency
// histogram (--histogram=on), p50 and p99 in µs; without the histogram,
// p99 from its "99th percentile" line (--percentile=99).
func ParseSysbench(out []byte) (Result, error) {
	r := Result{Unit: "trx/s"}
	if bytes.Contains(out, []byte("FATAL:")) {
		return r, fmt.Errorf("sysbench failed: %s", program.Tail(out, 300))
	}
	m := sysbenchTPS.FindSubmatch(out)
	if m == nil {
		return r, fmt.Errorf("sysbench output has no 'transactions: N (X per sec.)' line (did it run to the end?)")
	}
	r.Throughput, _ = strconv.ParseFloat(string(m[2]), 64)
	if r.Throughput <= 0 {
		return r, fmt.Errorf("sysbench ran no transactions")
	}
	if e := sysbenchErrors.FindSubmatch(out); e != nil && string(e[1]) != "0" {
		return r, fmt.Errorf("sysbench: %s queries failed", e[1])
	}
	if h := sysbenchHistogram(out); len(h) > 0 {
		r.LatencyP50 = h.percentile(0.50) * 1e3
		r.LatencyP99 = h.percentile(0.99) * 1e3
	} else if p := sysbenchP99.FindSubmatch(out); p != nil {
		v, _ := strconv.ParseFloat(string(p[1]), 64)
		r.LatencyP99 = v * 1e3
	}
	return r, nil
}

// valueHist is a histogram as (value, count) rows in increasing value.
type valueHist []struct {
	v float64
	n uint64
}

// percentile is the value of the row holding the q-quantile.
func (h valueHist) percentile(q float64) float64 {
	var total uint64
	for _, r := range h {
		total += r.n
	}
	want := uint64(math.Ceil(q * float64(total)))
	var seen uint64
	for _, r := range h {
		seen += r.n
		if seen >= want {
			return r.v
		}
	}
	return h[len(h)-1].v
}

// sysbenchHistogram reads the rows "  VALUE |*** COUNT" after "Latency
// histogram (values are in milliseconds)".
func sysbenchHistogram(out []byte) valueHist {
	i := bytes.Index(out, []byte("Latency histogram"))
	if i < 0 {
		return nil
	}
	sc := bufio.NewScanner(bytes.NewReader(out[i:]))
	sc.Scan() // the title
	var h valueHist
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "value") || (line == "" && len(h) == 0) {
			continue // the column heads
		}
		left, right, ok := strings.Cut(line, "|")
		if !ok {
			break
		}
		f := strings.Fields(right)
		v, err := strconv.ParseFloat(strings.TrimSpace(left), 64)
		if len(f) == 0 || err != nil {
			break
		}
		n, err := strconv.ParseUint(f[len(f)-1], 10, 64)
		if err != nil {
			break
		}
		h = append(h, struct {
			v float64
			n uint64
		}{v, n})
	}
	return h
}

// SockperfStats is one sockperf client run.
type SockperfStats struct {
	Result
	// Observations is how many latencies the percentiles are taken from.
	Observations int
	// TotalSent is every message the client sent, warm-up included: what
	// the server handled while it was measured.
	TotalSent int64
	Dropped   int64
}

var (
	ansiEscape       = regexp.MustCompile(`\x1b\[[0-9;]*m`)
	sockperfValid    = regexp.MustCompile(`\[Valid Duration\] RunTime=([0-9.]+) sec; SentMessages=(\d+); ReceivedMessages=(\d+)`)
	sockperfTotal    = regexp.MustCompile(`\[Total Run\] RunTime=[0-9.]+ sec; Warm up time=\d+ msec; SentMessages=(\d+);`)
	sockperfObs      = regexp.MustCompile(`Total (\d+) observations`)
	sockperfPct      = regexp.MustCompile(`(?m)---> percentile ([0-9.]+) =\s+([0-9.]+)`)
	sockperfDropped  = regexp.MustCompile(`# dropped messages = (\d+)`)
	sockperfMinCount = 100 // the fewest observations with a p99 that is not the largest one
)

// ParseSockperf reads the client's output of sockperf 3 (ping-pong or
// under-load): the latency percentiles it prints (in µs, half the round
// trip, as sockperf reports latency; exact order statistics of its
// observations), the message rate over its valid duration, and the
// messages sent. The p99.9 is left out (0) below 1000 observations, where
// it would be the largest observation, and a run with fewer than 100
// observations is refused: its p99 would be too.
func ParseSockperf(out []byte) (SockperfStats, error) {
	out = ansiEscape.ReplaceAll(out, nil)
	st := SockperfStats{Result: Result{Unit: "µs", Objective: "p99 latency", LowerIsBetter: true}}
	v := sockperfValid.FindSubmatch(out)
	if v == nil {
		return st, fmt.Errorf("sockperf output has no '[Valid Duration] RunTime=… SentMessages=…' line (did it run to the end?)")
	}
	secs, _ := strconv.ParseFloat(string(v[1]), 64)
	sent, _ := strconv.ParseFloat(string(v[2]), 64)
	if secs > 0 {
		st.Rate = sent / secs
	}
	if t := sockperfTotal.FindSubmatch(out); t != nil {
		st.TotalSent, _ = strconv.ParseInt(string(t[1]), 10, 64)
	}
	if dr := sockperfDropped.FindSubmatch(out); dr != nil {
		st.Dropped, _ = strconv.ParseInt(string(dr[1]), 10, 64)
	}
	o := sockperfObs.FindSubmatch(out)
	if o == nil {
		return st, fmt.Errorf("sockperf output has no 'Total N observations' line")
	}
	st.Observations, _ = strconv.Atoi(string(o[1]))
	if st.Observations < sockperfMinCount {
		return st, fmt.Errorf("sockperf: %d latency observations, fewer than the %d a p99 needs (a longer --duration or a higher --rate)", st.Observations, sockperfMinCount)
	}
	for _, m := range sockperfPct.FindAllSubmatch(out, -1) {
		val, err := strconv.ParseFloat(string(m[2]), 64)
		if err != nil {
			continue
		}
		switch string(m[1]) {
		case "50.000":
			st.LatencyP50 = val
		case "99.000":
			st.LatencyP99 = val
		case "99.900":
			if st.Observations >= 1000 {
				st.LatencyP999 = val
			}
		}
	}
	if st.LatencyP99 <= 0 || st.LatencyP50 <= 0 {
		return st, fmt.Errorf("sockperf output has no 50.000 and 99.000 percentiles")
	}
	st.Throughput = st.LatencyP99
	return st, nil
}
