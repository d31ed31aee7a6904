package main

import (
	"bytes"
	"flag"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/irqpilot/irqpilot/internal/agent"
	"github.com/irqpilot/irqpilot/internal/cpuset"
	goldenfile "github.com/irqpilot/irqpilot/internal/golden"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/setting"
	"github.com/irqpilot/irqpilot/internal/verify"
)

var updateText = flag.Bool("update-golden", false, "rewrite testdata/golden/*.txt from the current text outputs")

// golden compares got with testdata/golden/name (rewritten with
// -update-golden): the text outputs people read are reviewed as files.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	goldenfile.Check(t, filepath.Join("testdata", "golden", name), got, *updateText, "update-golden")
}

// goldenChanges is one change of each kind of value: a cpulist, masks, a
// count, a sysctl, a thread.
func goldenChanges() []setting.Change {
	irq := setting.IRQAffinity(38, "irq 38 (eth0 rx queue 0)", cpuset.Of(0), "every movable hardware IRQ on housekeeping CPU(s) 0 (ClustrixDB core-0 write-up)")
	irq.Old, irq.Status, irq.Note = "0-3", setting.StatusDone, "effective 0"
	rps := setting.RPSCPUs("eth0", 0, cpuset.MustParse("1-3"), 4, "RPS over the CPUs other than the housekeeping ones, 1-3")
	rps.Old, rps.Status = "00000000", setting.StatusDone
	cnt := setting.RPSFlowCnt("eth0", 0, 8192, "RFS flow count: 65536 entries / 8 queues")
	cnt.Old, cnt.Status = "0", setting.StatusDone
	xps := setting.XPSCPUs("eth0", 1, cpuset.Of(2), 4, "transmit from the queue's core 2")
	xps.Old, xps.Status = "00000003", setting.StatusUnchanged
	sock := setting.SockFlowEntries(65536, "RFS on")
	sock.Old, sock.Status = "0", setting.StatusDone
	thr := setting.ThreadAffinity(4242, 777, "memcached pid 4242 thread 4242", cpuset.MustParse("1-3"), "the application runs on the CPUs that take no IRQs")
	thr.Old, thr.Status = "0-3", setting.StatusDone
	skip := setting.IRQAffinity(40, "irq 40 (nvme0q1)", cpuset.Of(0), "every movable hardware IRQ")
	skip.Old, skip.Status, skip.Note = "1", setting.StatusSkipped, "the kernel refuses this IRQ's affinity (kernel-managed, or per-CPU): managed queue IRQs follow their queue's CPUs; left as is"
	return []setting.Change{irq, rps, cnt, xps, sock, thr, skip}
}

func TestGoldenApplyTable(t *testing.T) {
	// An idle IRQ moved off CPU 5: written, delivered there until it fires.
	idle := setting.IRQAffinity(41, "irq 41 (eth0 rx queue 3)", cpuset.Of(0), "every movable hardware IRQ on housekeeping CPU(s) 0 (ClustrixDB core-0 write-up)")
	idle.Old, idle.Status, idle.Note = "5", setting.StatusDone, "effective 5: "+host.MovePendingNote
	var b bytes.Buffer
	printEntries(&b, append(goldenChanges(), idle), false)
	left := setting.XPSCPUs("eth0", 0, cpuset.Of(), 4, "not in this plan; set by journal 20261122T103000Z")
	left.Old, left.Status = "00000001", setting.StatusPending
	printLeftovers(&b, []setting.Change{left}, false, false)
	b.WriteString("applied: 5 changed, 1 already so, 1 skipped; journal 20261122T104500Z (undo: " +
		undoCommand("/var/lib/irqpilot-test", "20261122T104500Z", nil) + ")\n")
	golden(t, "apply-table.txt", b.Bytes())
}

func TestGoldenRevertTable(t *testing.T) {
	cs := goldenChanges()
	for i := range cs {
		if cs[i].Status == setting.StatusDone {
			cs[i].Status, cs[i].Note = setting.StatusRestored, ""
		}
	}
	var b bytes.Buffer
	printRestored(&b, cs)
	golden(t, "revert-table.txt", b.Bytes())
}

// The plan and its diff against a captured single-node host.
func TestGoldenPlanDiff(t *testing.T) {
	h := snoHost(t)
	var b bytes.Buffer
	f := defaultPlanOptions("dedicated-core")
	if err := runPlan(&b, h, f, false, "snapshot sno-sysinfo"); err != nil {
		t.Fatal(err)
	}
	golden(t, "plan-diff.txt", b.Bytes())
}

