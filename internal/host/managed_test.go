package host

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/irqpilot/irqpilot/internal/kernel"
)

// vmWithDebugfs copies the VM capture and adds debugfs files for IRQs 26
// (IO-APIC serial), 36 (virtio-blk request queue, managed) and 38
// (virtio-net input queue) as the kernel prints them.
func vmWithDebugfs(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	if err := os.CopyFS(root, os.DirFS(vm2cpu)); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, kernel.IRQDebugDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"26", "36", "38"} {
		b, err := os.ReadFile(filepath.Join("../kernel/testdata/irqdebug", n))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, n), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestReadManagedDebugfs(t *testing.T) {
	root := vmWithDebugfs(t)
	kfs := kernel.New(root)
	kfs.StartRecording()
	h := &Host{}
	if err := readIRQs(kfs, h, Options{}); err != nil {
		t.Fatal(err)
	}
	if h.IRQ(36).Managed != ManagedYes || h.IRQ(38).Managed != ManagedNo || h.IRQ(26).Managed != ManagedNo || h.IRQ(39).Managed != ManagedUnknown {
		t.Errorf("managed 36 %s 38 %s 26 %s 39 %s", h.IRQ(36).Managed, h.IRQ(38).Managed, h.IRQ(26).Managed, h.IRQ(39).Managed)
	}
	if len(h.Unavailable) != 0 {
		t.Errorf("unavailable: %+v", h.Unavailable)
	}
	// Captures refuse /sys/kernel/debug: its files are not recorded (on the
	// live machine the states go to the synthetic file instead).
	for p := range kfs.Recorded() {
		if strings.HasPrefix(p, "/sys/kernel/debug") {
			t.Errorf("recorded %s", p)
		}
	}

	// debugfs wins over a capture's synthetic file, which fills the rest.
	os.MkdirAll(filepath.Join(root, kernel.SyntheticDir), 0o755)
	os.WriteFile(filepath.Join(root, kernel.SyntheticDir, ManagedFile), []byte(`{"managed":[38],"movable":[36,39]}`), 0o644)
	h = &Host{}
	if err := readIRQs(kernel.New(root), h, Options{}); err != nil {
		t.Fatal(err)
	}
	if h.IRQ(36).Managed != ManagedYes || h.IRQ(38).Managed != ManagedNo || h.IRQ(39).Managed != ManagedNo || h.IRQ(24).Managed != ManagedUnknown {
		t.Errorf("managed 36 %s 38 %s 39 %s 24 %s", h.IRQ(36).Managed, h.IRQ(38).Managed, h.IRQ(39).Managed, h.IRQ(24).Managed)
	}

	// A garbled debugfs file is skipped; with nothing else known, that is said.
	os.Remove(filepath.Join(root, kernel.SyntheticDir, ManagedFile))
	for _, n := range []string{"26", "36", "38"} {
		os.WriteFile(filepath.Join(root, kernel.IRQDebugDir, n), []byte("handler:  handle_edge_irq\n"), 0o644)
	}
	h = &Host{}
	if err := readIRQs(kernel.New(root), h, Options{}); err != nil {
		t.Fatal(err)
	}
	u := unavailableFor(h, "/irqpilot/managed.json")
	if len(u) != 1 || !strings.Contains(u[0].Reason, "no dstate line") || !strings.Contains(u[0].Reason, "not in this snapshot") || h.IRQ(36).Managed != ManagedUnknown {
		t.Errorf("unavailable: %+v", h.Unavailable)
	}
}

