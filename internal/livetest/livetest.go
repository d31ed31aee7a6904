// Package livetest holds what live tests (root, real processes, namespaces)
// in several packages need alike: running a command, building the irqpilot
// binary once, and a buffer a process's output goroutine and the test
// share. Only tests import it.
package livetest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/hostgen"
	"github.com/irqpilot/irqpilot/internal/kernel"
)

// MovableIRQs are the IRQs a live test may write: those irqpilot's own
// classification (action names and sysfs ownership, the way inventory sees
// them) ties to no NIC, no storage device and no timer, and whose actions
// name no network interface of this machine. So the machine's management
// link (eth0 here; ens5, enp0s3 or ena-mgmnt elsewhere) and its disks are
// never probed or moved, whatever their driver calls their vectors.
func MovableIRQs(t testing.TB, fs *kernel.FS) map[int]bool {
	t.Helper()
	h, err := host.Read(fs, host.Options{})
	if err != nil {
		t.Fatal(err)
	}
	netdevs, _ := fs.NetDevices()
	out := map[int]bool{}
	for _, q := range h.IRQs {
		if q.Class != host.ClassOther || q.Device != "" || len(q.Actions) == 0 {
			continue
		}
		ok := true
		for _, a := range q.Actions {
			if strings.Contains(a, "virtio") || strings.Contains(a, "nvme") {
				ok = false
			}
			for _, d := range netdevs {
				if strings.Contains(a, d) {
					ok = false
				}
			}
		}
		if ok {
			out[q.Number] = true
		}
	}
	return out
}

// Run runs name with args and returns its trimmed combined output; a
// failure fails the test with the output.
func Run(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

var built atomic.Bool

var binary = sync.OnceValues(func() (string, error) {
	built.Store(true)
	root, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		return "", fmt.Errorf("module root: %v", err)
	}
	dir, err := os.MkdirTemp("", "irqpilot-livetest-bin-")
	if err != nil {
		return "", err
	}
	// Reachable by other users: tests run it as nobody too.
	if err := os.Chmod(dir, 0o755); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "irqpilot")
	build := exec.Command("go", "build", "-trimpath", "-o", bin, "./cmd/irqpilot")
	build.Dir = strings.TrimSpace(string(root))
	// Static: runs in a bare mount namespace or container root too.
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build irqpilot: %v\n%s", err, out)
	}
	return bin, nil
})

