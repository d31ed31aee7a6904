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
	"testing"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/host"
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
	netdevs, _ := os.ReadDir(fs.Path("sys/class/net"))
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
				if strings.Contains(a, d.Name()) {
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
	online, err := fs.ReadString("sys/devices/system/cpu/online")
	if err != nil {
		t.Fatal(err)
	}
	cpus, err := cpuset.Parse(online)
	if err != nil {
		t.Fatal(err)
	}
	in, err := fs.Interrupts()
	if err != nil {
		t.Fatal(err)
	}
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
		p := kernel.IRQAffinityListPath(l.IRQ)
		cur, err := fs.ReadString(p)
		if err != nil || fs.WriteFile(p, cur) != nil {
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
		p := kernel.IRQAffinityListPath(n)
		cur, err := fs.ReadString(p)
		if err != nil || fs.WriteFile(p, cur) != nil {
			continue // managed or per-CPU
		}
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

// IRQCount is irq's interrupts so far, all CPUs (/proc/interrupts).
func IRQCount(t testing.TB, fs *kernel.FS, irq int) uint64 {
	t.Helper()
	in, err := fs.Interrupts()
	if err != nil {
		t.Fatal(err)
	}
	if l := in.Line(irq); l != nil {
		return l.Total()
	}
	t.Fatalf("irq %d is not in /proc/interrupts", irq)
	return 0
}
