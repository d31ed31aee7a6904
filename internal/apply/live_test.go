package apply

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/livetest"
	"github.com/irqpilot/irqpilot/internal/setting"
)

// movableIRQ finds a real IRQ of this machine whose affinity can be written,
// preferring ones that are not network or disk (serial, ACPI), so the test
// does not disturb eth0's traffic. It restores the affinity in t.Cleanup.
// movableIRQ is livetest.MovableIRQ: never a NIC's, a disk's or a timer's.
func movableIRQ(t *testing.T, fs *kernel.FS) (int, string) {
	t.Helper()
	return livetest.MovableIRQ(t, fs)
}

func TestLiveMoveRealIRQAndRevert(t *testing.T) {
	livetest.NeedRoot(t)
	fs := kernel.New("/")
	irq, orig := movableIRQ(t, fs)
	cpus, err := fs.OnlineCPUs()
	if err != nil {
		t.Fatal(err)
	}
	target := cpuset.Of(cpus.Max()) // the last online CPU
	if target.Equal(cpuset.MustParse(orig)) {
		target = cpuset.Of(cpus.Min())
	}
	p := fmt.Sprintf("proc/irq/%d/smp_affinity_list", irq)
	a := &Applier{Env: setting.Env{FS: fs}, StateDir: t.TempDir()}
	changes := []setting.Change{
		{Kind: setting.KindIRQAffinity, Target: fmt.Sprintf("irq %d", irq), Path: p, Value: target.String()},
	}
	// The managed virtio-blk IRQ (if this machine has one) is reported as
	// skipped, not as a failure.
	managed := managedIRQ(fs)
	if managed > 0 {
		mp := fmt.Sprintf("proc/irq/%d/smp_affinity_list", managed)
		cur, _ := fs.ReadSettingFile(mp)
		other := cpuset.MustParse(cur).Difference(cpuset.Of(cpus.Min()))
		if other.IsEmpty() {
			other = cpuset.Of(cpus.Min())
		}
		changes = append(changes, setting.Change{Kind: setting.KindIRQAffinity, Target: fmt.Sprintf("irq %d", managed), Path: mp, Value: other.String()})
	}
	res, err := a.Apply(changes, Meta{})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := fs.ReadSettingFile(p); !cpuset.MustParse(got).Equal(target) {
		t.Fatalf("irq %d affinity = %q after apply, want %s", irq, got, target)
	}
	if res.Entries[0].Status != setting.StatusDone || !strings.HasPrefix(res.Entries[0].Note, "effective ") {
		t.Errorf("irq %d entry = %+v", irq, res.Entries[0])
	}
	if managed > 0 {
		e := res.Entries[1]
		if e.Status != setting.StatusSkipped || !strings.Contains(e.Note, "kernel-managed") {
			t.Errorf("managed irq %d: status %s note %q, want skipped as kernel-managed", managed, e.Status, e.Note)
		}
	}
	if _, err := a.Revert("", false); err != nil {
		t.Fatal(err)
	}
	if got, _ := fs.ReadSettingFile(p); !cpuset.MustParse(got).Equal(cpuset.MustParse(orig)) {
		t.Fatalf("irq %d affinity = %q after revert, want %q", irq, got, orig)
	}
}

// managedIRQ returns a virtio-blk request IRQ, which this machine's kernel
// manages, or 0.
func managedIRQ(fs *kernel.FS) int {
	in, err := fs.Interrupts()
	if err != nil {
		return 0
	}
	for _, l := range in.Lines {
		for _, a := range l.Actions {
			if strings.HasPrefix(a, "virtio") && strings.Contains(a, "-req.") {
				p := fmt.Sprintf("proc/irq/%d/smp_affinity_list", l.IRQ)
				cur, _ := fs.ReadSettingFile(p)
				if err := fs.WriteFile(p, cur); err != nil {
					return l.IRQ
				}
			}
		}
	}
	return 0
}

