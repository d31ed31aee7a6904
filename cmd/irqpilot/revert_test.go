package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/irqpilot/irqpilot/internal/apply"
	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/livetest"
	"github.com/irqpilot/irqpilot/internal/setting"
)

// Issue 15 item 1, end to end: a journal directory holding a file that does
// not parse made `revert` print "nothing to revert" and exit 0, leaving the
// plan applied, and `history` say "no journals".
func TestRevertVerbWithUnreadableJournal(t *testing.T) {
	root := t.TempDir()
	file := filepath.Join(root, "proc/irq/40/smp_affinity_list")
	os.MkdirAll(filepath.Dir(file), 0o755)
	os.WriteFile(file, []byte("0-3\n"), 0o644)
	state := filepath.Join(t.TempDir(), "state")
	a := apply.New(kernel.New(root), state)
	if _, err := a.Apply([]setting.Change{setting.IRQAffinity(40, "irq 40", mustSet(t, "1"), "test")}, apply.Meta{}); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(state, "journal", "20000101T000000Z.json")
	os.WriteFile(bad, nil, 0o600)

	var hist historyOut
	stderr := runJSON(t, nil, 2, &hist, "--json", "history", "--state-dir", state)
	if len(hist.Journals) != 1 || hist.Journals[0].State != "applied" || len(hist.Unreadable) != 1 || hist.Unreadable[0].File != bad || !strings.Contains(stderr, bad) {
		t.Errorf("history: journals %+v, unreadable %+v\n%s", hist.Journals, hist.Unreadable, stderr)
	}
	var rev revertOut
	stderr = runJSON(t, nil, 0, &rev, "--json", "revert", "--root", root, "--state-dir", state)
	if rev.State != "reverted" || countStatus(rev.Entries, "restored") != 1 || !strings.Contains(stderr, bad) {
		t.Errorf("revert: %+v\n%s", rev, stderr)
	}
	if b, _ := os.ReadFile(file); strings.TrimSpace(string(b)) != "0-3" {
		t.Errorf("affinity %q after revert", b)
	}

	// Nothing readable but an unreadable journal: an error naming it, exit 2.
	state2 := filepath.Join(t.TempDir(), "state")
	os.MkdirAll(filepath.Join(state2, "journal"), 0o700)
	os.Chmod(state2, 0o700)
	os.WriteFile(filepath.Join(state2, "journal", "20000101T000000Z.json"), []byte("{"), 0o600)
	out, stderr, err := runIrqpilot(t, "--json", "revert", "--root", root, "--state-dir", state2)
	if code := exitCode(err); code != 2 || out != "" || !strings.Contains(stderr, "20000101T000000Z.json") {
		t.Errorf("revert with only an unreadable journal: exit %d, want 2 with nothing on stdout (not nothing_to_revert)\n%s\n%s", code, out, stderr)
	}
	// A world-writable state directory is refused before anything is read.
	os.Chmod(state, 0o777)
	_, stderr, err = runIrqpilot(t, "revert", "--root", root, "--state-dir", state)
	if code := exitCode(err); code != 2 || !strings.Contains(stderr, "writable by group or others") {
		t.Errorf("revert in a world-writable dir: exit %d\n%s", code, stderr)
	}
}

