package agent

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/irqpilot/irqpilot/internal/kernel"
)

// The agent's steady-state cost on this machine at a 1 s interval: it
// enforces one IRQ's affinity, samples load and computes findings every
// pass. Each op is one second of the agent running in this process;
// cpu-%/op is the process's CPU time over that second (the target is
// ≤ 0.2 % of one CPU). Run with -benchtime 10x or more.
func BenchmarkSteadyState1s(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root")
	}
	fs := kernel.New("/")
	irq, cur := -1, ""
	for _, n := range []int{24, 25, 26} { // ACPI / serial on the CI machine; left at their value
		if v, err := fs.ReadString(fmt.Sprintf("proc/irq/%d/smp_affinity_list", n)); err == nil {
			irq, cur = n, v
			break
		}
	}
	text := "version: 1\n"
	if irq >= 0 {
		text += fmt.Sprintf("irqs:\n  - irq: %d\n    cpus: \"%s\"\n    reason: \"bench, its current value, nothing changes\"\n", irq, cur)
	}
	ag, err := New(Options{FS: fs, StateDir: stateDir(b), PlanFile: writePlan(b, text), Interval: time.Second, Log: quiet()})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ag.Run(ctx) }()
	time.Sleep(1500 * time.Millisecond) // first pass and its host read
	var r0, r1 unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &r0)
	t0 := time.Now()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		time.Sleep(time.Second)
	}
	b.StopTimer()
	unix.Getrusage(unix.RUSAGE_SELF, &r1)
	wall := time.Since(t0)
	cpu := time.Duration(r1.Utime.Nano() + r1.Stime.Nano() - r0.Utime.Nano() - r0.Stime.Nano())
	b.ReportMetric(100*cpu.Seconds()/wall.Seconds(), "cpu-%")
	b.ReportMetric(float64(cpu.Microseconds())/1000/wall.Seconds(), "cpu-ms/s")
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}
