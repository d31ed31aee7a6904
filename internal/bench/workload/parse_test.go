package workload

import (
	"os"
	"strings"
	"testing"
)

func read(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseCapturedOutputs(t *testing.T) {
	cases := []struct {
		file     string
		parse    func([]byte) (Result, error)
		tput     float64
		p50, p99 float64
	}{
		// memcaslap 1.1 against memcached 1.6 on loopback, this machine.
		{"memcaslap.txt", ParseMemcaslap, 71771, 0, 0},
		// Same with -S 3s: log2 histogram "Total Statistics (192885 events)";
		// 50 % of 192885 falls in the 2^7 bucket (upper bound 256 µs), 99 % (190957)
		// in the 2^12 bucket (upper bound 8192 µs).
		{"memcaslap-stat.txt", ParseMemcaslap, 64294, 256, 8192},
		// wrk 4.1 against nginx on loopback, --latency.
		{"wrk.txt", ParseWrk, 24782.37, 376, 456260},
		// fio 3.33 randread 4k iodepth 8 on this machine's virtio disk.
		{"fio.json", ParseFio, 4460.31746, 205.824, 15663.104},
	}
	for _, c := range cases {
		r, err := c.parse(read(t, c.file))
		if err != nil {
			t.Errorf("%s: %v", c.file, err)
			continue
		}
		if r.Throughput != c.tput || !near(r.LatencyP50, c.p50) || !near(r.LatencyP99, c.p99) {
			t.Errorf("%s: got %+v, want throughput %v p50 %v p99 %v", c.file, r, c.tput, c.p50, c.p99)
		}
	}
}

func near(a, b float64) bool { return a-b < 1e-6 && b-a < 1e-6 }

func TestParseErrors(t *testing.T) {
	if _, err := ParseMemcaslap([]byte("servers: 127.0.0.1:1\nconnect failed\n")); err == nil {
		t.Error("memcaslap without a result line parsed")
	}
	if _, err := ParseWrk([]byte("unable to connect to 127.0.0.1:18080 Connection refused\n")); err == nil {
		t.Error("wrk failure parsed")
	}
	if _, err := ParseFio([]byte("fio: pid=0, err=2/file:filesetup.c")); err == nil {
		t.Error("fio failure parsed")
	}
	if _, err := ParsePattern([]byte("x"), "(", "u"); err == nil {
		t.Error("bad pattern accepted")
	}
	if _, err := ParsePattern([]byte("x"), "x", "u"); err == nil {
		t.Error("pattern without group accepted")
	}
	r, err := ParsePattern([]byte("transactions: 1,234.5 per sec\n"), `transactions: ([0-9.,]+)`, "tps")
	if err != nil || r.Throughput != 1234.5 {
		t.Errorf("pattern: %+v %v", r, err)
	}
}

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
