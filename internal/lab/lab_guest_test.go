package lab

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/livetest"
)

// The lab's tests boot Debian's kernel in QEMU under TCG and assert what
// the real kernel and drivers show. LAB_SHAPES names the shapes to boot
// (default "small": about half a minute each on this 2-core machine);
// `make test-lab` runs every shape.

var (
	buildOnce sync.Once
	guestBin  string
	buildErr  error
)

// guestIrqpilot builds irqpilot for the guest once per test binary: static,
// since the guest has no C library.
func guestIrqpilot(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "irqpilot-lab-bin-")
		if err != nil {
			buildErr = err
			return
		}
		guestBin = filepath.Join(dir, "irqpilot")
		b := exec.Command("go", "build", "-o", guestBin, "../../cmd/irqpilot")
		b.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
		if out, err := b.CombinedOutput(); err != nil {
			buildErr = err
			guestBin = string(out)
		}
	})
	if buildErr != nil {
		t.Fatalf("building irqpilot for the guest: %v\n%s", buildErr, guestBin)
	}
	return guestBin
}

func needLab(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("lab test; -short")
	}
	livetest.NeedRoot(t)
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		t.Skip("no QEMU (make test installs qemu-system-x86)")
	}
}

// labCase is one shape booted on one kernel ("" the default).
type labCase struct {
	Shape  Shape
	Kernel string
}

// Name is the subtest's name: the shape's, with the kernel after an @
// when LAB_KERNELS chose it.
func (c labCase) Name() string {
	if c.Kernel == "" {
		return c.Shape.Name
	}
	return c.Shape.Name + "@" + c.Kernel
}

// labMatrix is every shape of LAB_SHAPES on every kernel of LAB_KERNELS
// (unset: the default kernel alone).
func labMatrix(t *testing.T) []labCase {
	kernels := []string{""}
	if os.Getenv("LAB_KERNELS") != "" {
		kernels = labKernels(t)
	}
	var out []labCase
	for _, k := range kernels {
		for _, s := range labShapes(t) {
			out = append(out, labCase{Shape: s, Kernel: k})
		}
	}
	return out
}

// labKernelCases is the first shape of LAB_SHAPES on every kernel of
// LAB_KERNELS: the tests that need one machine of each kernel.
func labKernelCases(t *testing.T) []labCase {
	var out []labCase
	for _, c := range labMatrix(t) {
		if c.Shape.Name == labShapes(t)[0].Name {
			out = append(out, c)
		}
	}
	return out
}

