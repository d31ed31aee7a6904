package host

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/livetest/liveroot"
)

const irqFixtures = "../../../shared/fixtures"

// vm2cpu is a capture of this project's 2-CPU virtio VM (owned by the kernel package).
const vm2cpu = "../kernel/testdata/vm2cpu"

func unavailableFor(h *Host, path string) []Unavailable {
	var out []Unavailable
	for _, u := range h.Unavailable {
		if u.Path == path {
			out = append(out, u)
		}
	}
	return out
}

func TestReadIRQsSnapshotWorker1(t *testing.T) {
	kfs, cleanup, err := kernel.OpenSnapshot(filepath.Join(irqFixtures, "cluster-node-tuning-operator/bare-metal-worker1.internal-sysinfo.tgz"))
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	h := &Host{}
	if err := readIRQs(kfs, h, Options{ProbeManaged: true}); err != nil {
		t.Fatal(err)
	}
	if len(h.IRQs) != 542 || !slices.IsSortedFunc(h.IRQs, func(a, b IRQ) int { return a.Number - b.Number }) {
		t.Fatalf("%d IRQs (sorted: %v)", len(h.IRQs), slices.IsSortedFunc(h.IRQs, func(a, b IRQ) int { return a.Number - b.Number }))
	}
	q := h.IRQ(69)
	if q == nil || q.Chip != "IR-PCI-MSIX-0000:18:00.0" || q.HWIRQ != "0" || q.Trigger != "edge" ||
		!slices.Equal(q.Actions, []string{"megasas1-msix0"}) || len(q.Counts) != 80 || q.Counts[34] != 680 || q.Total() != 680 {
		t.Fatalf("irq 69 = %+v", q)
	}
	// Counted on CPU 34 earlier, now pinned to CPU 32 (isolcpus=managed_irq).
	if q.Affinity.String() != "32" || q.EffectiveAffinity.String() != "32" || *q.Node != 0 || q.Managed != ManagedUnknown {
		t.Errorf("irq 69 placement %v %v %d %s", q.Affinity, q.EffectiveAffinity, *q.Node, q.Managed)
	}
	if q := h.IRQ(70); q.Affinity.String() != "1" || *q.Node != 1 {
		t.Errorf("irq 70 placement %v node %d", q.Affinity, *q.Node)
	}
	if q := h.IRQ(253); !slices.Equal(q.Actions, []string{"i40e-eno1-TxRx-0"}) || q.EffectiveAffinity.String() != "62" {
		t.Errorf("irq 253 = %v %v", q.Actions, q.EffectiveAffinity)
	}
	if q := h.IRQ(0); q.Affinity.String() != "0-79" || q.Class != "" || q.Device != "" || q.Queue != nil {
		t.Errorf("irq 0 = %+v", q)
	}
	if len(h.Summary) != 19 || h.Summary[1].Name != "LOC" || h.Summary[1].Counts[1] != 70758248 {
		t.Errorf("summary %d rows, second %+v", len(h.Summary), h.Summary[1].Name)
	}
	for _, s := range h.Summary {
		if s.Name == "ERR" && (len(s.Counts) != 1 || s.Counts[SingleTotalCPU] != 0) {
			t.Errorf("ERR = %v", s.Counts)
		}
	}
	// A snapshot is not live: no probe, no sysfs irq dir in this capture.
	if len(h.Unavailable) != 2 || len(unavailableFor(h, "/sys/kernel/irq")) != 1 || len(unavailableFor(h, "/irqpilot/managed.json")) != 1 {
		t.Errorf("unavailable: %+v", h.Unavailable)
	}
}

