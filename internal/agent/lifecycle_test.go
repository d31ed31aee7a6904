package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/livetest"
)

// queueFiles reads every rps_cpus and xps_cpus of va0 as the namespace sees them.
func (b *bed) queueFiles(t *testing.T) string {
	t.Helper()
	return run(t, "ip", "netns", "exec", b.ns, "sh", "-c",
		"for f in /sys/class/net/va0/queues/*/rps_cpus /sys/class/net/va0/queues/*/xps_cpus; do echo $f $(cat $f); done")
}

// Crash: SIGKILL the agent while its first apply is half done; the
// restarted agent rolls that journal back and applies again; `revert`
// then restores exactly what was there before the first start.
func TestLiveCrashRecovery(t *testing.T) {
	livetest.NeedRoot(t)
	b := newBed(t, 64)
	before := b.queueFiles(t)
	pf := writePlan(t, `version: 1
rx_queues:
  - device: va0
    rps_cpus: "0"
    reason: crash test
tx_queues:
  - device: va0
    xps_cpus: "0"
    reason: crash test
`)
	sd := mkState(t)
	jdir := filepath.Join(sd, "journal")
	var killed bool
	for attempt := 0; attempt < 5 && !killed; attempt++ {
		p := startAgentNoWait(t, b.ns, sd, "--plan", pf, "--interval", "200ms", "--listen", "")
		// Poll the journal: kill when it says "applying" with some entries done.
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) && !killed {
			ents, _ := os.ReadDir(jdir)
			for _, e := range ents {
				data, err := os.ReadFile(filepath.Join(jdir, e.Name()))
				if err == nil && strings.Contains(string(data), `"state": "applying"`) && strings.Contains(string(data), `"status": "done"`) {
					p.cmd.Process.Signal(syscall.SIGKILL)
					<-p.done
					killed = true
					break
				}
			}
			select {
			case <-p.done:
				deadline = time.Time{}
			default:
			}
			time.Sleep(time.Millisecond)
		}
		if !killed {
			// The apply finished before the poll caught it: undo and retry.
			p.stop(t, syscall.SIGTERM)
			out, _ := exec.Command("ip", "netns", "exec", b.ns, irqpilot(t), "revert", "--state-dir", sd).CombinedOutput()
			t.Logf("attempt %d: apply finished before the kill; reverted: %s", attempt+1, out)
		}
	}
	if !killed {
		t.Skip("the agent's apply always finished before the test could kill it mid-apply")
	}
	mid := b.queueFiles(t)
	if mid == before {
		t.Logf("note: killed before the first write reached the kernel")
	}
	p := startAgent(t, b.ns, sd, "--plan", pf, "--interval", "200ms", "--listen", "")
	waitFor(t, 10*time.Second, "restarted agent applied the plan", func() bool {
		st := p.status(t)
		return st.Passes > 0 && st.LastError == "" && len(st.Journals) > 0
	})
	if !strings.Contains(p.log.String(), "recovered: rolled back the apply a previous run left unfinished") {
		t.Errorf("restarted agent did not recover the interrupted journal:\n%s", p.log)
	}
	for _, l := range strings.Split(b.queueFiles(t), "\n") {
		if !strings.HasSuffix(l, " 0000000000000001") && !strings.HasSuffix(l, " 00000001") && !strings.HasSuffix(l, " 1") {
			t.Errorf("after restart: %s, want CPU 0", l)
		}
	}
	p.stop(t, syscall.SIGTERM) // leaves the applied state
	if strings.Contains(b.queueFiles(t), " 0\n") {
		t.Errorf("SIGTERM without --revert-on-exit reverted settings")
	}
	out, err := exec.Command("ip", "netns", "exec", b.ns, irqpilot(t), "revert", "--state-dir", sd).CombinedOutput()
	if err != nil {
		t.Fatalf("revert: %v\n%s", err, out)
	}
	if got := b.queueFiles(t); got != before {
		t.Errorf("after revert:\n%s\nwant exactly:\n%s", got, before)
	}
}

