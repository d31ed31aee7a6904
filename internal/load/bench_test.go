package load

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/irqpilot/irqpilot/internal/kernel"
)

// writeBigHost writes the sampler's files for a 256-CPU host with 400
// numbered IRQs (2 NICs × 64 queues, 1 NVMe × 128 queues, the rest
// misc) and the x86 summary rows; seed varies the counts.
func writeBigHost(tb testing.TB, dir string, ncpu, nirq int, seed uint64) {
	tb.Helper()
	must := func(err error) {
		if err != nil {
			tb.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "proc/net"), 0o755))
	v := func(i, j int) uint64 { return (uint64(i*7919+j*104729)+seed)%1000000 + seed*10 }
	var b strings.Builder
	fmt.Fprintf(&b, "cpu  1 2 3 4 5 6 7 8 0 0\n")
	for c := 0; c < ncpu; c++ {
		fmt.Fprintf(&b, "cpu%d %d 0 %d %d %d %d %d 0 0 0\n", c, v(c, 1), v(c, 2), v(c, 3)*10, v(c, 4), v(c, 5), v(c, 6))
	}
	fmt.Fprintf(&b, "intr 123")
	for i := 0; i < nirq+200; i++ {
		fmt.Fprintf(&b, " %d", v(i, 9))
	}
	fmt.Fprintf(&b, "\nctxt 1\nbtime 1\nprocesses 1\nprocs_running 1\nprocs_blocked 0\nsoftirq 1 1 1 1 1 1 1 1 1 1 1\n")
	must(os.WriteFile(filepath.Join(dir, "proc/stat"), []byte(b.String()), 0o644))

	b.Reset()
	b.WriteString("      ")
	for c := 0; c < ncpu; c++ {
		fmt.Fprintf(&b, " CPU%-8d", c)
	}
	b.WriteString("\n")
	for i := 0; i < nirq; i++ {
		fmt.Fprintf(&b, "%4d:", 24+i)
		for c := 0; c < ncpu; c++ {
			fmt.Fprintf(&b, " %10d", v(i, c))
		}
		switch {
		case i < 128:
			fmt.Fprintf(&b, "  IR-PCI-MSIX-0000:3b:00.%d %d-edge      eth%d-TxRx-%d\n", i/64, i, i/64, i%64)
		case i < 256:
			fmt.Fprintf(&b, "  IR-PCI-MSIX-0000:5e:00.0 %d-edge      nvme0q%d\n", i, i-127)
		default:
			fmt.Fprintf(&b, "  IR-IO-APIC   %d-fasteoi   misc%d\n", i, i)
		}
	}
	for _, row := range []string{"NMI:Non-maskable interrupts", "LOC:Local timer interrupts", "SPU:Spurious interrupts", "PMI:Performance monitoring interrupts", "IWI:IRQ work interrupts", "RTR:APIC ICR read retries", "RES:Rescheduling interrupts", "CAL:Function call interrupts", "TLB:TLB shootdowns", "TRM:Thermal event interrupts", "THR:Threshold APIC interrupts", "DFR:Deferred Error APIC interrupts", "MCE:Machine check exceptions", "MCP:Machine check polls"} {
		name, desc, _ := strings.Cut(row, ":")
		fmt.Fprintf(&b, "%s:", name)
		for c := 0; c < ncpu; c++ {
			fmt.Fprintf(&b, " %10d", v(len(name), c))
		}
		fmt.Fprintf(&b, "   %s\n", desc)
	}
	b.WriteString("ERR:          0\nMIS:          0\n")
	must(os.WriteFile(filepath.Join(dir, "proc/interrupts"), []byte(b.String()), 0o644))

	b.Reset()
	b.WriteString("                    ")
	for c := 0; c < ncpu; c++ {
		fmt.Fprintf(&b, "CPU%-8d", c)
	}
	b.WriteString("\n")
	for t, name := range []string{"HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER", "RCU"} {
		fmt.Fprintf(&b, "%12s:", name)
		for c := 0; c < ncpu; c++ {
			fmt.Fprintf(&b, " %10d", v(t, c))
		}
		b.WriteString("\n")
	}
	must(os.WriteFile(filepath.Join(dir, "proc/softirqs"), []byte(b.String()), 0o644))

	b.Reset()
	for c := 0; c < ncpu; c++ {
		fmt.Fprintf(&b, "%08x %08x %08x 00000000 00000000 00000000 00000000 00000000 00000000 %08x 00000000 00000000 %08x 00000000 00000000\n",
			uint32(v(c, 1)), uint32(v(c, 2)%10), uint32(v(c, 3)%100), uint32(v(c, 4)), c)
	}
	must(os.WriteFile(filepath.Join(dir, "proc/net/softnet_stat"), []byte(b.String()), 0o644))
	must(os.WriteFile(filepath.Join(dir, "proc/net/dev"), []byte(fmt.Sprintf(
		"Inter-|   Receive\n face |bytes    packets errs\n    lo: 0 %d 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n  eth0: 0 %d 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n", seed, 100*seed)), 0o644))
	must(os.WriteFile(filepath.Join(dir, "proc/uptime"), []byte(fmt.Sprintf("%d.00 1.00\n", 1000+seed)), 0o644))
}

