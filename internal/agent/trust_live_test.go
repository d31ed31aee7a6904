package agent

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A plan in a directory anyone may write is refused, unless the directory
// is on a read-only mount (a Kubernetes ConfigMap volume mounted readOnly
// is mode 0777): no one can change it through that mount. A tmpfs of the
// test's own, mounted in a temporary directory and unmounted after.
func TestLivePlanOnReadOnlyMountTrusted(t *testing.T) {
	needRoot(t)
	dir := filepath.Join(t.TempDir(), "config")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	run(t, "mount", "-t", "tmpfs", "-o", "size=1m,mode=0777", "irqp-agentsec", dir)
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
	needRoot(t)
	dir := filepath.Join(t.TempDir(), "config")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	run(t, "mount", "-t", "tmpfs", "-o", "size=1m,mode=0755", "irqp-agentsec", dir)
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
	needRoot(t)
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("setpriv (util-linux) not installed")
	}
	b := newBed(t, 2)
	dir, err := os.MkdirTemp("", "irqp-agentsec-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
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