func TestRecordManaged(t *testing.T) {
	live := kernel.New("/")
	dir := filepath.Join(t.TempDir(), "state")
	if err := RecordManaged(live, dir, []int{36}, []int{38, 39}); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, ManagedFile)
	st, err := os.Lstat(p)
	if err != nil || st.Mode().Perm() != 0o600 || !st.Mode().IsRegular() {
		t.Fatalf("%s: %v %v", p, st.Mode(), err)
	}
	if st, err := os.Stat(dir); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("state dir %v %v", st.Mode(), err)
	}
	// Later observations replace earlier ones and add to them.
	if err := RecordManaged(live, dir, []int{39}, []int{40}); err != nil {
		t.Fatal(err)
	}
	rec, err := readRecordFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rec.Managed, []int{36, 39}) || !slices.Equal(rec.Movable, []int{38, 40}) || rec.BootID != currentBootID() {
		t.Errorf("record %+v", rec)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("left behind: %v", ents)
	}

	// Read back by a host read (the state directory is read on the live
	// machine only; managedFromRecord is that step), here over the IRQs of
	// a test tree.
	root := vmWithDebugfs(t)
	h := &Host{}
	if err := readIRQs(kernel.New(root), h, Options{}); err != nil {
		t.Fatal(err)
	}
	if n, err := managedFromRecord(live, h, dir); n != 2 || err != nil {
		t.Errorf("record applied to %d IRQs (want 39 and 40; debugfs knew 36 and 38): %v", n, err)
	}
	if h.IRQ(36).Managed != ManagedYes || h.IRQ(38).Managed != ManagedNo || h.IRQ(39).Managed != ManagedYes {
		t.Errorf("managed 36 %s 38 %s 39 %s", h.IRQ(36).Managed, h.IRQ(38).Managed, h.IRQ(39).Managed)
	}

	// A record from another boot is ignored, and dropped by the next write.
	b, _ := json.Marshal(managedRecord{managedProbe: managedProbe{Managed: []int{1}, Movable: []int{}}, BootID: "other"})
	os.WriteFile(p, b, 0o600)
	h = &Host{}
	readIRQs(kernel.New(root), h, Options{})
	if n, err := managedFromRecord(live, h, dir); n != 0 || err == nil || !strings.Contains(err.Error(), "before the last boot") {
		t.Errorf("stale record: %d %v", n, err)
	}
	if err := RecordManaged(live, dir, nil, []int{2}); err != nil {
		t.Fatal(err)
	}
	if rec, err := readRecordFile(p); err != nil || len(rec.Managed) != 0 || !slices.Equal(rec.Movable, []int{2}) {
		t.Errorf("after a stale record: %+v %v", rec, err)
	}
}

func TestRecordManagedSymlink(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(t.TempDir(), "victim")
	os.WriteFile(victim, []byte("keep"), 0o644)
	p := filepath.Join(dir, ManagedFile)
	if err := os.Symlink(victim, p); err != nil {
		t.Fatal(err)
	}
	// Reading does not follow it.
	if _, err := readRecordFile(p); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("read through a symlink: %v", err)
	}
	h := &Host{IRQs: []IRQ{{Number: 1, Managed: ManagedUnknown}}}
	live := kernel.New("/")
	if n, err := managedFromRecord(live, h, dir); n != 0 || err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("record through a symlink: %d %v", n, err)
	}
	// Writing replaces the link and leaves its target alone.
	if err := RecordManaged(live, dir, []int{1}, nil); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep" {
		t.Errorf("symlink target written: %q", b)
	}
	if st, err := os.Lstat(p); err != nil || !st.Mode().IsRegular() || st.Mode().Perm() != 0o600 {
		t.Errorf("%s: %v %v", p, st.Mode(), err)
	}
	// Garbage is reported with what to do.
	os.WriteFile(p, []byte("{"), 0o600)
	if _, err := readRecordFile(p); err == nil || !strings.Contains(err.Error(), "remove it") {
		t.Errorf("garbled record: %v", err)
	}
	if err := RecordManaged(live, "", nil, nil); err == nil {
		t.Error("empty state dir accepted")
	}
}