// One full step as top/record run it: read every counter file, parse, and
// turn the pair into rates.
func benchStep(b *testing.B, fs *kernel.FS, prev *Sample) {
	s := NewSampler(fs)
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime(b)
	defer func() {
		// Process CPU time (user+system, all threads incl. GC) per step:
		// the number that matters for a sampler running every second.
		b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N), "cpu-ns/op")
	}()
	for i := 0; i < b.N; i++ {
		cur, err := s.Sample()
		if err != nil {
			b.Fatal(err)
		}
		if prev != nil && prev.ClockSource == cur.ClockSource && cur.Clock > prev.Clock {
			if _, err := Rates(prev, cur); err != nil {
				b.Fatal(err)
			}
		}
		prev = cur
	}
}

func cpuTime(tb testing.TB) int64 {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

func BenchmarkSampleRates256CPU(b *testing.B) {
	dir := b.TempDir()
	writeBigHost(b, filepath.Join(dir, "a"), 256, 400, 1)
	writeBigHost(b, filepath.Join(dir, "b"), 256, 400, 2)
	prev, err := NewSampler(kernel.New(filepath.Join(dir, "a"))).Sample()
	if err != nil {
		b.Fatal(err)
	}
	benchStep(b, kernel.New(filepath.Join(dir, "b")), prev)
}

func BenchmarkSampleRatesLive(b *testing.B) {
	if _, err := os.Stat("/proc/net/softnet_stat"); err != nil {
		b.Skip(err)
	}
	benchStep(b, kernel.New("/"), nil)
}

// The 256-CPU generator must produce files the sampler reads whole.
func TestBigHostSample(t *testing.T) {
	dir := t.TempDir()
	writeBigHost(t, filepath.Join(dir, "a"), 256, 400, 1)
	writeBigHost(t, filepath.Join(dir, "b"), 256, 400, 2)
	a, err := NewSampler(kernel.New(filepath.Join(dir, "a"))).Sample()
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewSampler(kernel.New(filepath.Join(dir, "b"))).Sample()
	if err != nil {
		t.Fatal(err)
	}
	l, err := Rates(a, b)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.CPUs) != 256 || len(l.IRQs) != 400 || len(l.Softnet) != 256 || l.Softnet[255].CPU != 255 || len(a.Unavailable) != 0 {
		t.Fatalf("cpus %d irqs %d softnet %d unavailable %v", len(l.CPUs), len(l.IRQs), len(l.Softnet), a.Unavailable)
	}
	if l.NetDevRx["eth0"] != 100 || l.NetDevRx["lo"] != 1 {
		t.Errorf("received packets per second %v, want eth0 100 and lo 1 (seeds 1 and 2, one second apart)", l.NetDevRx)
	}
	// Every count grew by 11 between the two seeds (1 + 10): 11/s.
	if r := l.IRQ(24).PerCPU[255]; r != 11 {
		t.Errorf("irq 24 CPU255 %v/s, want 11", r)
	}
	if l.Interval.Seconds() != 1 {
		t.Errorf("interval %v", l.Interval)
	}
}