// Bad input: a plan that does not parse, an unknown policy, a plan naming a
// CPU this machine lacks, no plan at all — exit 2 before anything is
// touched (no journal, the device's settings as they were).
func TestLiveBadInput(t *testing.T) {
	livetest.NeedRoot(t)
	b := newBed(t, 2)
	before := b.queueFiles(t)
	bad := writePlan(t, "version: 1\nrx_queues:\n  - device: va0\n    rps_cpus: [oops\n")
	noCPU := writePlan(t, "version: 1\nrx_queues:\n  - device: va0\n    rps_cpus: \"4000\"\n    reason: x\n")
	for _, tc := range []struct {
		name string
		args []string
		msg  string
	}{
		{"malformed plan", []string{"--plan", bad}, bad},
		{"unknown policy", []string{"--policy", "nosuch"}, `unknown policy "nosuch"`},
		{"CPU that does not exist", []string{"--plan", noCPU}, "4000"},
		{"missing plan file", []string{"--plan", filepath.Join(t.TempDir(), "nope.yaml")}, "nope.yaml"},
		{"neither plan nor policy", nil, "--plan FILE or --policy NAME"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sd := mkState(t)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", b.ns, irqpilot(t), "agent", "--state-dir", sd, "--listen", "", "--interval", "100ms"}, tc.args...)...)
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 2 {
				t.Fatalf("exit %v, want 2\n%s", err, out)
			}
			if !strings.Contains(string(out), tc.msg) || !strings.Contains(string(out), "nothing was changed") && tc.args != nil {
				t.Errorf("message does not name %q and say nothing was changed:\n%s", tc.msg, out)
			}
			if _, err := os.Stat(filepath.Join(sd, "journal")); !os.IsNotExist(err) {
				t.Errorf("a journal directory was created")
			}
			if got := b.queueFiles(t); got != before {
				t.Errorf("settings changed:\n%s\nwant\n%s", got, before)
			}
		})
	}
}

// SIGHUP reloads an edited plan after validating it; a broken edit is
// rejected and the old plan stays in force.
func TestLiveReloadOnSIGHUP(t *testing.T) {
	livetest.NeedRoot(t)
	b := newBed(t, 2)
	pf := writePlan(t, "version: 1\nrx_queues:\n  - device: va0\n    rps_cpus: \"0\"\n    reason: reload test\n")
	sd := mkState(t)
	p := startAgent(t, b.ns, sd, "--plan", pf, "--interval", "200ms", "--listen", "", "--revert-on-exit")
	rps := "/sys/class/net/va0/queues/rx-0/rps_cpus"
	waitFor(t, 5*time.Second, "plan A applied", func() bool { return strings.HasSuffix(b.read(t, rps), "1") })

	os.WriteFile(pf, []byte("version: 1\nrx_queues:\n  - device: va0\n    rps_cpus: \"0-1\"\n    reason: reload test B\n"), 0o644)
	p.cmd.Process.Signal(syscall.SIGHUP)
	waitFor(t, 5*time.Second, "plan B applied after SIGHUP", func() bool { return strings.HasSuffix(b.read(t, rps), "3") })
	if st := p.status(t); len(st.Repairs) != 0 {
		t.Errorf("a reload counted as drift: %+v", st.Repairs)
	}

	os.WriteFile(pf, []byte("version: 1\nrx_queues:\n  - device: va0\n    rps_cpus: \"9999\"\n    reason: broken\n"), 0o644)
	p.cmd.Process.Signal(syscall.SIGHUP)
	waitFor(t, 5*time.Second, "broken plan rejected", func() bool {
		return strings.Contains(p.log.String(), `msg="plan reload rejected; keeping the plan in force"`)
	})
	// The old plan (B) is still enforced: drift is still repaired.
	b.write(t, rps, "0")
	waitFor(t, 5*time.Second, "plan B still enforced", func() bool { return strings.HasSuffix(b.read(t, rps), "3") })
	select {
	case <-p.done:
		t.Fatalf("agent exited after a rejected reload: %v", p.err)
	default:
	}
}

// --adapt on an idle machine changes nothing. On a machine other work
// keeps busy enough for the test's own window to measure harm, what the
// agent reports of each adaptation is asserted instead of a skip.
func TestLiveAdaptIdleChangesNothing(t *testing.T) {
	livetest.NeedRoot(t)
	b := newBed(t, 1)
	pf := writePlan(t, "version: 1\n")
	sd := mkState(t)
	w := startWindow(t)
	p := startAgent(t, b.ns, sd, "--plan", pf, "--interval", "100ms", "--listen", "", "--adapt", "--adapt-persist", "2", "--adapt-window", "2")
	waitFor(t, 10*time.Second, "20 passes", func() bool { return p.status(t).Passes >= 20 })
	st := p.status(t)
	l, harm := w.end(t)
	t.Logf("measured over the run: %s; %s", cpuLine(l), harmLine(harm))
	// What holds on any machine: nothing is changed. A busy moment of
	// other work on a shared machine (the agent samples every 100 ms; the
	// test's own window may average it away) can make the planner look
	// and decide that nothing should change: that is no adaptation.
	var changed []Adaptation
	for _, a := range st.Adaptations {
		switch a.Result {
		case "no-change", "marginal", "refused":
		default:
			changed = append(changed, a)
		}
	}
	if len(changed) != 0 && len(harm) == 0 {
		t.Errorf("adapted on an idle machine: %+v", changed)
	}
	// Other work on this shared machine, not this test's, made the test's
	// own window measure harm: then an adaptation is what the agent should
	// do, and what it reports of each is asserted instead: the finding it
	// acted on, the reason, and a journal for every change it made.
	journals := 0
	for _, a := range changed {
		journals += len(a.Journals)
		if a.Finding == "" || a.Reason == "" || (a.Result != "failed" && len(a.Journals) == 0) {
			t.Errorf("adaptation on a busy machine (%s) does not say what it acted on, or wrote no journal: %+v", harmLine(harm), a)
		}
	}
	if len(changed) != 0 {
		t.Logf("the machine was not idle (%s): adapted %+v", harmLine(harm), changed)
	}
	if ents, _ := os.ReadDir(filepath.Join(sd, "journal")); (journals == 0) != (len(ents) == 0) {
		t.Errorf("%d journal files written, %d journals reported by the adaptations", len(ents), journals)
	}
	_ = fmt.Sprint
}

