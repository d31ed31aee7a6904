package bench

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/irqpilot/irqpilot/internal/bench/testbed"
	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/setting"
)

func TestParseUDPCaptured(t *testing.T) {
	// The udp-send helper's line from a 2 s run on this machine (sender on
	// CPU 0, sink on CPU 1, single-queue veth).
	r, err := ParseUDP(read(t, "udp-send.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Unit != "dgram/s" || r.Throughput != udpCapturedRate {
		t.Errorf("got %+v, want %v dgram/s", r, udpCapturedRate)
	}
	if _, err := ParseUDP([]byte("udp-send: connection refused\n")); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("error output: %v", err)
	}
}

// TestUDPWorkloadShort runs the udp workload (RPS/RFS on a single-queue NIC's scenario: sender
// pinned to CPU 0, one queue) for default and for RPS to CPU 1 only, one
// round of 2 s each. RPS off CPU 0 must take CPU 0's softirq share down;
// the sink and the testbed must be gone afterwards and the machine
// restored.
func TestUDPWorkloadShort(t *testing.T) {
	_, rep, tbDir := udpScenario(t, 1, "default", "spec:app=0,rps=1")
	if rep.Scope == nil || !strings.HasPrefix(rep.Scope.NetDevice, "vs") || len(rep.Scope.IRQs) != 0 {
		t.Errorf("scope %+v", rep.Scope)
	}
	for _, run := range rep.Runs {
		if run.Error != "" || run.Throughput <= 0 || run.Unit != "dgram/s" || len(run.CPUs) < 2 {
			t.Fatalf("run %+v", run)
		}
	}
	base, moved := rep.Runs[0].CPUs[0].SoftIRQ, rep.Runs[1].CPUs[0].SoftIRQ
	t.Logf("CPU 0 %%soft: default %.1f, rps=1 %.1f", base, moved)
	if !(moved < base) {
		t.Errorf("RPS to CPU 1 left CPU 0's softirq at %.1f %% (default %.1f %%)", moved, base)
	}
	if left, _ := testbed.List(tbDir); len(left) > 0 {
		t.Errorf("testbed left: %+v", left)
	}
}

// udpCapturedRate is the last field of testdata/udp-send.txt.
const udpCapturedRate = 677033

// Issue 10: under seed 004's load (one queue, the sender pinned to CPU 0,
// the consumer on CPU 1), auto — deciding from the default run's measured
// load — steers receive processing away from the saturated CPU 0; and a
// short default,auto bench runs and restores the machine. Speed belongs to
// the benchmark (docs/benchmarks.md), not to this test.
func TestAutoOnSeed004Scenario(t *testing.T) {
	r, rep, _ := udpScenario(t, 2, "default", "auto")
	for _, run := range rep.Runs {
		if run.Error != "" || run.Throughput <= 0 {
			t.Fatalf("run %+v", run)
		}
	}
	auto := r.Setups["auto"]
	if auto == nil {
		t.Fatal("auto was not set up")
	}
	t.Logf("auto: %s", strings.Join(auto.Notes, "; "))
	base := rep.Runs[0].CPUs[0]
	if base.SoftIRQ+base.IRQ < 25 {
		t.Skipf("the default run did not load CPU 0 with interrupts (%.0f %% soft): no harm to fix here", base.SoftIRQ)
	}
	// Seed 004's picture needs CPU 1 to be the consumer's: on a machine
	// whose CPU 1 is busy with other work (another build, another test) the
	// right answer differs, and auto is right to weigh it.
	if bl := auto.Baseline; bl != nil && bl.Load != nil {
		var app, cpu1 float64
		for _, tk := range bl.Load.Tasks {
			if pids := r.App().PIDs; len(pids) > 0 && tk.PID == pids[0] {
				app += tk.Busy
			}
		}
		for _, c := range bl.Load.CPUs {
			if c.ID == 1 {
				cpu1 = c.Busy()
			}
		}
		if app < 0.7*cpu1 {
			t.Skipf("CPU 1 is %.0f %% busy but the consumer used only %.0f %%: other work shares the machine, so this is not seed 004's scenario", cpu1, app)
		}
	}
	steered := false
	for _, c := range auto.Changes {
		if c.Kind == setting.KindRPSCPUs {
			m, err := cpuset.ParseMask(c.Value)
			if err != nil || m.IsEmpty() || m.Contains(0) {
				t.Errorf("auto's RPS mask %q includes the saturated CPU 0", c.Value)
			}
			steered = true
		}
	}
	if !steered {
		t.Errorf("CPU 0 at %.0f %% softirq and auto planned no RPS away from it: %+v", base.SoftIRQ, auto.Changes)
	}
}

// udpScenario benches configs on seed 004's shape (one queue, the sender
// pinned to CPU 0, the sink to CPU 1) for rounds × 2 s and checks the
// machine was restored. It skips without root or taskset.
func udpScenario(t *testing.T, rounds int, configs ...string) (*Runner, *Report, string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	if _, err := exec.LookPath("taskset"); err != nil {
		t.Skip("taskset not installed")
	}
	tbDir := t.TempDir()
	w, err := NewNet("udp", NetOptions{Testbed: testbed.Options{Queues: 1, StateDir: tbDir}, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	r := &Runner{Workload: w, Configs: configs, Rounds: rounds, Duration: 2 * time.Second,
		StateDir: t.TempDir(), Configurator: Pinned{Inner: Configs{}, Client: cpuset.Of(0), App: cpuset.Of(1)}}
	rep, err := Bench(context.Background(), r, "")
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Restored {
		t.Errorf("machine not restored: %v", rep.Diff)
	}
	return r, rep, tbDir
}
