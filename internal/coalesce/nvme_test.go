package coalesce

import (
	"bufio"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/irqpilot/irqpilot/internal/kernel"
)

func TestNVMeCommandEncoding(t *testing.T) {
	if got := unsafe.Sizeof(NVMeAdminCmd{}); got != NVMeAdminCmdSize {
		t.Fatalf("Go mirror of struct nvme_admin_cmd is %d bytes, want 72", got)
	}
	if off := unsafe.Offsetof(NVMeAdminCmd{}.CDW11); off != 44 {
		t.Fatalf("cdw11 at offset %d, want 44", off)
	}
	// _IOWR('N', 0x41, 72 bytes): dir 3 << 30 | size << 16 | type << 8 | nr.
	if want := uint32(3)<<30 | 72<<16 | uint32('N')<<8 | 0x41; NVMeIoctlAdminCmd != want {
		t.Fatalf("ioctl %#x, want %#x", NVMeIoctlAdminCmd, want)
	}
	c := NVMeCoalescing{Threshold: 7, Time: 1} // 8 completions or 100 µs
	if c.CDW11() != 0x0107 {
		t.Fatalf("cdw11 %#x, want 0x0107", c.CDW11())
	}
	b := SetCoalescingCmd(c).Marshal()
	if b[0] != 0x09 {
		t.Fatalf("opcode %#x, want 0x09 (Set Features)", b[0])
	}
	if string(b[40:44]) != "\x08\x00\x00\x00" {
		t.Fatalf("cdw10 bytes % x, want feature 08h with SV=0", b[40:44])
	}
	if string(b[44:48]) != "\x07\x01\x00\x00" {
		t.Fatalf("cdw11 bytes % x", b[44:48])
	}
	for i, x := range b {
		if x != 0 && i != 0 && (i < 40 || i >= 48) {
			t.Fatalf("byte %d = %#x, want 0", i, x)
		}
	}
	if (NVMeCoalescing{Threshold: 255, Time: 255}).CDW11() != 0xffff {
		t.Fatal("max values")
	}
	if !(NVMeCoalescing{}).Off() || (NVMeCoalescing{Threshold: 1, Time: 1}).Off() {
		t.Fatal("Off")
	}
}

type traceStep struct {
	elapsedMs int64
	samples   []NVMeSample
}

func readTrace(t *testing.T, name string) []traceStep {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []traceStep
	sc := bufio.NewScanner(f)
	for ln := 1; sc.Scan(); ln++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fl := strings.Fields(line)
		if len(fl) != 4 {
			t.Fatalf("%s:%d: want 4 fields", name, ln)
		}
		ms, _ := strconv.ParseInt(fl[0], 10, 64)
		inf, _ := strconv.Atoi(fl[2])
		done, _ := strconv.ParseUint(fl[3], 10, 64)
		out = append(out, traceStep{ms, []NVMeSample{{Controller: fl[1], InFlight: inf, Completed: done}}})
	}
	return out
}