// mountTmpfs mounts a tmpfs of the test's own, its root of mode mode, on
// a temporary directory and returns it; the caller unmounts it.
func mountTmpfs(t *testing.T, mode string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "config")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	run(t, "mount", "-t", "tmpfs", "-o", "size=1m,mode="+mode, "irqp-agentsec", dir)
	return dir
}

// A plan in a directory anyone may write is refused, unless the directory
// is on a read-only mount (a Kubernetes ConfigMap volume mounted readOnly
// is mode 0777): no one can change it through that mount. A tmpfs of the
// test's own, mounted in a temporary directory and unmounted after.
func TestLivePlanOnReadOnlyMountTrusted(t *testing.T) {
	livetest.NeedRoot(t)
	dir := mountTmpfs(t, "0777")
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", dir, err, out)
		}
	})
	pf := filepath.Join(dir, "plan.yaml")
	if err := os.WriteFile(pf, []byte(rpsPlanText("3")), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := checkTrusted("plan file", pf); err == nil || !strings.Contains(err.Error(), "writable by group or others (mode 0777)") {
		t.Fatalf("plan in a writable mode 0777 directory: %v", err)
	}
	run(t, "mount", "-o", "remount,ro", dir)
	if _, err := checkTrusted("plan file", pf); err != nil {
		t.Errorf("plan on a read-only mount: %v", err)
	}
}

// A read-only view does not excuse the file itself: a root-owned plan that
// anyone may write is refused on a read-only mount too (the agent unit's
// ProtectSystem=strict shows /etc read-only while the host's own mount of
// it stays writable), and so is a directory inside the mount that is not
// its root. A plan that is a FIFO is refused instead of blocking the agent.
func TestLivePlanReadOnlyViewExcusesNoFile(t *testing.T) {
	livetest.NeedRoot(t)
	dir := mountTmpfs(t, "0755")
	t.Cleanup(func() { _ = exec.Command("umount", dir).Run() })
	pf := filepath.Join(dir, "plan.yaml")
	if err := os.WriteFile(pf, []byte(rpsPlanText("3")), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(pf, 0o666); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(sub, 0o777); err != nil {
		t.Fatal(err)
	}
	sp := filepath.Join(sub, "plan.yaml")
	if err := os.WriteFile(sp, []byte(rpsPlanText("3")), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, "mount", "-o", "remount,ro", dir)
	if _, err := checkTrusted("plan file", pf); err == nil || !strings.Contains(err.Error(), "(mode 0666)") {
		t.Errorf("mode 0666 plan on a read-only mount: %v", err)
	}
	if _, err := checkTrusted("plan file", sp); err == nil || !strings.Contains(err.Error(), "(mode 0777)") {
		t.Errorf("plan in a mode 0777 directory below a read-only mount's root: %v", err)
	}

	fifo := filepath.Join(t.TempDir(), "plan.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		ag := &Agent{o: Options{PlanFile: fifo}}
		_, _, err := ag.loadPlan(nil)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("plan FIFO: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the agent blocked on a FIFO plan")
	}
}

// The audit's reproduction: a plan file writable by others, changed by
// nobody (rps_cpus 1 → 3), then SIGHUP. The reload is rejected, the plan
// in force stays, and status says why.
func TestLiveReloadOfPlanNobodyChanged(t *testing.T) {
	livetest.NeedRoot(t, "setpriv")
	setpriv, _ := exec.LookPath("setpriv")
	b := newBed(t, 2)
	dir := openTempDir(t)
	pf := filepath.Join(dir, "plan.yaml")
	plan := "version: 1\nrx_queues:\n  - device: va0\n    rps_cpus: \"%s\"\n    reason: agent trust test\n"
	if err := os.WriteFile(pf, []byte(strings.Replace(plan, "%s", "0", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	sd := mkState(t)
	p := startAgent(t, b.ns, sd, "--plan", pf, "--interval", "200ms")
	rps := "/sys/class/net/va0/queues/rx-0/rps_cpus"
	waitFor(t, 10*time.Second, "plan applied", func() bool { return strings.HasSuffix(b.read(t, rps), "1") })

	os.Chmod(pf, 0o666)
	if out, err := exec.Command(setpriv, "--reuid", "65534", "--regid", "65534", "--clear-groups",
		"sh", "-c", "printf '"+strings.ReplaceAll(strings.Replace(plan, "%s", "1", 1), "\n", `\n`)+"' > "+pf).CombinedOutput(); err != nil {
		t.Fatalf("nobody writing the plan: %v %s", err, out)
	}
	p.cmd.Process.Signal(syscall.SIGHUP)
	var st *Status
	waitFor(t, 10*time.Second, "reload recorded in status", func() bool { st = p.status(t); return st.LastReload != nil })
	if !st.LastReload.Rejected || !strings.Contains(st.LastReload.Error, "writable by group or others") {
		t.Errorf("status after nobody's plan: %+v", st.LastReload)
	}
	// Passes run on the old plan: CPU 0 still, not nobody's CPU 1.
	time.Sleep(500 * time.Millisecond)
	if got := b.read(t, rps); !strings.HasSuffix(got, "1") {
		t.Errorf("rps_cpus %q after nobody's plan was offered: it was enforced", got)
	}
	var out strings.Builder
	cmd := exec.Command(irqpilot(t), "status", "--state-dir", sd)
	cmd.Stdout = &out
	if err := cmd.Run(); err != nil || !strings.Contains(out.String(), "REJECTED") {
		t.Errorf("irqpilot status: %v\n%s", err, out.String())
	}
}

// readOnly makes file p refuse writes (EROFS) and keep its reads: a
// read-only bind mount of the file on itself, in a test tree, undone when
// the test ends. It stands for a kernel file whose writes fail (EIO).
func readOnly(t *testing.T, p string) {
	t.Helper()
	run(t, "mount", "--bind", p, p)
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", p).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", p, err, out)
		}
	})
	run(t, "mount", "-o", "remount,ro,bind", p)
}

