package workload

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
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
