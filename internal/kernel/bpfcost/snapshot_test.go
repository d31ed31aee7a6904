package bpfcost

import (
	"encoding/json"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// testdata/snapshot-{1,2}.json are two reads of the live maps one second
// apart (this machine, 2 CPUs), as Collector.Read returned them.
func loadSnap(t *testing.T, name string) *Snapshot {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	var s Snapshot
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return &s
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-12+1e-9*math.Abs(b) }

func TestDiffRecorded(t *testing.T) {
	a, b := loadSnap(t, "snapshot-1.json"), loadSnap(t, "snapshot-2.json")
	c, err := Diff(a, b)
	if err != nil {
		t.Fatal(err)
	}
	sec := float64(b.Clock-a.Clock) / 1e9
	if !near(c.Seconds, sec) || !cmp.Equal(c.CPUs, []int{0, 1}) || len(c.Absent) != 0 || len(c.Resets) != 0 {
		t.Fatalf("interval/CPUs: %+v", c)
	}
	// IRQ 42 appeared only in the second read: it counts from zero.
	if len(c.IRQs) != 1 || c.IRQs[0].IRQ != 42 {
		t.Fatalf("IRQs = %+v", c.IRQs)
	}
	want := float64(b.Hardirqs[0].TimeNs[1]) / 1e9 / sec
	if q := c.IRQs[0]; !near(q.PerCPU[1], want) || q.PerCPU[0] != 0 || !near(q.Time, want) || !near(q.Rate, float64(b.Hardirqs[0].Count[1])/sec) {
		t.Errorf("irq 42 = %+v, want %g s/s on CPU1", q, want)
	}
	if !near(c.Hardirq[1], want) {
		t.Errorf("CPU1 hardirq = %g, want %g", c.Hardirq[1], want)
	}
	// Every vector of every CPU, by its kernel name.
	for v := range VectorNames {
		for i, cpu := range b.CPUs {
			w := float64(b.Softirqs[v].TimeNs[i]-a.Softirqs[v].TimeNs[i]) / 1e9 / sec
			if got := c.Softirq[cpu][VectorNames[v]]; !near(got, w) {
				t.Errorf("CPU%d %s = %g, want %g", cpu, VectorNames[v], got, w)
			}
		}
	}
	if c.Softirq[1]["TIMER"] <= 0 {
		t.Errorf("CPU1 TIMER time = 0 in a live recording")
	}
}

func TestDiffCounterWrap(t *testing.T) {
	a, b := loadSnap(t, "snapshot-1.json"), loadSnap(t, "snapshot-2.json")
	sec := float64(b.Clock-a.Clock) / 1e9
	// TIMER on CPU0 wrapped past 2^64: 1000 ns before the wrap, 500 after.
	a.Softirqs[1].TimeNs[0] = math.MaxUint64 - 999
	b.Softirqs[1].TimeNs[0] = 500
	// RCU on CPU1 went far backwards: a reset, not a wrap.
	a.Softirqs[9].TimeNs[1] = 1 << 40
	b.Softirqs[9].TimeNs[1] = 7
	c, err := Diff(a, b)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Softirq[0]["TIMER"]; !near(got, 1500/1e9/sec) {
		t.Errorf("wrapped TIMER = %g, want %g", got, 1500/1e9/sec)
	}
	if got := c.Softirq[1]["RCU"]; got != 0 {
		t.Errorf("reset RCU = %g, want 0", got)
	}
	if len(c.Resets) != 1 || !strings.HasPrefix(c.Resets[0], "RCU time CPU1") {
		t.Errorf("Resets = %q, want the RCU reset only", c.Resets)
	}
}

func TestDiffCPUOffline(t *testing.T) {
	a, b := loadSnap(t, "snapshot-1.json"), loadSnap(t, "snapshot-2.json")
	// CPU0 went offline before the second read: its column is gone, and
	// CPU1's values are now in column 0.
	b.CPUs = []int{1}
	for i := range b.Softirqs {
		b.Softirqs[i].TimeNs = b.Softirqs[i].TimeNs[1:]
		b.Softirqs[i].Count = b.Softirqs[i].Count[1:]
	}
	for i := range b.Hardirqs {
		b.Hardirqs[i].TimeNs = b.Hardirqs[i].TimeNs[1:]
		b.Hardirqs[i].Count = b.Hardirqs[i].Count[1:]
	}
	full, err := Diff(loadSnap(t, "snapshot-1.json"), loadSnap(t, "snapshot-2.json"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := Diff(a, b)
	if err != nil {
		t.Fatal(err)
	}
	if !cmp.Equal(c.CPUs, []int{1}) || !cmp.Equal(c.Absent, []int{0}) {
		t.Fatalf("CPUs %v absent %v, want [1] and [0]", c.CPUs, c.Absent)
	}
	if _, ok := c.Softirq[0]; ok {
		t.Errorf("offline CPU0 has softirq times")
	}
	for _, v := range VectorNames {
		if c.Softirq[1][v] != full.Softirq[1][v] {
			t.Errorf("CPU1 %s = %g after CPU0 left, %g before: matched by column, not id", v, c.Softirq[1][v], full.Softirq[1][v])
		}
	}
	if c.Hardirq[1] != full.Hardirq[1] {
		t.Errorf("CPU1 hardirq %g, want %g", c.Hardirq[1], full.Hardirq[1])
	}
	// And back online: CPU0 in the second read only.
	b.Clock = a.Clock + 1
	if c, err = Diff(b, loadSnap(t, "snapshot-2.json")); err != nil {
		t.Fatal(err)
	}
	if !cmp.Equal(c.CPUs, []int{1}) || !cmp.Equal(c.Absent, []int{0}) {
		t.Errorf("CPU coming online: CPUs %v absent %v", c.CPUs, c.Absent)
	}
}

func TestDiffNAPI(t *testing.T) {
	a, b := loadSnap(t, "snapshot-1.json"), loadSnap(t, "snapshot-2.json")
	sec := float64(b.Clock-a.Clock) / 1e9
	a.NAPI = []NAPICounters{{Dev: "veth1", NAPIID: 0, Polls: []uint64{10, 0}, Work: []uint64{100, 0}, Exhausted: []uint64{1, 0}}}
	b.NAPI = []NAPICounters{
		{Dev: "veth1", NAPIID: 0, Polls: []uint64{20, 5}, Work: []uint64{740, 64}, Exhausted: []uint64{11, 1}},
		{Dev: "eth0", NAPIID: 8193, Polls: []uint64{0, 0}, Work: []uint64{0, 0}, Exhausted: []uint64{0, 0}}, // idle: left out
	}
	c, err := Diff(a, b)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.NAPI) != 1 {
		t.Fatalf("NAPI = %+v", c.NAPI)
	}
	n := c.NAPI[0]
	if n.Dev != "veth1" || !near(n.Polls, 15/sec) || !near(n.Packets, 704/sec) || !near(n.Exhausted, 11/sec) || !cmp.Equal(n.CPUs, []int{0, 1}) {
		t.Errorf("veth1 = %+v", n)
	}
	if !near(n.PollsPerCPU[0], 10/sec) || !near(n.PollsPerCPU[1], 5/sec) || len(n.PollsPerCPU) != 2 {
		t.Errorf("veth1 polls per CPU %v, want 0: %g, 1: %g", n.PollsPerCPU, 10/sec, 5/sec)
	}
}

func TestDiffRefuses(t *testing.T) {
	a, b := loadSnap(t, "snapshot-1.json"), loadSnap(t, "snapshot-2.json")
	if _, err := Diff(b, a); err == nil {
		t.Error("backwards interval accepted")
	}
	b.Boot++
	if _, err := Diff(a, b); err == nil || !strings.Contains(err.Error(), "different collector") {
		t.Errorf("snapshots of two collectors: %v", err)
	}
}