// One setting whose write keeps failing does not stop the repair of the
// others: with rx-0's rps_cpus drifted and unwritable, rx-1's drift is
// repaired, and rx-0 is parked with its reason in status, the metric and
// one log line, while rx-1 stays enforced.
func TestOneFailingSettingDoesNotStopRepair(t *testing.T) {
	livetest.NeedRoot(t, "mount", "umount")
	root := genHost(t)
	plan := "version: 1\nrx_queues:\n" +
		"  - {device: eth0, queue: 0, rps_cpus: \"3\", reason: test}\n" +
		"  - {device: eth0, queue: 1, rps_cpus: \"3\", reason: test}\n"
	var log livetest.Buffer
	ag, err := New(Options{FS: kernel.New(root), StateDir: stateDir(t), PlanFile: writePlan(t, plan), Interval: 50 * time.Millisecond,
		NoLinkEvents: true, Log: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	runAgent(t, ag)
	rps := func(q string) string { return filepath.Join(root, "sys/class/net/eth0/queues/rx-"+q+"/rps_cpus") }
	read := func(q string) string { b, _ := os.ReadFile(rps(q)); return strings.TrimSpace(string(b)) }
	waitForT(t, func() bool { return strings.Contains(read("0"), "8") && strings.Contains(read("1"), "8") })

	ag.mu.Lock() // drift both between two passes; rx-0 cannot be written back
	os.WriteFile(rps("0"), []byte("1\n"), 0o644)
	readOnly(t, rps("0"))
	os.WriteFile(rps("1"), []byte("1\n"), 0o644)
	ag.mu.Unlock()

	waitForT(t, func() bool { return strings.Contains(read("1"), "8") })
	waitForT(t, func() bool { st := ag.Status(); return len(st.Frozen) == 1 })
	st := ag.Status()
	if f := st.Frozen[0]; f.Target != "eth0 rx-0" || !strings.Contains(f.Reason, "write failed") || !strings.Contains(f.Reason, "read-only file system") {
		t.Errorf("parked setting %+v; want eth0 rx-0 with the write's error", f)
	}
	if g := testutil.ToFloat64(ag.m.Frozen); g != 1 {
		t.Errorf("frozen settings gauge %v, want 1", g)
	}
	if n := strings.Count(log.String(), "setting parked"); n != 1 {
		t.Errorf("%d log lines say the setting was parked, want 1:\n%s", n, log.String())
	}
	// rx-1 stays enforced while rx-0 is parked.
	os.WriteFile(rps("1"), []byte("2\n"), 0o644)
	waitForT(t, func() bool { return strings.Contains(read("1"), "8") })
}
