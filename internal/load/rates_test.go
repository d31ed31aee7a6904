package load

import (
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/irqpilot/irqpilot/internal/kernel"
)

// pair samples testdata/<name>/{a,b} through the real Sampler.
func pair(t *testing.T, name string) (*Sample, *Sample, *Load) {
	t.Helper()
	var s [2]*Sample
	for i, d := range []string{"a", "b"} {
		smp, err := NewSampler(kernel.New(filepath.Join("testdata", name, d))).Sample()
		if err != nil {
			t.Fatalf("%s/%s: %v", name, d, err)
		}
		if smp.ClockSource != ClockUptime {
			t.Fatalf("%s/%s: clock %q, want uptime", name, d, smp.ClockSource)
		}
		s[i] = smp
	}
	l, err := Rates(s[0], s[1])
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return s[0], s[1], l
}

// The oracle below reads the captured files with nothing but strings.Fields,
// independently of procfs and of the parsers under test.

func fileFields(t *testing.T, path, prefix string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) > 0 && f[0] == prefix {
			return f[1:]
		}
	}
	t.Fatalf("%s: no line %q", path, prefix)
	return nil
}

func nums(t *testing.T, f []string, base int) []float64 {
	t.Helper()
	out := make([]float64, len(f))
	for i, s := range f {
		v, err := strconv.ParseUint(s, base, 64)
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		out[i] = float64(v)
	}
	return out
}

