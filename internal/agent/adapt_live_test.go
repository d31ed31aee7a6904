package agent

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/irqpilot/irqpilot/internal/bench/testbed"
	"github.com/irqpilot/irqpilot/internal/load"
)

// Adapt, live, on seed 004's shape (the bench udp workload): one-way UDP
// into a single-queue veth with the sender pinned to CPU 0 and the sink to
// CPU 1, so CPU 0 runs the sender and the whole receive softirq path. With
// --adapt the agent must see the harm auto sees (plan.Harm: here CPU 0
// saturated by interrupt work), change steering, and keep the change
// because the hot CPU's interrupt time falls. The test measures the load
// itself before the agent starts: it skips only when that measurement is
// not seed 004's picture (no interrupt-bound CPU 0), and logs the numbers.
func TestLiveAdaptSeed004UDP(t *testing.T) {
	needRoot(t)
	if _, err := exec.LookPath("taskset"); err != nil {
		t.Skip("taskset not installed")
	}
	bin := irqpilot(t)
	tb, err := testbed.Up(testbed.Options{Queues: 1, StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tb.Down(); err != nil {
			t.Errorf("testbed down: %v", err)
		}
	})
	sink, err := tb.StartProgram("udp-sink", "irqpilot", 9001, "taskset", "-c", "1", "env", "IRQPILOT_BENCH_HELPER=udp-sink", bin, "-addr", testbed.ServerAddr)
	if err != nil {
		t.Fatal(err)
	}
	send := exec.Command("ip", "netns", "exec", tb.ClientNS, "taskset", "-c", "0", "env", "IRQPILOT_BENCH_HELPER=udp-send", bin,
		"-addr", testbed.ServerAddr, "-d", "30s")
	if err := send.Start(); err != nil {
		t.Fatal(err)
	}
	sent := make(chan struct{})
	go func() { send.Wait(); close(sent) }()
	t.Cleanup(func() {
		send.Process.Signal(syscall.SIGTERM)
		select {
		case <-sent:
		case <-time.After(5 * time.Second):
			send.Process.Kill()
			<-sent
		}
	})
	rpsPath := "/sys/class/net/" + tb.ServerDev + "/queues/rx-0/rps_cpus"
	rpsBefore := run(t, "ip", "netns", "exec", tb.ServerNS, "cat", rpsPath)

	// The picture before the agent: seed 004's is CPU 0 interrupt-bound.
	time.Sleep(time.Second) // the flood gets going
	w := startWindow(t)
	time.Sleep(2 * time.Second)
	before, harm := w.end(t)
	t.Logf("before the agent: %s; %s", cpuLine(before), harmLine(harm))
	hot := false
	for _, f := range harm {
		hot = hot || f.ID == load.IDInterruptBound && slices.Contains(f.CPUs, 0)
	}
	if !hot {
		t.Skipf("the measured load is not seed 004's picture (CPU 0 not interrupt-bound): %s; %s", cpuLine(before), harmLine(harm))
	}

	pf := writePlan(t, "version: 1\n")
	sd := mkState(t)
	// The operator names the consumer (--app), as they would for a
	// service: auto may then move it beside the sender when RPS frees
	// CPU 0 (without it, RPS alone would pile the softirq onto the sink's
	// busy CPU 1, and auto rightly changes nothing).
	p := startAgent(t, tb.ServerNS, sd, "--plan", pf, "--device", tb.ServerDev, "--app", fmt.Sprintf("pid:%d", sink.PID), "--interval", "500ms", "--listen", "", "--adapt",
		"--adapt-persist", "3", "--adapt-window", "6", "--adapt-dwell", "1s", "--revert-on-exit")
	var st *Status
	decided := func() bool {
		st = p.status(t)
		for _, a := range st.Adaptations {
			if a.Result != "verifying" {
				return true
			}
		}
		select {
		case <-sent:
			t.Fatalf("the sender ended before the agent decided")
		default:
		}
		return false
	}
	waitFor(t, 20*time.Second, "an adaptation decided", decided)
	a := st.Adaptations[0]
	t.Logf("adaptation: %+v", a)
	if a.Result != "kept" {
		// The trigger saw the harm (an adaptation was tried); the planner's
		// plan or its verification is what fell short.
		t.Fatalf("on seed 004's picture (%s) the adaptation was %s: %s (policy %q: %s)", harmLine(harm), a.Result, a.Reason, a.Policy, a.Why)
	}
	rps := run(t, "ip", "netns", "exec", tb.ServerNS, "cat", rpsPath)
	t.Logf("rps_cpus %s → %s", rpsBefore, rps)
	if rps == rpsBefore || strings.Trim(rps, "0,") == "" {
		t.Errorf("kept an adaptation but %s rx-0 rps_cpus is %q (was %q): steering unchanged", tb.ServerDev, rps, rpsBefore)
	}
	// Kept, and still kept: the hot CPU's softirq time is lower now.
	w = startWindow(t)
	time.Sleep(2 * time.Second)
	after, harmAfter := w.end(t)
	t.Logf("after the adaptation: %s; %s", cpuLine(after), harmLine(harmAfter))
	if softOf(after, 0) >= softOf(before, 0) {
		t.Errorf("CPU 0 %%soft did not fall: %.0f%% → %.0f%%", softOf(before, 0), softOf(after, 0))
	}
	if st = p.status(t); st.Adaptations[0].Result != "kept" || len(st.Adaptations) != 1 {
		t.Errorf("adaptations now %+v, want the one kept", st.Adaptations)
	}
}