func TestReadIRQsOnlyProcInterrupts(t *testing.T) {
	root := t.TempDir()
	data, err := os.ReadFile(filepath.Join(irqFixtures, "sysstat/root4/proc/interrupts"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "proc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "proc/interrupts"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	h := &Host{}
	if err := readIRQs(kernel.New(root), h, Options{}); err != nil {
		t.Fatal(err)
	}
	if len(h.IRQs) != 21 {
		t.Fatalf("%d IRQs", len(h.IRQs))
	}
	q := h.IRQ(27)
	if q.Counts[8] != 50 || len(q.Counts) != 8 || q.Affinity != nil || q.EffectiveAffinity != nil || q.Node != nil || q.Managed != ManagedUnknown {
		t.Errorf("irq 27 = %+v", q)
	}
	if _, ok := q.Counts[6]; ok {
		t.Error("offline CPU 6 has a count")
	}
	if len(unavailableFor(h, "/proc/irq")) != 1 || len(h.Unavailable) != 3 {
		t.Errorf("unavailable: %+v", h.Unavailable)
	}
	b, err := json.Marshal(q)
	if err != nil || !strings.Contains(string(b), `"counts":{"0":0,"1":0,"2":0,"3":0,"4":0,"5":0,"7":0,"8":50}`) ||
		!strings.Contains(string(b), `"actions":["xhci_hcd"]`) || !strings.Contains(string(b), `"affinity":null`) {
		t.Errorf("json %s", b)
	}
}

func TestReadIRQsErrors(t *testing.T) {
	root := t.TempDir()
	// A capture without /proc/interrupts (ghw's topology snapshots): an
	// empty IRQ table, reported unavailable, not a failure.
	h := &Host{}
	err := readIRQs(kernel.New(root), h, Options{})
	if err != nil || h.IRQs == nil || len(h.IRQs) != 0 || len(unavailableFor(h, "/proc/interrupts")) != 1 {
		t.Errorf("missing file: err %v, irqs %v, unavailable %+v", err, h.IRQs, h.Unavailable)
	}
	os.MkdirAll(filepath.Join(root, "proc"), 0o755)
	os.WriteFile(filepath.Join(root, "proc/interrupts"), []byte("  CPU0 CPU1\n 0: 1 IO-APIC 2-edge timer\n"), 0o644)
	err = readIRQs(kernel.New(root), &Host{}, Options{})
	var pe *kernel.ParseError
	if !errors.As(err, &pe) || pe.Line != 2 || pe.File != "/proc/interrupts" {
		t.Errorf("garbled file: %v", err)
	}
}

// TestReadIRQsCaptureWithSysfs reads the VM capture, where /sys/kernel/irq
// was read just after /proc/interrupts: its counts win, and a saved probe
// result gives the managed states.
func TestReadIRQsCaptureWithSysfs(t *testing.T) {
	root := t.TempDir()
	if err := os.CopyFS(root, os.DirFS(vm2cpu)); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(root, kernel.SyntheticDir), 0o755)
	os.WriteFile(filepath.Join(root, kernel.SyntheticDir, ManagedFile), []byte(`{"managed":[36],"movable":[38,39]}`), 0o644)
	h := &Host{}
	if err := readIRQs(kernel.New(root), h, Options{}); err != nil {
		t.Fatal(err)
	}
	q := h.IRQ(36)
	// /proc/interrupts said 119918, per_cpu_count a moment later 119924.
	if q.Counts[1] != 119924 || q.Chip != "PCI-MSIX-0000:00:02.0" || q.HWIRQ != "1" || q.Managed != ManagedYes ||
		q.Affinity.String() != "0-1" || q.EffectiveAffinity.String() != "1" || *q.Node != 0 {
		t.Errorf("irq 36 = %+v", q)
	}
	if h.IRQ(38).Managed != ManagedNo || h.IRQ(39).Managed != ManagedNo || h.IRQ(24).Managed != ManagedUnknown || *h.IRQ(38).Node != -1 {
		t.Errorf("managed states 38 %s 39 %s 24 %s", h.IRQ(38).Managed, h.IRQ(39).Managed, h.IRQ(24).Managed)
	}
	if len(h.Unavailable) != 0 {
		t.Errorf("unavailable: %+v", h.Unavailable)
	}
	// A disagreement between sysfs and /proc/interrupts is recorded, sysfs wins.
	os.WriteFile(filepath.Join(root, "sys/kernel/irq/38/actions"), []byte("virtio2-rx.0\n"), 0o644)
	h = &Host{}
	if err := readIRQs(kernel.New(root), h, Options{}); err != nil {
		t.Fatal(err)
	}
	u := unavailableFor(h, "/sys/kernel/irq/38")
	if len(u) != 1 || !strings.Contains(u[0].Reason, "virtio2-input.0") || !slices.Equal(h.IRQ(38).Actions, []string{"virtio2-rx.0"}) {
		t.Errorf("cross-check: %+v, actions %v", u, h.IRQ(38).Actions)
	}
}

// TestReadIRQsLiveProbe runs the managed probe on this machine. IRQs are
// found by their actions, not their numbers: virtio-blk request queues
// ("virtioN-req.M") are kernel-managed, virtio-net queues ("virtioN-input.M")
// are not. The probe writes every IRQ's own affinity back, so every IRQ's
// allowed CPUs are compared before and after (and restored if they moved).
// The result survives a capture.
func TestReadIRQsLiveProbe(t *testing.T) {
	liveroot.Need(t)
	live := kernel.New("/")
	in, err := live.Interrupts()
	if err != nil {
		t.Fatal(err)
	}
	managedIRQ, movableIRQ := -1, -1
	before := map[int]cpuset.Set{}
	for _, l := range in.Lines {
		if l.IRQ < 0 {
			continue
		}
		if a, err := live.ReadIRQAffinity(l.IRQ); err == nil {
			before[l.IRQ] = a
		}
		for _, a := range l.Actions {
			switch {
			case managedIRQ < 0 && strings.HasPrefix(a, "virtio") && strings.Contains(a, "-req."):
				managedIRQ = l.IRQ
			case movableIRQ < 0 && strings.HasPrefix(a, "virtio") && strings.Contains(a, "-input."):
				movableIRQ = l.IRQ
			}
		}
	}
	if managedIRQ < 0 || movableIRQ < 0 {
		t.Skip("this machine has no virtio-blk and virtio-net queue IRQs to tell managed from movable")
	}
	t.Cleanup(func() {
		for irq, was := range before {
			if now, err := live.ReadIRQAffinity(irq); err == nil && !now.Equal(was) {
				t.Errorf("irq %d: affinity %s before the probe, %s after; restoring", irq, was, now)
				live.WriteFile(kernel.IRQAffinityListPath(irq), was.String())
			}
		}
	})
	live.StartRecording()
	h := &Host{}
	if err := readIRQs(live, h, Options{ProbeManaged: true}); err != nil {
		t.Fatal(err)
	}
	if q := h.IRQ(managedIRQ); q == nil || q.Managed != ManagedYes {
		t.Errorf("irq %d = %+v, want managed", managedIRQ, q)
	}
	if q := h.IRQ(movableIRQ); q == nil || q.Managed != ManagedNo || !q.Affinity.Equal(before[movableIRQ]) {
		t.Errorf("irq %d = %+v, want movable with affinity %s", movableIRQ, q, before[movableIRQ])
	}
	for _, u := range h.Unavailable {
		if strings.Contains(u.What, "managed") {
			t.Errorf("unavailable: %+v", u)
		}
	}
	saved := live.Synthetics()[ManagedFile]
	var probe managedProbe
	if err := json.Unmarshal(saved, &probe); err != nil || !slices.Contains(probe.Managed, managedIRQ) || !slices.Contains(probe.Movable, movableIRQ) {
		t.Fatalf("saved probe %s: %v", saved, err)
	}
	// Replay on a copy of what was read: same managed states.
	root := t.TempDir()
	for p := range live.Recorded() {
		if strings.HasPrefix(p, "/proc/irq/") && !strings.HasSuffix(p, "_list") && !strings.HasSuffix(p, "/node") {
			continue
		}
		if b, err := os.ReadFile(p); err == nil {
			os.MkdirAll(filepath.Join(root, filepath.Dir(p)), 0o755)
			os.WriteFile(filepath.Join(root, p), b, 0o644)
		}
	}
	os.MkdirAll(filepath.Join(root, kernel.SyntheticDir), 0o755)
	os.WriteFile(filepath.Join(root, kernel.SyntheticDir, ManagedFile), saved, 0o644)
	h2 := &Host{}
	if err := readIRQs(kernel.New(root), h2, Options{}); err != nil {
		t.Fatal(err)
	}
	if len(h2.IRQs) != len(h.IRQs) {
		t.Fatalf("replay: %d IRQs, live %d", len(h2.IRQs), len(h.IRQs))
	}
	for i := range h.IRQs {
		if h.IRQs[i].Managed != h2.IRQs[i].Managed {
			t.Errorf("irq %d: live %s, replay %s", h.IRQs[i].Number, h.IRQs[i].Managed, h2.IRQs[i].Managed)
		}
	}
}