// Irqpilot is the path of an irqpilot binary built from this module, once
// per test binary (in a directory under TMPDIR left to the OS's cleanup:
// other tests of the same binary may still run it).
func Irqpilot(t testing.TB) string {
	t.Helper()
	bin, err := binary()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// Buffer is a bytes.Buffer that a process's output copier and the test
// may use at once.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// RemoveBuilt removes the binary Irqpilot built, if it did: call it from
// TestMain after m.Run.
func RemoveBuilt() {
	if built.Load() {
		if bin, _ := binary(); bin != "" {
			os.RemoveAll(filepath.Dir(bin))
		}
	}
}

// QuietIRQ is a real IRQ of this machine to watch a pending move on, with
// what to write to start one: not a network, disk or virtio IRQ (eth0 is
// never touched), writable (not kernel-managed: writing back its own value
// succeeds), landing on CPUs that leave another online CPU to move it to,
// and of those the one with the fewest interrupts so far (an ACPI or
// serial line that rarely fires), so that its next interrupt is unlikely to
// come during the test. It is first allowed on every online CPU (which
// holds where it lands, so nothing moves), so that writing to is a change
// even if an earlier run left it there; its affinity is restored in
// t.Cleanup. Skips when the machine has none.
func QuietIRQ(t testing.TB, fs *kernel.FS) (irq int, to cpuset.Set) {
	t.Helper()
	cpus, err := fs.OnlineCPUs()
	if err != nil {
		t.Fatal(err)
	}
	in := interrupts(t, fs)
	best, fewest := -1, uint64(0)
	var bestTo cpuset.Set
	var bestCur string
	movable := MovableIRQs(t, fs)
	for i := range in.Lines {
		l := &in.Lines[i]
		if l.IRQ < 0 || !movable[l.IRQ] {
			continue
		}
		if best >= 0 && l.Total() >= fewest {
			continue
		}
		eff, err := fs.ReadIRQEffectiveAffinity(l.IRQ)
		if err != nil || eff.IsEmpty() || cpus.Difference(eff).IsEmpty() {
			continue
		}
		cur, err := writableAffinity(fs, l.IRQ)
		if err != nil {
			continue // managed or per-CPU
		}
		best, fewest, bestTo, bestCur = l.IRQ, l.Total(), cpus.Difference(eff), cur
	}
	if best < 0 {
		t.Skip("no writable non-network, non-disk IRQ with another online CPU to move it to")
	}
	p := kernel.IRQAffinityListPath(best)
	t.Cleanup(func() {
		if err := fs.WriteFile(p, bestCur); err != nil {
			t.Errorf("restore irq %d affinity %q: %v", best, bestCur, err)
		}
	})
	if err := fs.WriteFile(p, cpus.String()); err != nil {
		t.Fatalf("irq %d: allow every online CPU (%s): %v", best, cpus, err)
	}
	return best, bestTo
}

// MovableIRQ returns the first IRQ of MovableIRQs whose affinity this
// machine lets a test write (not kernel-managed, not per-CPU) and its
// current affinity, which t.Cleanup writes back.
func MovableIRQ(t testing.TB, fs *kernel.FS) (int, string) {
	t.Helper()
	movable := MovableIRQs(t, fs)
	irqs := make([]int, 0, len(movable))
	for n := range movable {
		irqs = append(irqs, n)
	}
	sort.Ints(irqs)
	for _, n := range irqs {
		cur, err := writableAffinity(fs, n)
		if err != nil {
			continue // managed or per-CPU
		}
		p := kernel.IRQAffinityListPath(n)
		t.Cleanup(func() {
			if err := fs.WriteFile(p, cur); err != nil {
				t.Errorf("restore irq %d affinity %q: %v", n, cur, err)
			}
		})
		return n, cur
	}
	t.Skip("no movable IRQ that is not a NIC's, a disk's or a timer's on this machine")
	return 0, ""
}

// writableAffinity reads irq's affinity and writes it back unchanged: an
// error when either fails (a kernel-managed or per-CPU IRQ refuses the
// write). It returns the affinity as a cpulist.
func writableAffinity(fs *kernel.FS, irq int) (string, error) {
	cur, err := fs.ReadIRQAffinity(irq)
	if err != nil {
		return "", err
	}
	if err := fs.WriteFile(kernel.IRQAffinityListPath(irq), cur.String()); err != nil {
		return "", err
	}
	return cur.String(), nil
}

// IRQCount is irq's interrupts so far, all CPUs (/proc/interrupts).
func IRQCount(t testing.TB, fs *kernel.FS, irq int) uint64 {
	t.Helper()
	in := interrupts(t, fs)
	if l := in.Line(irq); l != nil {
		return l.Total()
	}
	t.Fatalf("irq %d is not in /proc/interrupts", irq)
	return 0
}

// Start starts cmd and, when the test ends, stops it by PID: SIGTERM, then
// SIGKILL if it has not exited after grace. The channel closes when it
// has exited (its Wait returned).
func Start(t testing.TB, cmd *exec.Cmd, grace time.Duration) <-chan struct{} {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", strings.Join(cmd.Args, " "), err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(grace):
			cmd.Process.Kill()
			<-done
		}
	})
	return done
}

// interrupts reads and parses /proc/interrupts.
func interrupts(t testing.TB, fs *kernel.FS) *kernel.Interrupts {
	t.Helper()
	in, err := fs.Interrupts()
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// WriteTree writes files (path below the root → content) under a new
// temporary directory and returns it: a small kernel tree whose files hold
// what a real kernel prints, for tests that need no live machine.
func WriteTree(t testing.TB, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, v := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// GenHost generates the host spec describes (internal/hostgen) under a new
// temporary directory and returns its root and irqpilot's model of it.
func GenHost(t testing.TB, spec hostgen.Spec) (string, *host.Host) {
	t.Helper()
	root := t.TempDir()
	if err := hostgen.Generate(root, spec); err != nil {
		t.Fatal(err)
	}
	h, err := host.Read(kernel.New(root), host.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return root, h
}

// Ethtool runs ethtool with args (such as "-c", "eth0") and returns its
// output; it skips the test where ethtool is not installed or the query
// fails (a driver that does not support it).
func Ethtool(t testing.TB, args ...string) string {
	t.Helper()
	bin, err := exec.LookPath("ethtool")
	if err != nil {
		t.Skip("ethtool not installed (make deps installs it)")
	}
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil {
		t.Skipf("ethtool %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// RestoreAllIRQs saves every IRQ's affinity now and puts back, when the
// test ends, each one that differs then (what a daemon the test ran, or a
// verb that should not have, moved). With changedIsError a difference
// fails the test; else it is logged.
func RestoreAllIRQs(t testing.TB, changedIsError bool) {
	t.Helper()
	fs := kernel.New("/")
	saved := map[int]cpuset.Set{}
	irqs, _ := fs.ProcIRQs()
	for _, irq := range irqs {
		if s, err := fs.ReadIRQAffinity(irq); err == nil {
			saved[irq] = s
		}
	}
	t.Cleanup(func() {
		for irq, v := range saved {
			now, err := fs.ReadIRQAffinity(irq)
			if err != nil || now.Equal(v) {
				continue
			}
			p := kernel.IRQAffinityListPath(irq)
			if err := fs.WriteFile(p, v.String()); err != nil {
				t.Errorf("restore /%s to %q: %v", p, v, err)
			} else if changedIsError {
				t.Errorf("/%s was %q after the test, restored to %q", p, now, v)
			}
		}
	})
}
