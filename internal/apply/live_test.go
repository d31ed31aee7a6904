package apply

import (
	"fmt"
	"github.com/irqpilot/irqpilot/internal/setting"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/livetest"
)

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (CI runs as root)")
	}
}

// movableIRQ finds a real IRQ of this machine whose affinity can be written,
// preferring ones that are not network or disk (serial, ACPI), so the test
// does not disturb eth0's traffic. It restores the affinity in t.Cleanup.
// movableIRQ is livetest.MovableIRQ: never a NIC's, a disk's or a timer's.
func movableIRQ(t *testing.T, fs *kernel.FS) (int, string) {
	t.Helper()
	return livetest.MovableIRQ(t, fs)
}

func TestLiveMoveRealIRQAndRevert(t *testing.T) {
	needRoot(t)
	fs := kernel.New("/")
	irq, orig := movableIRQ(t, fs)
	online, err := fs.ReadString("sys/devices/system/cpu/online")
	if err != nil {
		t.Fatal(err)
	}
	cpus := cpuset.MustParse(online)
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
		cur, _ := fs.ReadString(mp)
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
	if got, _ := fs.ReadString(p); !cpuset.MustParse(got).Equal(target) {
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
	if got, _ := fs.ReadString(p); !cpuset.MustParse(got).Equal(cpuset.MustParse(orig)) {
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
				cur, _ := fs.ReadString(p)
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
	needRoot(t)
	bin, err := exec.LookPath("memcached")
	if err != nil {
		t.Skip("memcached not installed (make deps installs it)")
	}
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
	online, _ := fs.ReadString("sys/devices/system/cpu/online")
	target := cpuset.Of(cpuset.MustParse(online).Max())
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
	all := cpuset.MustParse(online)
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
