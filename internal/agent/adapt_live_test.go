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
	"github.com/irqpilot/irqpilot/internal/policy"
)

// Adapt, live, on seed 004's shape (the bench udp workload): one-way UDP
// into a single-queue veth with the sender pinned to CPU 0 and the sink to
// CPU 1, so CPU 0 runs the sender and the whole receive softirq path. With
// --adapt the agent sees the harm auto sees (policy.Harm: here CPU 0
// saturated by interrupt work) and asks auto for a plan. What it does is
// robust whatever else runs on the machine (a build, another test, a CPU
// hog on either CPU):
//   - it changes steering away from CPU 0 and keeps the change (the hot
//     CPU's interrupt time falls) — seed 004's answer when CPU 1 has the
//     headroom for the softirq; or
//   - it changes nothing and says why: the plan is marginal (it does not
//     survive ±10 % of the measured load) or no candidate fits the
//     measured headroom — the answer when other work fills CPU 1;
//
// and never an adaptation that is reverted or fails, nor RPS back on CPU 0
// alone. The test measures the load itself before the agent starts and
// logs it beside each decision.
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
		"-addr", testbed.ServerAddr, "-d", "40s")
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

	time.Sleep(time.Second) // the flood gets going
	w := startWindowTasks(t, sink.PID)
	time.Sleep(2 * time.Second)
	before, harm := w.end(t)
	t.Logf("before the agent: %s; %s", cpuLine(before), harmLine(harm))
	hot := false
	for _, f := range harm {
		hot = hot || f.ID == load.IDInterruptBound && slices.Contains(f.CPUs, 0)
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
		return false
	}
	deadline := time.Now().Add(25 * time.Second)
	for !decided() && time.Now().Before(deadline) {
		select {
		case <-sent:
			deadline = time.Now()
		case <-time.After(250 * time.Millisecond):
		}
	}
	if len(st.Adaptations) == 0 {
		// No evidence of harm persisted for three intervals: nothing to do,
		// and nothing done. Seed 004's picture shows the harm every time.
		if hot {
			t.Fatalf("CPU 0 was interrupt-bound before the agent (%s) and the agent decided nothing in 25 s", harmLine(harm))
		}
		t.Logf("no harm persisted (before: %s); no adaptation, as it should be", harmLine(harm))
		return
	}
	// The first decision is judged; later ones (new evidence once the
	// load moved) are logged — the agent verifies and reverts those itself.
	for _, a := range st.Adaptations[1:] {
		t.Logf("later adaptation: %s — %s (policy %q)\n  why: %s", a.Result, a.Reason, a.Policy, a.Why)
	}
	var kept bool
	for _, a := range st.Adaptations[:1] {
		t.Logf("adaptation: %s — %s (policy %q)\n  why: %s", a.Result, a.Reason, a.Policy, a.Why)
		switch a.Result {
		case "kept":
			kept = true
			if !strings.Contains(a.Why, "the choice holds") {
				t.Errorf("kept a plan whose why does not say it is robust: %s", a.Why)
			}
		case "verifying":
		case "marginal":
			if !strings.HasPrefix(a.Why, policy.MarginalWhy) || !strings.Contains(a.Why, "→") {
				t.Errorf("marginal without the numbers: %s", a.Why)
			}
		case "no-change":
			if !strings.Contains(a.Why, "nothing is changed") && !strings.Contains(a.Reason, "already in force") {
				t.Errorf("no change without saying why: %s", a.Why)
			}
		default:
			t.Errorf("adaptation %s: %s (policy %q: %s)", a.Result, a.Reason, a.Policy, a.Why)
		}
	}
	rps := run(t, "ip", "netns", "exec", tb.ServerNS, "cat", rpsPath)
	t.Logf("rps_cpus %s → %s", rpsBefore, rps)
	if m := strings.Trim(strings.TrimSpace(rps), "0,"); m == "1" {
		t.Errorf("steering onto the saturated CPU 0 alone: rps_cpus %q", rps)
	}
	applied := kept
	for _, a := range st.Adaptations {
		applied = applied || a.Result == "kept" || a.Result == "verifying"
	}
	if !applied {
		if rps != rpsBefore {
			t.Errorf("no adaptation kept but %s rx-0 rps_cpus is %q (was %q)", tb.ServerDev, rps, rpsBefore)
		}
		return
	}
	if !kept {
		return // a later adaptation is being verified
	}
	if rps == rpsBefore || strings.Trim(rps, "0,") == "" {
		t.Errorf("kept an adaptation but %s rx-0 rps_cpus is %q (was %q): steering unchanged", tb.ServerDev, rps, rpsBefore)
	}
	w = startWindow(t)
	time.Sleep(2 * time.Second)
	after, harmAfter := w.end(t)
	t.Logf("after the adaptation: %s; %s (CPU 0 softirq %.0f%% → %.0f%%)", cpuLine(after), harmLine(harmAfter), softOf(before, 0), softOf(after, 0))
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
	// Without --device the agent plans for physical NICs only, and the
	// namespace has none: this checks the trigger stays quiet, not auto's
	// choice for the veth (with --device, 300 ms windows of this load
	// sometimes show transient harm and the agent tries a plan; see the
	// closing note of session 3).
	p := startAgent(t, tb.ServerNS, sd, "--plan", writePlan(t, "version: 1\n"), "--interval", "300ms", "--listen", "", "--adapt",
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