func runTrace(t *testing.T, name string) []NVMeDecision {
	c, err := NewNVMeController(NVMeControllerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var ds []NVMeDecision
	for _, s := range readTrace(t, name) {
		ds = append(ds, c.Step(s.samples, s.elapsedMs*1_000_000)...)
	}
	return ds
}

func TestNVMeControllerRampTrace(t *testing.T) {
	ds := runTrace(t, "nvme_ramp.trace")
	// completions per interrupt (threshold+1), 1 = off, per epoch.
	want := []struct {
		per     int
		changed bool
	}{
		{1, true},  // first epoch: no rate, off (sent once: device state unknown)
		{1, false}, // cif 1
		{1, false}, // cif 3
		{1, false}, // cif 6: R 4/5 → 1 per interrupt in hardware counts: off
		{2, true},  // cif 14: R 1/2
		{3, true},  // cif 20: R 1/3
		{5, true},  // cif 40: R 1/5
		{8, true},  // cif 70: R 1/8
		{8, false}, // unchanged: no command
		{1, true},  // cif 2: off again
	}
	if len(ds) != len(want) {
		t.Fatalf("%d decisions, want %d", len(ds), len(want))
	}
	for i, d := range ds {
		per := 1
		if !d.Setting.Off() {
			per = int(d.Setting.Threshold) + 1
			if d.Setting.Time != 1 {
				t.Errorf("epoch %d: aggregation time %d, want 1 (100 µs)", i, d.Setting.Time)
			}
		}
		if per != want[i].per || d.Changed != want[i].changed {
			t.Errorf("epoch %d (cif %d, %d IOPS): %d per interrupt changed=%v, want %d changed=%v (%s)", i, d.InFlight, d.IOPS, per, d.Changed, want[i].per, want[i].changed, d.Reason)
		}
	}
	if ds[6].IOPS != 400000 {
		t.Errorf("epoch 6 IOPS %d, want 400000", ds[6].IOPS)
	}
}

func TestNVMeControllerTrickleTrace(t *testing.T) {
	ds := runTrace(t, "nvme_trickle.trace")
	wantOn := []bool{false, false, false, true, false} // IOPS -, 500, 1400, 3100, 500
	for i, d := range ds {
		if on := !d.Setting.Off(); on != wantOn[i] {
			t.Errorf("epoch %d (%d IOPS at cif %d): on=%v, want %v (%s)", i, d.IOPS, d.InFlight, on, wantOn[i], d.Reason)
		}
	}
}

func TestReadNVMe(t *testing.T) {
	// No controllers: the clear error.
	root := t.TempDir()
	if _, err := ReadNVMe(kernel.New(root)); !errors.Is(err, ErrNoNVMe) {
		t.Fatalf("empty tree: %v, want ErrNoNVMe", err)
	}
	// A tree with one controller and two namespaces; file contents in the
	// kernel's format (taken from this machine's vda when present).
	inflight, stat := "       3        2\n", "  100 0 800 10 50 0 400 5 5 20 15 0 0 0 0 0 0\n"
	if b, err := os.ReadFile("/sys/block/vda/stat"); err == nil {
		stat = string(b)
	}
	mk := func(p, s string) {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mk("sys/class/nvme/nvme0/dev", "259:0\n")
	mk("sys/block/nvme0n1/inflight", inflight)
	mk("sys/block/nvme0n1/stat", stat)
	mk("sys/block/nvme0n2/inflight", "       0        1\n")
	mk("sys/block/nvme0n2/stat", "  7 0 0 0 3 0 0 0 0 0 0\n")
	mk("sys/block/vda/inflight", "9 9\n")
	ss, err := ReadNVMe(kernel.New(root))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(stat)
	r, _ := strconv.ParseUint(f[0], 10, 64)
	w, _ := strconv.ParseUint(f[4], 10, 64)
	if len(ss) != 1 || ss[0].Controller != "nvme0" || ss[0].InFlight != 6 || ss[0].Completed != r+w+10 || len(ss[0].Namespaces) != 2 {
		t.Fatalf("samples %+v; want nvme0 with inflight 6 and completed %d", ss, r+w+10)
	}
	mk("sys/block/nvme0n1/inflight", "x y\n")
	if _, err := ReadNVMe(kernel.New(root)); err == nil || !strings.Contains(err.Error(), "nvme0n1/inflight") {
		t.Fatalf("bad inflight: %v", err)
	}
}

func TestReadNVMeLive(t *testing.T) {
	if _, err := os.Stat("/sys/class/nvme"); err == nil {
		t.Skip("this machine has NVMe controllers")
	}
	if _, err := os.Stat("/sys/block"); err != nil {
		t.Skip("no /sys")
	}
	_, err := ReadNVMe(kernel.New("/"))
	if !errors.Is(err, ErrNoNVMe) || err.Error() != "no NVMe controllers found under /sys/class/nvme" {
		t.Fatalf("live: %v", err)
	}
}
