package bench

import (
	"os"
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
