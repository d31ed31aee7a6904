package bpfcost_test

import (
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/kernel/bpfcost"
	"github.com/irqpilot/irqpilot/internal/livetest"
)

// bpftoolCount is how many BPF programs (what="prog") or links are loaded.
func bpftoolCount(t *testing.T, what string) int {
	t.Helper()
	out, err := exec.Command("bpftool", "-j", what, "show").Output()
	if err != nil {
		t.Fatalf("bpftool %s show: %v", what, err)
	}
	var l []json.RawMessage
	if err := json.Unmarshal(out, &l); err != nil {
		t.Fatalf("bpftool %s show: %v: %.200s", what, err, out)
	}
	return len(l)
}

func counters(t *testing.T) (*kernel.Softirqs, *kernel.Interrupts) {
	t.Helper()
	live := kernel.New("/")
	sq, err := live.Softirqs()
	if err != nil {
		t.Fatal(err)
	}
	in, err := live.Interrupts()
	if err != nil {
		t.Fatal(err)
	}
	return sq, in
}

// udpFlood sends UDP datagrams over a veth pair into a network namespace
// created (and deleted) here, for d. Every datagram is received by the
// peer in NET_RX softirq.
func udpFlood(t *testing.T, d time.Duration) {
	t.Helper()
	ns := livetest.Netns(t, livetest.Name("irqp-bpf-"))
	host, peer := livetest.Name("ibh"), livetest.Name("ibp")
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", host).Run() })
	for _, args := range [][]string{
		{"ip", "link", "add", host, "type", "veth", "peer", "name", peer, "netns", ns},
		{"ip", "addr", "add", "10.251.77.1/30", "dev", host},
		{"ip", "link", "set", host, "up"},
		{"ip", "-n", ns, "addr", "add", "10.251.77.2/30", "dev", peer},
		{"ip", "-n", ns, "link", "set", peer, "up"},
	} {
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v: %s", args, err, out)
		}
	}
	c, err := net.DialUDP("udp4", &net.UDPAddr{IP: net.IPv4(10, 251, 77, 1)}, &net.UDPAddr{IP: net.IPv4(10, 251, 77, 2), Port: 9})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 64)
	for end := time.Now().Add(d); time.Now().Before(end); {
		for i := 0; i < 256; i++ {
			_, _ = c.Write(buf) // refusals (ICMP port unreachable) are fine: the datagram was received
		}
	}
}

// fsyncs writes and fsyncs a file on the disk the test runs from (not
// tmpfs) n times, so the disk interrupts.
func fsyncs(t *testing.T, n int) {
	t.Helper()
	wd, _ := os.Getwd()
	f, err := os.CreateTemp(wd, ".bpfcost-fsync-*")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close(); os.Remove(f.Name()) })
	buf := make([]byte, 4096)
	for i := 0; i < n; i++ {
		if _, err := f.WriteAt(buf, int64(i%16)*4096); err != nil {
			t.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
}

// Live, as root: load the programs, make NET_RX and disk interrupts, and
// find their time on the CPUs whose counts rose; after Close no program
// or link is left.
func TestLiveCollector(t *testing.T) {
	livetest.NeedRoot(t, "bpftool", "ip")
	if err := bpfcost.Check(); err != nil {
		t.Skipf("eBPF unavailable here: %v", err)
	}
	progs0, links0 := bpftoolCount(t, "prog"), bpftoolCount(t, "link")
	h, err := host.Read(kernel.New("/"), host.Options{})
	if err != nil {
		t.Fatal(err)
	}
	disk := map[int]bool{}
	for _, q := range h.IRQs {
		if q.Class == host.ClassStorage {
			disk[q.Number] = true
		}
	}
	if len(disk) == 0 {
		t.Skip("no storage IRQ in the host model (disk without its own interrupt?)")
	}

	c, err := bpfcost.Open()
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			c.Close()
		}
	})
	if n := bpftoolCount(t, "prog"); n != progs0+5 {
		t.Errorf("%d programs loaded with the collector, want %d+5", n, progs0)
	}
	sq0, in0 := counters(t)
	a, err := c.Read()
	if err != nil {
		t.Fatal(err)
	}
	udpFlood(t, 700*time.Millisecond)
	fsyncs(t, 40)
	b, err := c.Read()
	if err != nil {
		t.Fatal(err)
	}
	sq1, in1 := counters(t)
	cost, err := bpfcost.Diff(a, b)
	if err != nil {
		t.Fatal(err)
	}

	// NET_RX: every CPU whose count rose by at least 10 has time.
	rx := -1
	for i, ty := range sq1.Types {
		if ty == "NET_RX" {
			rx = i
		}
	}
	rose := 0
	for col, cpu := range sq1.CPUs {
		d := sq1.Counts[rx][col] - sq0.Counts[rx][col]
		if d < 10 {
			continue
		}
		rose++
		if got := cost.Softirq[cpu]["NET_RX"]; got <= 0 {
			t.Errorf("CPU%d: %d NET_RX softirqs but no NET_RX time measured", cpu, d)
		} else {
			t.Logf("CPU%d: %d NET_RX softirqs, %.3f ms/s", cpu, d, 1000*got)
		}
	}
	if rose == 0 {
		t.Fatal("the UDP flood raised no CPU's NET_RX count")
	}
	// Disk IRQs: every CPU where a storage IRQ's count rose has its time.
	prev := map[string][]uint64{}
	for _, l := range in0.Lines {
		prev[l.Name] = l.Counts
	}
	byIRQ := map[int]bpfcost.IRQCost{}
	for _, q := range cost.IRQs {
		byIRQ[q.IRQ] = q
	}
	diskRose := 0
	for _, l := range in1.Lines {
		if !disk[l.IRQ] {
			continue
		}
		for col, cpu := range in1.CPUs {
			if col >= len(l.Counts) || col >= len(prev[l.Name]) || l.Counts[col] <= prev[l.Name][col] {
				continue
			}
			diskRose++
			if got := byIRQ[l.IRQ].PerCPU[cpu]; got <= 0 {
				t.Errorf("irq %d on CPU%d: %d interrupts but no time measured", l.IRQ, cpu, l.Counts[col]-prev[l.Name][col])
			} else {
				t.Logf("irq %d (disk) on CPU%d: %d interrupts, %.3f ms/s", l.IRQ, cpu, l.Counts[col]-prev[l.Name][col], 1000*got)
			}
		}
	}
	if diskRose == 0 {
		t.Fatal("fsync raised no storage IRQ count")
	}
	if cost.Lost != 0 {
		t.Errorf("%d events lost (map full)", cost.Lost)
	}

	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	closed = true
	// The kernel frees a tracing program after an RCU grace period (tasks
	// trace RCU), so the count drops shortly after Close, not at once.
	var p, l int
	for i := 0; i < 100; i++ {
		if p, l = bpftoolCount(t, "prog"), bpftoolCount(t, "link"); p == progs0 && l == links0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if p != progs0 || l != links0 {
		t.Errorf("after Close: %d programs and %d links, before: %d and %d", p, l, progs0, links0)
	}
}
