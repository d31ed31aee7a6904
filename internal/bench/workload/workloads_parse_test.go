package bench

import (
	"strings"
	"testing"
)

// sysbench 1.0.20 oltp_point_select against MariaDB 10.11 on this
// machine (one network namespace, TCP on loopback).
func TestParseSysbenchCaptured(t *testing.T) {
	// --threads=4 --percentile=99, no histogram: p99 from the
	// "99th percentile: 0.60" (ms) line, no p50.
	r, err := ParseSysbench(read(t, "sysbench-point-select-4threads.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Throughput != 33705.64 || r.Unit != "trx/s" || r.LatencyP99 != 600 || r.LatencyP50 != 0 || r.LowerIsBetter {
		t.Errorf("4 threads: got %+v, want 33705.64 trx/s, p99 600 µs, no p50", r)
	}
	// --threads=16 --histogram=on: 85775 transactions in the histogram;
	// the 42888th (50 %) falls in the row printed 0.318 ms, the 84918th
	// (99 %) in the row 1.319 ms, which sysbench's own "99th percentile"
	// line rounds to 1.32.
	r, err = ParseSysbench(read(t, "sysbench-point-select-histogram.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Throughput != 42536.94 || r.LatencyP50 != 318 || r.LatencyP99 != 1319 {
		t.Errorf("histogram: got %+v, want 42536.94 trx/s, p50 318 µs, p99 1319 µs", r)
	}
	if h := sysbenchHistogram(read(t, "sysbench-point-select-histogram.txt")); len(h) == 0 {
		t.Error("no histogram rows")
	} else {
		var total uint64
		for _, row := range h {
			total += row.n
		}
		if total != 85775 {
			t.Errorf("histogram holds %d transactions, the run reported 85775", total)
		}
	}
}

func TestParseSysbenchRefuses(t *testing.T) {
	for name, out := range map[string]string{
		"cut short": "sysbench 1.0.20\nThreads started!\n",
		"fatal":     "FATAL: unable to connect to MySQL server on host '10.77.0.1', port 3306, aborting...\n",
		"errors":    "    transactions:  10  (5.00 per sec.)\n    ignored errors:   3   (1.50 per sec.)\n",
		"none":      "    transactions:  0  (0.00 per sec.)\n",
	} {
		if r, err := ParseSysbench([]byte(out)); err == nil {
			t.Errorf("%s: parsed %+v, want an error", name, r)
		}
	}
}

// sockperf 3.7, UDP, client and server in one network namespace on this
// machine.
func TestParseSockperfCaptured(t *testing.T) {
	// ping-pong: 50199 observations, every percentile printed.
	st, err := ParseSockperf(read(t, "sockperf-ping-pong.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if st.LatencyP50 != 5.643 || st.LatencyP99 != 32.032 || st.LatencyP999 != 1956.717 || st.Throughput != st.LatencyP99 {
		t.Errorf("ping-pong percentiles: %+v", st.Result)
	}
	if !st.LowerIsBetter || st.Unit != "µs" || st.Objective != "p99 latency" {
		t.Errorf("ping-pong objective: %+v, want p99 latency in µs, lower is better", st.Result)
	}
	if st.Observations != 50199 || st.TotalSent != 68952 {
		t.Errorf("ping-pong counts: %d observations, %d sent; want 50199, 68952", st.Observations, st.TotalSent)
	}
	if want := 50199 / 1.550; st.Rate < want-1 || st.Rate > want+1 {
		t.Errorf("ping-pong rate %.1f msg/s, want %.1f", st.Rate, want)
	}
	// under-load at 10 000 msg/s with the default --reply-every 100: 152
	// observations, enough for a p99 but not for a p99.9 (left out).
	st, err = ParseSockperf(read(t, "sockperf-under-load.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if st.LatencyP50 != 9.879 || st.LatencyP99 != 3650.823 || st.LatencyP999 != 0 || st.Observations != 152 || st.Dropped != 1 {
		t.Errorf("under-load: %+v (%d observations, %d dropped)", st.Result, st.Observations, st.Dropped)
	}
	if want := 15201 / 1.519; st.Rate < want-1 || st.Rate > want+1 {
		t.Errorf("under-load rate %.1f msg/s, want %.1f (the rate sent)", st.Rate, want)
	}
}

func TestParseSockperfRefusesFewObservations(t *testing.T) {
	out := strings.Replace(string(read(t, "sockperf-under-load.txt")), "Total 152 observations", "Total 40 observations", 1)
	if _, err := ParseSockperf([]byte(out)); err == nil || !strings.Contains(err.Error(), "40 latency observations") {
		t.Errorf("40 observations: err %v, want a refusal naming them", err)
	}
	if _, err := ParseSockperf([]byte("sockperf: == version #3.7 ==\n")); err == nil {
		t.Error("output without results parsed")
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
			Run{Config: "default", Round: round, Result: Result{Throughput: base, Unit: "µs", LowerIsBetter: true, Objective: "p99 latency", LatencyP999: 90, Rate: 30000, ServerCPUPerOp: 4}},
			Run{Config: "rps-spread", Round: round, Result: Result{Throughput: base * 0.8, Unit: "µs", LowerIsBetter: true, Objective: "p99 latency", Rate: 31000}},
		)
	}
	s := Summarize([]string{"default", "rps-spread"}, runs, "", true)
	if got := s[1]; got.Verdict != VerdictBetter || got.Ratio == nil || got.Ratio.Point >= 1 || !got.LowerIsBetter {
		t.Errorf("lower latency: verdict %q ratio %+v, want better below 1", got.Verdict, got.Ratio)
	}
	if s[0].LatencyP999 != 90 || s[0].Rate != 30000 || s[0].ServerCPUPerOp != 4 {
		t.Errorf("baseline medians: %+v", s[0])
	}
	for i := range runs {
		runs[i].LowerIsBetter = false
	}
	if got := Summarize([]string{"default", "rps-spread"}, runs, "", true)[1]; got.Verdict != VerdictWorse {
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
