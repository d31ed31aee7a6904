package kernel

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// testdata/irqdebug holds /sys/kernel/debug/irq/irqs/N files as a 6.x x86
// KVM guest prints them (irq_debug_show in kernel/irq/debugfs.c) for the
// IRQs of the vm2cpu capture: 36 a virtio-blk request queue (managed), 38 a
// virtio-net input queue and 26 the IO-APIC serial port.
func TestParseIRQDebug(t *testing.T) {
	for _, tc := range []struct {
		irq              int
		dstate           uint32
		managed, refuses bool
		flags            int
	}{
		{36, 0x31600200, true, true, 6},
		{38, 0x21401200, false, false, 5},
		{26, 0x35401200, false, false, 7},
	} {
		data, err := os.ReadFile(filepath.Join("testdata/irqdebug", strconv.Itoa(tc.irq)))
		if err != nil {
			t.Fatal(err)
		}
		d, err := parseIRQDebug("/"+IRQDebugPath(tc.irq), data)
		if err != nil {
			t.Fatalf("irq %d: %v", tc.irq, err)
		}
		if d.DState != tc.dstate || d.AffinityManaged() != tc.managed || d.RefusesAffinity() != tc.refuses || len(d.DStateFlags) != tc.flags {
			t.Errorf("irq %d: %#x %v managed %v refuses %v", tc.irq, d.DState, d.DStateFlags, d.AffinityManaged(), d.RefusesAffinity())
		}
		// The chip's IRQCHIP_* flags and the vector domain's "is_managed:"
		// further down are not dstate bits.
		if slices.Contains(d.DStateFlags, "IRQCHIP_SKIP_SET_WAKE") || d.Has("is_managed:") {
			t.Errorf("irq %d: chip flags taken as dstate: %v", tc.irq, d.DStateFlags)
		}
	}
}

func TestParseIRQDebugRefusing(t *testing.T) {
	// A per-CPU or unbalanced IRQ refuses affinity writes without being managed.
	for _, flag := range []string{"IRQD_PER_CPU", "IRQD_NO_BALANCING"} {
		d, err := parseIRQDebug("x", []byte("handler:  handle_percpu_devid_irq\ndstate:   0x00010800\n            "+flag+"\nnode:     0\n"))
		if err != nil || d.AffinityManaged() || !d.RefusesAffinity() {
			t.Errorf("%s: %+v %v", flag, d, err)
		}
	}
}

func TestParseIRQDebugErrors(t *testing.T) {
	for name, text := range map[string]string{
		"no dstate":   "handler:  handle_edge_irq\nnode:     0\n",
		"not hex":     "dstate:   31600200\n",
		"garbled":     "dstate:   0xzz\n",
		"twice":       "dstate:   0x0\ndstate:   0x0\n",
		"bad flag":    "dstate:   0x200\n            IRQD_ACTIVATED extra\n",
		"empty":       "",
		"wide":        "dstate:   0x1ffffffff\n",
		"colon flags": "dstate:   0x200\n     Vector:    35\n",
	} {
		_, err := parseIRQDebug("/sys/kernel/debug/irq/irqs/7", []byte(text))
		var pe *ParseError
		if !errors.As(err, &pe) || pe.File != "/sys/kernel/debug/irq/irqs/7" {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestReadIRQDebug(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, IRQDebugDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile("testdata/irqdebug/36")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "36"), data, 0o644)
	f := New(root)
	f.StartRecording()
	d, err := f.ReadIRQDebug(36)
	if err != nil || !d.AffinityManaged() {
		t.Fatalf("%+v %v", d, err)
	}
	// Not recorded: captures refuse /sys/kernel/debug.
	if r := f.Recorded(); len(r) != 0 {
		t.Errorf("recorded %v", r)
	}
	if err := f.StatIRQDebug(); err != nil {
		t.Error(err)
	}
	if err := New(t.TempDir()).StatIRQDebug(); !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "/sys/kernel/debug/irq/irqs") {
		t.Errorf("missing dir: %v", err)
	}
	if _, err := f.ReadIRQDebug(38); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}