func mustSet(t *testing.T, s string) cpuset.Set {
	t.Helper()
	c, err := cpuset.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// nsRead reads a file inside network namespace ns.
func nsRead(t *testing.T, ns, path string) string {
	t.Helper()
	out, err := exec.Command("ip", "netns", "exec", ns, "cat", path).Output()
	if err != nil {
		t.Fatalf("cat %s in %s: %v", path, ns, err)
	}
	return strings.TrimSpace(string(out))
}

func nsWrite(t *testing.T, ns, path, v string) {
	t.Helper()
	if out, err := exec.Command("ip", "netns", "exec", ns, "sh", "-c", "echo "+v+" > "+path).CombinedOutput(); err != nil {
		t.Fatalf("write %s in %s: %v\n%s", path, ns, err, out)
	}
}

// runWrapped runs irqpilot (this test binary) with a wrapper prefix and returns
// its exit status and output.
func runWrapped(prefix []string, args ...string) (int, string, string) {
	out, errb, err := runCmd(selfCmd(prefix, args...))
	return exitCode(err), out, errb
}

func journalStates(t *testing.T, state string) map[string]string {
	t.Helper()
	js, err := apply.History(state)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, j := range js {
		out[j.ID] = j.State
	}
	return out
}

// A journal whose veth is gone used to fail revert ("no such file or
// directory"), stay applied and block every later revert. Live: the veth
// is deleted after apply; revert completes, reporting its settings gone.
func TestRevertVethGoneLive(t *testing.T) {
	ns := newVethPair(t).name
	in := []string{"ip", "netns", "exec", ns}
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	planFile := filepath.Join(dir, "p.yaml")
	os.WriteFile(planFile, []byte("version: 1\npolicy: test\nrx_queues:\n  - {device: vq0, queue: 1, rps_cpus: 0, rps_flow_cnt: 256, reason: test}\n"+
		"tx_queues:\n  - {device: vq0, queue: 2, xps_cpus: 0, reason: test}\n"), 0o644)
	if code, out, errs := runWrapped(in, "apply", "--state-dir", state, planFile); code != 0 {
		t.Fatalf("apply: exit %d\n%s%s", code, out, errs)
	}
	if out, err := exec.Command("ip", "-n", ns, "link", "del", "vq0").CombinedOutput(); err != nil {
		t.Fatalf("ip link del: %v\n%s", err, out)
	}
	var rev revertOut
	runJSON(t, in, 0, &rev, "--json", "revert", "--state-dir", state)
	if rev.State != "reverted" || countStatus(rev.Entries, "gone") != 3 {
		t.Fatalf("revert with the veth gone: %+v", rev)
	}
	for id, st := range journalStates(t, state) {
		if st != apply.StateReverted {
			t.Errorf("journal %s is %s, want reverted", id, st)
		}
	}
	// Nothing is left in the way.
	var again revertOut
	runJSON(t, in, 0, &again, "--json", "revert", "--state-dir", state)
	if !again.Nothing || !strings.HasPrefix(again.Reason, "nothing to revert") {
		t.Errorf("second revert: %+v", again)
	}
}

// A journal applied in a namespace that was deleted since was refused even
// with --force ("run revert there: ip netns exec NS …"). Live: without
// --force the refusal says the namespace is gone; with --force the journal
// completes, its IRQ restored and its veth settings reported gone.
func TestRevertDeletedNamespaceLive(t *testing.T) {
	if _, err := exec.LookPath("strace"); err != nil {
		t.Skip("no strace")
	}
	ns := newVethPair(t).name
	livetest.RestoreAllIRQs(t, true)
	irq, cur := quietIRQ(t)
	want := "0"
	if cur == "0" {
		want = "1"
	}
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	planFile := filepath.Join(dir, "p.yaml")
	os.WriteFile(planFile, []byte(fmt.Sprintf("version: 1\npolicy: test\nirqs:\n  - {irq: %d, cpus: %s, reason: test}\n"+
		"rx_queues:\n  - {device: vq0, queue: 1, rps_cpus: 0, reason: test}\n", irq, want)), 0o644)
	if code, out, errs := runWrapped([]string{"ip", "netns", "exec", ns}, "apply", "--state-dir", state, planFile); code != 0 {
		t.Fatalf("apply: exit %d\n%s%s", code, out, errs)
	}
	if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
		t.Fatalf("ip netns del: %v\n%s", err, out)
	}
	// The namespace's last reference may take a moment to drop.
	var code int
	var out, errs string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		code, out, errs = runWrapped(nil, "revert", "--state-dir", state)
		if strings.Contains(errs, "no longer exists") || time.Now().After(deadline) {
			break
		}
	}
	if code != 2 || !strings.Contains(errs, "no longer exists") || !strings.Contains(errs, "--force") {
		t.Fatalf("revert of a deleted namespace's journal: exit %d, want 2 saying it is gone and naming --force\n%s%s", code, out, errs)
	}
	var forced revertOut
	runJSON(t, nil, 0, &forced, "--json", "revert", "--force", "--state-dir", state)
	if forced.State != "reverted" || countStatus(forced.Entries, "restored") != 1 || countStatus(forced.Entries, "gone") != 1 {
		t.Fatalf("revert --force: %+v", forced)
	}
	b, _ := os.ReadFile(fmt.Sprintf("/proc/irq/%d/smp_affinity_list", irq))
	if got := strings.TrimSpace(string(b)); got != cur {
		t.Errorf("irq %d = %q after revert, want %q", irq, got, cur)
	}
	for id, st := range journalStates(t, state) {
		if st != apply.StateReverted {
			t.Errorf("journal %s is %s, want reverted", id, st)
		}
	}
}