func labShapes(t *testing.T) []Shape {
	names := strings.Fields(strings.ReplaceAll(os.Getenv("LAB_SHAPES"), ",", " "))
	if len(names) == 0 {
		names = []string{"small"}
	}
	var out []Shape
	for _, n := range names {
		s, err := Lookup(n)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

// TestLabInventory: irqpilot's inventory inside the guest is the machine
// QEMU was given — CPUs, packages, SMT siblings, NUMA nodes, the NIC's
// node, one IRQ per queue, the NVMe controller's per-CPU queue IRQs — and
// the opt-in probe finds those NVMe queue IRQs kernel-managed.
func TestLabInventory(t *testing.T) {
	eachCase(t, func(t *testing.T, c labCase) {
		s := c.Shape
		r := runGuest(t, Options{
			Shape:  s,
			Kernel: c.Kernel,
			Script: `set -e
irqpilot inventory --json > /tmp/inv.json
irqpilot inventory --json --probe-managed > /tmp/probed.json
echo '@@INV@@'; cat /tmp/inv.json; echo '@@PROBED@@'; cat /tmp/probed.json`,
		})
		t.Logf("%s booted and ran in %s (kernel %s)", s.Name, r.Elapsed.Round(100e6), r.Kernel)
		if r.ExitCode != 0 {
			t.Fatalf("guest script exited %d:\n%s", r.ExitCode, r.Output)
		}
		inv, probed := split(t, r.Output)
		checkTopology(t, s, inv)
		checkNICs(t, s, inv)
		checkNVMe(t, s, inv, probed)
		checkVirtioBlk(t, s, inv, probed)
	})
}

type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func split(t *testing.T, out string) (inv, probed *host.Host) {
	t.Helper()
	i := strings.Index(out, "@@INV@@\n")
	j := strings.Index(out, "@@PROBED@@\n")
	if i < 0 || j < i {
		t.Fatalf("guest output lacks the inventories:\n%s", out)
	}
	inv, probed = &host.Host{}, &host.Host{}
	if err := json.Unmarshal([]byte(out[i+8:j]), inv); err != nil {
		t.Fatalf("inventory JSON: %v", err)
	}
	if err := json.Unmarshal([]byte(out[j+11:]), probed); err != nil {
		t.Fatalf("probed inventory JSON: %v", err)
	}
	return inv, probed
}

func checkTopology(t *testing.T, s Shape, h *host.Host) {
	t.Helper()
	if len(h.CPUs) != s.CPUs() {
		t.Fatalf("%d CPUs, QEMU was given %d", len(h.CPUs), s.CPUs())
	}
	pkgs := map[int]bool{}
	per := s.CPUs() / s.Nodes
	for _, c := range h.CPUs {
		pkgs[c.Package] = true
		if want := c.ID / per; c.Node != want {
			t.Errorf("CPU %d on node %d, QEMU put it on node %d", c.ID, c.Node, want)
		}
		if n := len(c.Siblings.CPUs()); n != s.Threads {
			t.Errorf("CPU %d has SMT siblings %s (%d), want %d threads per core", c.ID, c.Siblings, n, s.Threads)
		}
	}
	if len(pkgs) != s.Sockets {
		t.Errorf("%d packages, QEMU was given %d", len(pkgs), s.Sockets)
	}
}

func checkNICs(t *testing.T, s Shape, h *host.Host) {
	t.Helper()
	byDriver := map[string][]host.NIC{}
	physical := 0
	for _, n := range h.NICs {
		if n.Virtual {
			continue
		}
		physical++
		byDriver[n.Driver] = append(byDriver[n.Driver], n)
	}
	if physical != len(s.NICs) {
		t.Errorf("%d physical NICs in the inventory, QEMU was given %d (%+v)", physical, len(s.NICs), h.NICs)
	}
	wanted := map[string]int{}
	for _, want := range s.NICs {
		drv := NICDrivers[want.Model]
		got := byDriver[drv]
		if wanted[drv] >= len(got) {
			t.Errorf("%d %s NICs in the inventory, the shape has more (NICs: %+v)", len(got), drv, h.NICs)
			continue
		}
		// Each of the shape's NICs of a driver against the next of the
		// inventory's, in name order (QEMU adds them in shape order).
		n := got[wanted[drv]]
		wanted[drv]++
		if want.Node >= 0 && n.Node != want.Node {
			t.Errorf("%s (%s) on node %d, QEMU put it behind node %d's bridge", n.Name, drv, n.Node, want.Node)
		}
		if drv != "virtio_net" {
			if len(n.IRQs) == 0 {
				t.Errorf("%s (%s) has no IRQs", n.Name, drv)
			}
			continue
		}
		if len(n.RxQueues) != want.Queues {
			t.Errorf("%s has %d rx queues, QEMU gave it %d", n.Name, len(n.RxQueues), want.Queues)
		}
		seen := map[int]bool{}
		for _, q := range n.RxQueues {
			if q.IRQ == nil {
				t.Errorf("%s rx-%d has no IRQ", n.Name, q.Index)
				continue
			}
			if seen[*q.IRQ] {
				t.Errorf("%s rx-%d shares IRQ %d", n.Name, q.Index, *q.IRQ)
			}
			seen[*q.IRQ] = true
		}
	}
}

func checkNVMe(t *testing.T, s Shape, inv, probed *host.Host) {
	t.Helper()
	if !s.NVMe {
		return
	}
	var nvme []host.IRQ
	for _, q := range inv.IRQs {
		if q.Device == "nvme0" && q.Queue != nil {
			nvme = append(nvme, q)
		}
	}
	// One I/O queue per CPU: QEMU's controller offers 64 pairs, the
	// driver asks for one per possible CPU (no poll or read queues).
	if len(nvme) != s.CPUs() {
		t.Fatalf("%d NVMe I/O queue IRQs, want one per CPU (%d)", len(nvme), s.CPUs())
	}
	for _, q := range nvme {
		if q.Managed == host.ManagedNo {
			t.Errorf("IRQ %d (%v) read as not managed without a probe", q.Number, q.Actions)
		}
		p := findIRQ(probed, q.Number)
		if p == nil || p.Managed != host.ManagedYes {
			t.Errorf("IRQ %d (%v): the probe did not find it kernel-managed (%+v)", q.Number, q.Actions, p)
		}
	}
}

// checkVirtioBlk: the virtio-blk disk has one queue IRQ per queue QEMU gave
// it, each kernel-managed (found so by the probe).
func checkVirtioBlk(t *testing.T, s Shape, inv, probed *host.Host) {
	t.Helper()
	if s.BlkQueues == 0 {
		return
	}
	var blk []host.IRQ
	for _, q := range inv.IRQs {
		for _, a := range q.Actions {
			if strings.HasPrefix(a, "virtio") && strings.Contains(a, "-req.") {
				blk = append(blk, q)
				break
			}
		}
	}
	if len(blk) != s.BlkQueues {
		t.Fatalf("%d virtio-blk queue IRQs, QEMU gave the disk %d queues", len(blk), s.BlkQueues)
	}
	for _, q := range blk {
		if q.Device == "" || q.Queue == nil {
			t.Errorf("virtio-blk IRQ %d (%v) not tied to its disk's queue: device %q", q.Number, q.Actions, q.Device)
		}
		if p := findIRQ(probed, q.Number); p == nil || p.Managed != host.ManagedYes {
			t.Errorf("virtio-blk IRQ %d (%v): the probe did not find it kernel-managed", q.Number, q.Actions)
		}
	}
}

func findIRQ(h *host.Host, n int) *host.IRQ {
	for i := range h.IRQs {
		if h.IRQs[i].Number == n {
			return &h.IRQs[i]
		}
	}
	return nil
}

func field(out, key string) string {
	for _, l := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(l, key+" "); ok {
			return v
		}
	}
	return ""
}

func sub(a, b string) string {
	var x, y float64
	fmt.Sscan(a, &x)
	fmt.Sscan(b, &y)
	return fmt.Sprintf("%.1f", x-y)
}

func keys(m map[int]bool) []int {
	var k []int
	for c := range m {
		k = append(k, c)
	}
	sort.Ints(k)
	return k
}

// section returns the output between a marker line and the next "@@" line.
func section(out, marker string) string {
	i := strings.Index(out, marker+"\n")
	if i < 0 {
		return ""
	}
	rest := out[i+len(marker)+1:]
	if j := strings.Index(rest, "@@"); j >= 0 {
		rest = rest[:j]
	}
	return rest
}