func uptime(t *testing.T, dir string) float64 {
	b, err := os.ReadFile(filepath.Join(dir, "proc/uptime"))
	if err != nil {
		t.Fatal(err)
	}
	v, err := strconv.ParseFloat(strings.Fields(string(b))[0], 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// oracleCPU returns mpstat-style percentages of cpuN from the raw lines:
// user, nice, system, idle, iowait, irq, softirq, steal.
func oracleCPU(t *testing.T, name string, cpu int) []float64 {
	a := nums(t, fileFields(t, filepath.Join("testdata", name, "a/proc/stat"), "cpu"+strconv.Itoa(cpu)), 10)
	b := nums(t, fileFields(t, filepath.Join("testdata", name, "b/proc/stat"), "cpu"+strconv.Itoa(cpu)), 10)
	d := make([]float64, len(a))
	total := 0.0
	for i := range a {
		d[i] = b[i] - a[i]
		if i < 8 {
			total += d[i]
		}
	}
	out := make([]float64, 8)
	for i := range out {
		out[i] = 100 * d[i] / total
	}
	out[0] = 100 * (d[0] - d[8]) / total
	out[1] = 100 * (d[1] - d[9]) / total
	return out
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-6*math.Max(1, math.Abs(b)) }

func checkCPU(t *testing.T, name string, l *Load, id int) {
	t.Helper()
	want := oracleCPU(t, name, id)
	c := l.CPU(id)
	if c == nil {
		t.Fatalf("%s: CPU%d missing", name, id)
	}
	got := []float64{c.User, c.Nice, c.System, c.Idle, c.IOWait, c.IRQ, c.SoftIRQ, c.Steal}
	names := []string{"user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal"}
	sum := 0.0
	for i := range got {
		sum += got[i]
		if !near(got[i], want[i]) {
			t.Errorf("%s CPU%d %%%s = %.4f, want %.4f", name, id, names[i], got[i], want[i])
		}
	}
	if !near(sum+c.Guest+c.GuestNice, 100) {
		t.Errorf("%s CPU%d: percentages sum to %.4f", name, id, sum)
	}
}

func TestRatesStressCPU(t *testing.T) {
	_, _, l := pair(t, "stress-cpu")
	dt := uptime(t, "testdata/stress-cpu/b") - uptime(t, "testdata/stress-cpu/a")
	if math.Abs(l.Interval.Seconds()-dt) > 1e-6 {
		t.Errorf("interval %v, want %.2fs from /proc/uptime", l.Interval, dt)
	}
	if len(l.CPUs) != 2 || len(l.Absent) != 0 || len(l.Resets) != 0 {
		t.Fatalf("cpus %d absent %v resets %v", len(l.CPUs), l.Absent, l.Resets)
	}
	checkCPU(t, "stress-cpu", l, 0)
	checkCPU(t, "stress-cpu", l, 1)
	// The capture itself: stress-ng kept CPU1 busy in user space, CPU0 idle.
	if c := l.CPU(1); c.User < 90 || c.Idle > 5 {
		t.Errorf("CPU1 under stress-ng: user %.1f idle %.1f", c.User, c.Idle)
	}
	if c := l.CPU(0); c.Idle < 90 {
		t.Errorf("CPU0 should be idle: %.1f", c.Idle)
	}
}

func TestRatesUDPLoopback(t *testing.T) {
	_, _, l := pair(t, "udp-loopback")
	checkCPU(t, "udp-loopback", l, 0)
	checkCPU(t, "udp-loopback", l, 1)
	dt := uptime(t, "testdata/udp-loopback/b") - uptime(t, "testdata/udp-loopback/a")
	ra := nums(t, fileFields(t, "testdata/udp-loopback/a/proc/softirqs", "NET_RX:"), 10)
	rb := nums(t, fileFields(t, "testdata/udp-loopback/b/proc/softirqs", "NET_RX:"), 10)
	for cpu := 0; cpu < 2; cpu++ {
		want := (rb[cpu] - ra[cpu]) / dt
		if got := l.CPU(cpu).NetRx; !near(got, want) || got < 10000 {
			t.Errorf("CPU%d NET_RX %.1f/s, want %.1f/s", cpu, got, want)
		}
		if got := l.CPU(cpu).Softirqs["NET_RX"]; got != l.CPU(cpu).NetRx {
			t.Errorf("CPU%d Softirqs[NET_RX] %v != NetRx %v", cpu, got, l.CPU(cpu).NetRx)
		}
	}
	// softnet processed per CPU, by the CPU column of the 15-column rows.
	sa := readSoftnet(t, "testdata/udp-loopback/a/proc/net/softnet_stat")
	sb := readSoftnet(t, "testdata/udp-loopback/b/proc/net/softnet_stat")
	if len(l.Softnet) != 2 {
		t.Fatalf("softnet rows %d", len(l.Softnet))
	}
	for i, r := range l.Softnet {
		cpu := int(sb[i][12])
		want := (sb[i][0] - sa[i][0]) / dt
		if r.CPU != cpu || !near(r.Processed, want) {
			t.Errorf("softnet row %d: cpu %d processed %.1f, want cpu %d %.1f", i, r.CPU, r.Processed, cpu, want)
		}
	}
	// Summary rows: RES per CPU.
	resA := nums(t, fileFields(t, "testdata/udp-loopback/a/proc/interrupts", "RES:")[:2], 10)
	resB := nums(t, fileFields(t, "testdata/udp-loopback/b/proc/interrupts", "RES:")[:2], 10)
	res := l.SummaryRow("RES")
	if res == nil || res.IRQ != -1 {
		t.Fatalf("RES row: %+v", res)
	}
	for cpu := 0; cpu < 2; cpu++ {
		want := (resB[cpu] - resA[cpu]) / dt
		if !near(res.PerCPU[cpu], want) || !near(l.CPU(cpu).Reschedule, want) {
			t.Errorf("CPU%d RES %.1f (cpu field %.1f), want %.1f", cpu, res.PerCPU[cpu], l.CPU(cpu).Reschedule, want)
		}
	}
	// A numbered IRQ: 41 (virtio3-rx) fired on CPU0 only.
	q := l.IRQ(41)
	if q == nil || q.Name != "41" || q.CPUs.String() != "0" || !near(q.Rate, 6/dt) || len(q.Actions) != 1 || q.Actions[0] != "virtio3-rx" {
		t.Errorf("irq 41: %+v", q)
	}
}

func readSoftnet(t *testing.T, path string) [][]float64 {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rows [][]float64
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		rows = append(rows, nums(t, strings.Fields(l), 16))
	}
	return rows
}

func TestRatesCounterWrap(t *testing.T) {
	_, _, real := pair(t, "udp-loopback")
	_, _, wrapped := pair(t, "counter-wrap")
	if len(wrapped.Resets) != 2 {
		t.Fatalf("resets %+v, want the two wraps", wrapped.Resets)
	}
	for _, r := range wrapped.Resets {
		if !r.Wrapped || r.CPU != 0 || r.Prev < 1<<31 || r.Cur > r.Prev {
			t.Errorf("reset %+v should be a wrap on CPU0", r)
		}
	}
	if got, want := wrapped.Softnet[0].Processed, real.Softnet[0].Processed; !near(got, want) || want <= 0 {
		t.Errorf("wrapped softnet processed %.2f, real %.2f", got, want)
	}
	if got, want := wrapped.SummaryRow("RES").PerCPU[0], real.SummaryRow("RES").PerCPU[0]; !near(got, want) || want <= 0 {
		t.Errorf("wrapped RES %.2f, real %.2f", got, want)
	}
	if got, want := wrapped.CPU(0).Reschedule, real.CPU(0).Reschedule; !near(got, want) {
		t.Errorf("CPU0 reschedule %.2f, real %.2f", got, want)
	}
}

func TestRatesCounterReset(t *testing.T) {
	_, _, real := pair(t, "disk-io")
	_, _, l := pair(t, "counter-reset")
	if real.IRQ(36).PerCPU[1] < 100 || real.CPU(1).Block < 100 {
		t.Fatalf("capture should show disk IRQs on CPU1: irq36 %.0f/s BLOCK %.0f/s", real.IRQ(36).PerCPU[1], real.CPU(1).Block)
	}
	if q := l.IRQ(36); q.Rate != 0 || q.PerCPU[1] != 0 || !q.CPUs.IsEmpty() {
		t.Errorf("reset irq 36: rate %v per cpu %v", q.Rate, q.PerCPU)
	}
	if b := l.CPU(1).Block; b != 0 {
		t.Errorf("reset BLOCK on CPU1: %v/s", b)
	}
	want := map[string]bool{"interrupts/irq 36": false, "softirqs/BLOCK": false}
	for _, r := range l.Resets {
		k := r.Source + "/" + r.Counter
		if _, ok := want[k]; !ok || r.CPU != 1 || r.Wrapped || r.Cur >= r.Prev {
			t.Errorf("unexpected reset %+v", r)
		}
		want[k] = true
	}
	for k, seen := range want {
		if !seen {
			t.Errorf("reset of %s not flagged", k)
		}
	}
	// Everything else is untouched by the reset.
	for _, q := range real.IRQs {
		if q.IRQ != 36 && !near(l.IRQ(q.IRQ).Rate, q.Rate) {
			t.Errorf("irq %d rate %v, real %v", q.IRQ, l.IRQ(q.IRQ).Rate, q.Rate)
		}
	}
	checkCPU(t, "counter-reset", l, 1)
}

func TestRatesCPUOffline(t *testing.T) {
	_, _, l := pair(t, "cpu-offline")
	if len(l.CPUs) != 1 || l.CPUs[0].ID != 0 || len(l.Absent) != 1 || l.Absent[0] != 1 {
		t.Fatalf("cpus %+v absent %v", l.CPUs, l.Absent)
	}
	if len(l.Resets) != 0 {
		t.Errorf("a CPU going offline is not a reset: %+v", l.Resets)
	}
	checkCPU(t, "cpu-offline", l, 0)
	for _, q := range append(l.IRQs, l.Summary...) {
		if _, ok := q.PerCPU[1]; ok {
			t.Errorf("%s has a rate for the offline CPU1", q.Name)
		}
		if q.CPUs.Contains(1) {
			t.Errorf("%s lands on the offline CPU1", q.Name)
		}
	}
	if len(l.Softnet) != 1 || l.Softnet[0].CPU != 0 {
		t.Errorf("softnet %+v", l.Softnet)
	}
	if _, ok := l.CPU(0).Softirqs["SCHED"]; !ok {
		t.Errorf("CPU0 softirqs missing")
	}
}

func TestRatesErrors(t *testing.T) {
	a, b, _ := pair(t, "stress-cpu")
	if _, err := Rates(b, a); err == nil || !strings.Contains(err.Error(), "positive interval") {
		t.Errorf("reversed samples: %v", err)
	}
	c := *b
	c.ClockSource = ClockMonotonic
	if _, err := Rates(a, &c); err == nil {
		t.Error("mixed clocks accepted")
	}
	if _, err := Rates(nil, a); err == nil {
		t.Error("nil sample accepted")
	}
}

func TestDelta32(t *testing.T) {
	for _, c := range []struct {
		prev, cur, d uint64
		ok, wrapped  bool
	}{
		{10, 15, 5, true, false},
		{15, 15, 0, true, false},
		{1<<32 - 10, 5, 15, true, true},
		{1<<32 - 1, 0, 1, true, true},
		{1000000, 10, 0, false, false}, // reset: modular delta ~4.29e9
		{1 << 31, 0, 0, false, false},  // exactly half range: reset
		{1 << 40, 5, 0, false, false},  // not a 32-bit value
	} {
		d, ok, w := delta32(c.prev, c.cur)
		if d != c.d || ok != c.ok || w != c.wrapped {
			t.Errorf("delta32(%d,%d) = %d,%v,%v want %d,%v,%v", c.prev, c.cur, d, ok, w, c.d, c.ok, c.wrapped)
		}
	}
}

// Old kernels (before 5.10, commit 7d58e6555870) print no CPU column and
// skip offline CPUs: the rows belong to the online CPUs in order.
func TestSoftnetRowsWithoutCPUColumn(t *testing.T) {
	rows := readSoftnetRows(t, "../../../shared/fixtures/node_exporter")
	if len(rows) != 4 || rows[0].Columns != 11 {
		t.Fatalf("fixture changed: %d rows, width %d", len(rows), rows[0].Columns)
	}
	online := []int{0, 2, 5, 7} // CPUs 1, 3, 4 and 6 offline
	got, err := softnetRows(rows, online)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range online {
		if got[i].CPU != want || got[i].Processed != rows[i].Processed || got[i].Columns != 11 {
			t.Errorf("row %d: %+v, want CPU%d processed %d", i, got[i], want, rows[i].Processed)
		}
	}
	if _, err := softnetRows(rows, []int{0, 1}); err == nil || !strings.Contains(err.Error(), "4 rows") {
		t.Errorf("row/CPU mismatch: %v", err)
	}
	// 13-column rows carry the CPU id; the online list is not used.
	rows2 := readSoftnetRows(t, "../../../shared/fixtures/procfs")
	for i, r := range rows2 {
		if r.Columns >= 13 {
			got, err := softnetRows(rows2[i:i+1], nil)
			if err != nil || got[0].CPU != r.CPU {
				t.Errorf("13-column row %d: %+v %v", i, got, err)
			}
		}
	}
}

// readSoftnetRows reads proc/net/softnet_stat below root.
func readSoftnetRows(t *testing.T, root string) []kernel.SoftnetStat {
	t.Helper()
	rows, err := kernel.New(root).Softnet()
	if err != nil {
		t.Fatal(err)
	}
	return rows
}