// TestLivePinMultiThreadedProcess starts memcached with 4 worker threads,
// pins every thread through the journal, checks Cpus_allowed_list of each
// thread in /proc, and reverts.
func TestLivePinMultiThreadedProcess(t *testing.T) {
	livetest.NeedRoot(t, "memcached")
	bin, _ := exec.LookPath("memcached")
	cmd := exec.Command(bin, "-u", "nobody", "-t", "4", "-l", "127.0.0.1", "-p", "0", "-U", "0")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	fs := kernel.New("/")
	var tids []int
	for i := 0; i < 100; i++ { // memcached starts its threads right away
		tids, _ = fs.Tasks(pid)
		if len(tids) >= 5 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(tids) < 5 {
		t.Fatalf("memcached has %d threads, want ≥ 5 (main + 4 workers)", len(tids))
	}
	// memcached keeps starting helper threads (LRU crawler, maintainer)
	// for a moment after its workers: wait until the set is stable, so the
	// test pins what the process has, not a moving target.
	for i, stable := 0, 0; i < 100 && stable < 5; i++ {
		time.Sleep(50 * time.Millisecond)
		next, _ := fs.Tasks(pid)
		if len(next) == len(tids) {
			stable++
		} else {
			stable, tids = 0, next
		}
	}
	online, _ := fs.OnlineCPUs()
	target := cpuset.Of(online.Max())
	changes, err := setting.PinProcess(fs, pid, "memcached", target, "test pin")
	if err != nil {
		t.Fatal(err)
	}
	a := &Applier{Env: setting.Env{FS: fs}, StateDir: t.TempDir()}
	if _, err := a.Apply(changes, Meta{}); err != nil {
		t.Fatal(err)
	}
	now, _ := fs.Tasks(pid)
	for _, tid := range now {
		got := allowed(t, pid, tid)
		if !got.Equal(target) {
			t.Errorf("thread %d Cpus_allowed_list = %s, want %s", tid, got, target)
		}
	}
	if _, err := a.Revert("", false); err != nil {
		t.Fatal(err)
	}
	all := online
	for _, tid := range now {
		if got := allowed(t, pid, tid); !got.Equal(all) {
			t.Errorf("thread %d Cpus_allowed_list = %s after revert, want %s", tid, got, all)
		}
	}
}

func allowed(t *testing.T, pid, tid int) cpuset.Set {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/status", pid, tid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "Cpus_allowed_list:"); ok {
			return cpuset.MustParse(v)
		}
	}
	t.Fatalf("no Cpus_allowed_list for %d/%d", pid, tid)
	return cpuset.Set{}
}

// A real IRQ moved while it is idle: on x86 without interrupt remapping the
// kernel moves it at its next interrupt, so after the write its
// smp_affinity_list shows the new CPUs and effective_affinity_list the old
// one. The apply is done, read back, and its note says the move is pending;
// revert puts the old affinity back. (This machine's quietest writable IRQ,
// an ACPI line, never eth0's.)
func TestLiveMovePendingUntilNextInterrupt(t *testing.T) {
	livetest.NeedRoot(t)
	fs := kernel.New("/")
	irq, to := livetest.QuietIRQ(t, fs)
	before, err := fs.ReadIRQAffinity(irq)
	if err != nil {
		t.Fatal(err)
	}
	count := livetest.IRQCount(t, fs, irq)
	a := &Applier{Env: setting.Env{FS: fs}, StateDir: t.TempDir()}
	c := setting.IRQAffinity(irq, fmt.Sprintf("irq %d", irq), to, "pending move test")
	res, err := a.Apply([]setting.Change{c}, Meta{})
	if err != nil {
		t.Fatal(err)
	}
	e := res.Entries[0]
	eff, err := fs.ReadIRQEffectiveAffinity(irq)
	if err != nil {
		t.Fatal(err)
	}
	fired := livetest.IRQCount(t, fs, irq) != count
	t.Logf("irq %d: wrote %s, effective %s, note %q, fired during the test: %v", irq, to, eff, e.Note, fired)
	if got, _ := fs.ReadIRQAffinity(irq); !got.Equal(to) {
		t.Errorf("smp_affinity_list %s after the write, want %s (the kernel shows the pending CPUs)", got, to)
	}
	if e.Status != setting.StatusDone {
		t.Errorf("status %s, want done: a pending move is written and read back", e.Status)
	}
	switch {
	case !eff.IsSubsetOf(to):
		if !setting.MovePending(&e) || !strings.HasSuffix(e.Note, host.MovePendingNote) {
			t.Errorf("irq %d lands on %s outside %s but the note %q does not say the move is pending", irq, eff, to, e.Note)
		}
	case fired:
		t.Skipf("irq %d fired during the test (moved to %s): no pending move to see", irq, eff)
	default:
		// This kernel moved it at once (interrupt remapping, or an
		// architecture that moves in process context): nothing pending.
		if setting.MovePending(&e) {
			t.Errorf("note %q while irq %d already lands on %s", e.Note, irq, eff)
		}
	}
	if _, err := a.Revert("", false); err != nil {
		t.Fatal(err)
	}
	if got, _ := fs.ReadIRQAffinity(irq); !got.Equal(before) {
		t.Errorf("affinity %s after revert, want %s", got, before)
	}
}