// Adapt, live, on memcached with 2 worker threads and a memcaslap load over
// a 2-queue veth: the load is spread, nothing shows harm, and the agent
// changes nothing.
func TestLiveAdaptMemcachedChangesNothing(t *testing.T) {
	needRoot(t)
	if _, err := exec.LookPath("memcaslap"); err != nil {
		t.Skip("memcaslap not installed (libmemcached-tools; make deps)")
	}
	tb, err := testbed.Up(testbed.Options{Queues: 2, StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tb.Down(); err != nil {
			t.Errorf("testbed down: %v", err)
		}
	})
	if _, err := tb.StartMemcached(2); err != nil {
		t.Fatal(err)
	}
	load := exec.Command("ip", "netns", "exec", tb.ClientNS, "memcaslap", "-s", testbed.ServerAddr+":11211", "-T", "2", "-c", "32", "-t", "8s", "-S", "8s")
	if err := load.Start(); err != nil {
		t.Fatal(err)
	}
	loaded := make(chan struct{})
	go func() { load.Wait(); close(loaded) }()
	t.Cleanup(func() {
		load.Process.Signal(syscall.SIGTERM)
		select {
		case <-loaded:
		case <-time.After(5 * time.Second):
			load.Process.Kill()
			<-loaded
		}
	})
	sd := mkState(t)
	w := startWindow(t)
	// --device: auto may steer the veth (without it the namespace has no
	// device auto plans for, and "changes nothing" would hold trivially).
	p := startAgent(t, tb.ServerNS, sd, "--plan", writePlan(t, "version: 1\n"), "--device", tb.ServerDev, "--interval", "300ms", "--listen", "", "--adapt",
		"--adapt-persist", "3", "--adapt-window", "4", "--adapt-dwell", "1s", "--revert-on-exit")
	<-loaded
	st := p.status(t)
	l, harm := w.end(t)
	t.Logf("measured under the load: %s; %s", cpuLine(l), harmLine(harm))
	if st.Passes < 10 {
		t.Fatalf("only %d passes during the load", st.Passes)
	}
	if len(st.Adaptations) != 0 {
		if len(harm) > 0 {
			t.Skipf("the measured load is not a spread one (%s); adapted %+v", harmLine(harm), st.Adaptations)
		}
		t.Errorf("adapted under a spread memcached load with no evidence of harm measured: %+v", st.Adaptations)
	}
}