// TestReadManagedLiveReadOnly reads this machine without the probe: the
// managed state comes from a record in the state directory (debugfs is not
// mounted on the test VM), and a capture keeps it.
func TestReadManagedLiveReadOnly(t *testing.T) {
	live := kernel.New("/")
	in, err := live.Interrupts()
	if errors.Is(err, fs.ErrNotExist) {
		t.Skip("no /proc/interrupts")
	}
	if err != nil {
		t.Fatal(err)
	}
	if live.Exists(kernel.IRQDebugDir) {
		t.Skip("debugfs IRQ files present: the record is not consulted for the IRQs they cover")
	}
	var irqs []int
	for _, l := range in.Lines {
		if l.IRQ >= 0 {
			irqs = append(irqs, l.IRQ)
		}
	}
	if len(irqs) < 2 {
		t.Skip("fewer than two IRQs")
	}
	dir := t.TempDir()
	h := &Host{}
	if err := readIRQs(live, h, Options{StateDir: dir}); err != nil {
		t.Fatal(err)
	}
	u := unavailableFor(h, "/sys/kernel/debug/irq/irqs")
	if len(u) != 1 || !strings.Contains(u[0].Reason, "--probe-managed") || !strings.Contains(u[0].Reason, filepath.Join(dir, ManagedFile)) {
		t.Errorf("unavailable: %+v", h.Unavailable)
	}
	for _, q := range h.IRQs {
		if q.Managed != ManagedUnknown {
			t.Errorf("irq %d: %s with no source", q.Number, q.Managed)
		}
	}
	if err := RecordManaged(live, dir, irqs[:1], irqs[1:2]); err != nil {
		t.Fatal(err)
	}
	live.StartRecording()
	h = &Host{}
	if err := readIRQs(live, h, Options{StateDir: dir}); err != nil {
		t.Fatal(err)
	}
	live.StopRecording()
	if h.IRQ(irqs[0]).Managed != ManagedYes || h.IRQ(irqs[1]).Managed != ManagedNo || len(unavailableFor(h, "/sys/kernel/debug/irq/irqs")) != 0 {
		t.Errorf("irq %d %s, irq %d %s, unavailable %+v", irqs[0], h.IRQ(irqs[0]).Managed, irqs[1], h.IRQ(irqs[1]).Managed, h.Unavailable)
	}
	var saved managedProbe
	if err := json.Unmarshal(live.Synthetics()[ManagedFile], &saved); err != nil || !slices.Equal(saved.Managed, irqs[:1]) || !slices.Equal(saved.Movable, irqs[1:2]) {
		t.Errorf("saved for a capture: %+v %v", saved, err)
	}
}

// A live read that knew nothing saves why, and the snapshot says the same.
func TestReadManagedSavedUnavailable(t *testing.T) {
	root := t.TempDir()
	if err := os.CopyFS(root, os.DirFS(vm2cpu)); err != nil {
		t.Fatal(err)
	}
	u := Unavailable{What: "irq managed state", Path: "/sys/kernel/debug/irq/irqs", Reason: "no /sys/kernel/debug/irq/irqs (debugfs); no record /var/lib/irqpilot/managed.json; managed IRQs unknown (--probe-managed finds them by writing)"}
	b, _ := json.Marshal(savedManaged{managedProbe: managedProbe{Managed: []int{}, Movable: []int{}}, Unavailable: &u})
	os.MkdirAll(filepath.Join(root, kernel.SyntheticDir), 0o755)
	os.WriteFile(filepath.Join(root, kernel.SyntheticDir, ManagedFile), b, 0o644)
	h := &Host{}
	if err := readIRQs(kernel.New(root), h, Options{}); err != nil {
		t.Fatal(err)
	}
	if len(h.Unavailable) != 1 || h.Unavailable[0] != u {
		t.Errorf("unavailable: %+v", h.Unavailable)
	}
}

func currentBootID() string { return kernel.New("/").BootID() }

// readRecordFile reads the record at path p the way RecordManaged and the
// host read do.
func readRecordFile(p string) (*managedRecord, error) {
	rel, err := recordFile(filepath.Dir(p))
	if err != nil {
		return nil, err
	}
	rec, err := readRecord(kernel.New("/"), rel)
	if err == nil && rec == nil {
		err = fs.ErrNotExist
	}
	return rec, err
}