// doctor on a captured pair (a UDP flood over loopback), as captured, with
// 300 backlog drops on CPU1 in the second sample, and with CPU0 bound by one
// IRQ (its remedy: a plan, its commands and prediction).
func TestGoldenDoctor(t *testing.T) {
	a, b := path.Join(loadTestdata, "udp-loopback/a"), path.Join(loadTestdata, "udp-loopback/b")
	out, errOut, err := runIrqpilot(t, "doctor", "--root", a, "--after", b)
	if c := exitCode(err); c != 0 {
		t.Fatalf("doctor: exit %d: %s", c, errOut)
	}
	dir := udpLoopbackWithDrops(t)
	drops, errOut, err := runIrqpilot(t, "doctor", "--root", filepath.Join(dir, "a"), "--after", filepath.Join(dir, "b"))
	if c := exitCode(err); c != 1 {
		t.Fatalf("doctor with drops: exit %d: %s", c, errOut)
	}
	bound := hardirqBoundPair(t)
	fix, errOut, err := runIrqpilot(t, "doctor", "--root", filepath.Join(bound, "a"), "--after", filepath.Join(bound, "b"))
	if c := exitCode(err); c != 1 {
		t.Fatalf("doctor on an interrupt-bound CPU: exit %d: %s", c, errOut)
	}
	golden(t, "doctor.txt", []byte(out+"\n$ # the same pair with 300 backlog drops on CPU1\n"+drops+
		"\n$ # the same pair with CPU0 bound by one IRQ's hardirq work, CPU1 idle\n"+fix))
}

// regexpHexMask matches a kernel hex mask as a word ("0000000c").
var regexpHexMask = regexp.MustCompile(`\b[0-9a-f]{8}(,[0-9a-f]{8})*\b`)

// status's text shows every CPU set as a cpulist (the agent's JSON keeps
// the kernel's masks, with value_cpus and the repairs' *_cpus beside them)
// and says which enforced IRQ's move is pending.
func TestGoldenStatusText(t *testing.T) {
	at := time.Date(2026, 11, 22, 10, 45, 0, 0, time.UTC)
	st := &agent.Status{PID: 4242, Started: at, Plan: "/etc/irqpilot/plan.yaml", Interval: "30s", Passes: 12, LastPass: at.Add(6 * time.Minute),
		Enforced: []agent.Enforced{
			{Setting: "irq-affinity", Target: "irq 41 (eth0 rx queue 3)", Device: "eth0", Value: "0", Note: host.MovePendingNote},
			{Setting: "irq-affinity", Target: "irq 42 (eth0 rx queue 4)", Device: "eth0", Value: "1"},
			{Setting: "rps-cpus", Target: "eth0 rx-3", Device: "eth0", Value: "0000000c"},
			{Setting: "xps-cpus", Target: "eth0 tx-3", Device: "eth0", Value: "00000000"},
		},
		Repairs: []agent.Repair{
			{Time: at.Add(5 * time.Minute), Setting: "rps-cpus", Target: "eth0 rx-3", Device: "eth0", Old: "0000000c", Drifted: "00000000", Restored: "0000000c"},
			{Time: at.Add(5 * time.Minute), Setting: "irq-affinity", Target: "irq 42 (eth0 rx queue 4)", Device: "eth0", Old: "1", Drifted: "0-3", Restored: "1",
				Culprit: "irqbalance (pid 977) is running and not banned from any CPU"},
		},
		Adaptations: []agent.Adaptation{
			{Time: at.Add(2 * time.Minute), Finding: "interrupt-bound-cpu", Result: "reverted", Policy: "auto",
				Reason: "undone at once: the change verified worse on 2 settled intervals in a row", Verdict: "worse",
				Verification: &agent.Verification{Intervals: 2, Early: true, Result: verify.Result{Verdict: verify.Worse,
					Reason:        "the change broke the headroom rule: CPU 1 5% → 95% busy (a CPU that takes work must stay at most 80% busy)",
					MeanBusyError: 28.9, MaxBusyError: 60.8, MeanIRQError: 21.6, MaxIRQError: 58.8,
					CPUs: []verify.CPU{{CPU: 1, BeforeBusy: 5, PredictedBusy: 34.2, MeasuredBusy: 95, BusyError: 60.8}}}}},
			{Time: at.Add(3 * time.Minute), Finding: "interrupt-bound-cpu", Result: "not-retried", Policy: "auto",
				Reason: "the same plan verified worse at 2026-11-22T10:47:00Z on a load within tolerance of this one (…); not retried until the traffic moves by more than 20 % or a CPU's busy time by more than 10 points"},
			{Time: at.Add(4 * time.Minute), Finding: "interrupt-bound-cpu", Result: "kept", Policy: "auto",
				Reason: "interrupt-bound-cpu gone; interrupt time of CPU 0 (the finding's) 66.9% → 8.1%; drops 0/s → 0/s", Verdict: "confirmed",
				Verification: &agent.Verification{Intervals: 3, Result: verify.Result{Verdict: verify.Confirmed,
					Reason:        "every CPU within 10 points (plus the noise measured before) of the prediction; mean error 3.1 points busy, 2.4 interrupts",
					MeanBusyError: 3.1, MaxBusyError: 5.2, MeanIRQError: 2.4, MaxIRQError: 4.0,
					CPUs: []verify.CPU{{CPU: 0, BeforeBusy: 96, PredictedBusy: 40, MeasuredBusy: 44, BusyError: 4, Within: true}}}}},
		},
	}
	var b bytes.Buffer
	printStatus(&b, st)
	if m := regexpHexMask.FindString(b.String()); m != "" {
		t.Errorf("status text shows a hex mask %q", m)
	}
	if !strings.Contains(b.String(), host.MovePendingNote) {
		t.Errorf("status text does not say irq 41's move is pending")
	}
	golden(t, "status.txt", b.Bytes())
}
