package agent

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/irqpilot/irqpilot/internal/bench/testbed"
	"github.com/irqpilot/irqpilot/internal/diagnose"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/livetest"
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
	livetest.NeedRoot(t, "taskset")
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
	sent := livetest.Start(t, send, 5*time.Second)
	rpsPath := "/sys/class/net/" + tb.ServerDev + "/queues/rx-0/rps_cpus"
	rpsBefore := run(t, "ip", "netns", "exec", tb.ServerNS, "cat", rpsPath)

	time.Sleep(time.Second) // the flood gets going
	w := startWindowTasks(t, sink.PID)
	time.Sleep(2 * time.Second)
	before, harm := w.end(t)
	t.Logf("before the agent: %s; %s", cpuLine(before), harmLine(harm))
	hot := false
	for _, f := range harm {
		hot = hot || f.ID == diagnose.IDInterruptBound && slices.Contains(f.CPUs, 0)
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
	livetest.NeedRoot(t, "memcaslap")
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
	loaded := livetest.Start(t, load, 5*time.Second)
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

// window is the test's own measurement of the machine, taken beside the
// agent's: the per-CPU numbers a skip or a failure reports, and
// policy.Harm's verdict on them (the evidence the agent's trigger uses).
type window struct {
	s    *load.Sampler
	from *load.Sample
}

func startWindow(t *testing.T) *window { t.Helper(); return startWindowTasks(t) }

// startWindowTasks is startWindow that also samples the threads of pids.
func startWindowTasks(t *testing.T, pids ...int) *window {
	t.Helper()
	s := load.NewSampler(kernel.New("/"))
	if len(pids) > 0 {
		s.TaskPIDs = func() []int { return pids }
	}
	from, err := s.Sample()
	if err != nil {
		t.Fatal(err)
	}
	return &window{s: s, from: from}
}

// end measures from the start (or the last end) to now.
func (w *window) end(t *testing.T) (*load.Load, []diagnose.Finding) {
	t.Helper()
	to, err := w.s.Sample()
	if err != nil {
		t.Fatal(err)
	}
	l, err := load.Rates(w.from, to)
	if err != nil {
		t.Fatal(err)
	}
	w.from = to
	h, err := host.Read(kernel.New("/"), host.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return l, policy.Harm(h, l)
}

// cpuLine: "CPU0 idle 2% soft 71% irq 0% user 10% sys 17%; CPU1 …".
func cpuLine(l *load.Load) string {
	var parts []string
	for _, c := range l.CPUs {
		parts = append(parts, fmt.Sprintf("CPU%d idle %.0f%% soft %.0f%% irq %.0f%% user %.0f%% sys %.0f%%", c.ID, c.Idle, c.SoftIRQ, c.IRQ, c.User, c.System))
	}
	return strings.Join(parts, "; ")
}

func harmLine(fs []diagnose.Finding) string {
	if len(fs) == 0 {
		return "no evidence of harm"
	}
	var parts []string
	for _, f := range fs {
		parts = append(parts, f.ID+": "+f.Summary)
	}
	return strings.Join(parts, "; ")
}

func softOf(l *load.Load, cpu int) float64 {
	for _, c := range l.CPUs {
		if c.ID == cpu {
			return c.SoftIRQ
		}
	}
	return 0
}