// One agent run made a journal, then a drift-repair journal that recorded
// the drifted value as "old"; undoing it took a revert per journal and
// wrote the drifted value on the way back. Live: revert --session undoes
// the agent's run in one command, writing the veth's rps_cpus once, with
// its value from before the agent started.
func TestRevertSessionUndoesAgentRunLive(t *testing.T) {
	straceBin, err := exec.LookPath("strace")
	if err != nil {
		t.Skip("no strace")
	}
	ns := newVethPair(t).name
	in := []string{"ip", "netns", "exec", ns}
	const rps = "/sys/class/net/vq0/queues/rx-1/rps_cpus"
	before := nsRead(t, ns, rps)
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	planFile := filepath.Join(dir, "p.yaml")
	os.WriteFile(planFile, []byte("version: 1\npolicy: test\nrx_queues:\n  - {device: vq0, queue: 1, rps_cpus: 0, reason: test}\n"+
		"tx_queues:\n  - {device: vq0, queue: 0, xps_cpus: 0, reason: test}\n"), 0o644)

	agentCmd := selfCmd(in, "agent", "--plan", planFile, "--state-dir", state, "--interval", "100ms", "--listen", "", "--keep-journals", "100")
	var agentLog bytes.Buffer
	agentCmd.Stdout, agentCmd.Stderr = &agentLog, &agentLog
	if err := agentCmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		agentCmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- agentCmd.Wait() }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			agentCmd.Process.Kill()
			<-done
		}
	}
	t.Cleanup(stop)
	waitApplied := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			applied := 0
			if js, err := apply.History(state); err == nil {
				for _, j := range js {
					if j.State == apply.StateApplied {
						applied++
					}
				}
			}
			if applied >= n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("agent made %d applied journals, want %d\n%s", applied, n, agentLog.String())
			}
		}
	}
	waitApplied(1)
	nsWrite(t, ns, rps, "2") // drift: CPU 1
	waitApplied(2)
	stop()

	js, err := apply.History(state)
	if err != nil {
		t.Fatal(err)
	}
	drifted := false
	for _, j := range js {
		for _, e := range j.Entries {
			if e.Kind == setting.KindRPSCPUs && e.Status == setting.StatusDone && strings.Trim(e.Old, "0,") == "2" {
				drifted = true
			}
		}
	}
	if !drifted {
		t.Fatalf("no repair journal recorded the drifted value; journals: %+v", js)
	}

	log := filepath.Join(dir, "strace.log")
	code, out, errs := runWrapped(append(in, straceBin, "-f", "-y", "-qq", "-e", "trace=open,openat,openat2,creat", "-o", log), "revert", "--session", "--state-dir", state)
	if code != 0 {
		t.Fatalf("revert --session: exit %d\n%s%s", code, out, errs)
	}
	for id, st := range journalStates(t, state) {
		if st != apply.StateReverted {
			t.Errorf("journal %s is %s after revert --session, want reverted", id, st)
		}
	}
	if got := nsRead(t, ns, rps); got != before {
		t.Errorf("rps_cpus = %q after revert --session, want %q (from before the agent)", got, before)
	}
	_, writes := kernelWrites(t, log)
	n := 0
	for _, w := range writes {
		if strings.Contains(w, "vq0/queues/rx-1/rps_cpus") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("rx-1 rps_cpus opened for writing %d times, want once (no drifted value on the way back):\n%s", n, strings.Join(writes, "\n"))
	}
}
