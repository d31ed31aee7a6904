package kernel

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestProcIRQCapture(t *testing.T) {
	fs := New("testdata/vm2cpu")
	for _, tc := range []struct {
		irq      int
		aff, eff string
		node     int
	}{{36, "0-1", "1", 0}, {38, "0-1", "1", -1}, {39, "0-1", "0", -1}, {24, "0-1", "0", -1}} {
		a, err := fs.ReadIRQAffinity(tc.irq)
		if err != nil || a.String() != tc.aff {
			t.Errorf("irq %d affinity %v, %v; want %s", tc.irq, a, err, tc.aff)
		}
		e, err := fs.ReadIRQEffectiveAffinity(tc.irq)
		if err != nil || e.String() != tc.eff {
			t.Errorf("irq %d effective %v, %v; want %s", tc.irq, e, err, tc.eff)
		}
		n, err := fs.ReadIRQNode(tc.irq)
		if err != nil || n != tc.node {
			t.Errorf("irq %d node %d, %v; want %d", tc.irq, n, err, tc.node)
		}
	}
	if _, err := fs.ReadIRQAffinity(27); err == nil || !os.IsNotExist(err) {
		t.Errorf("irq 27 (no /proc/irq/27): %v", err)
	}
}

func TestProcIRQSnapshot(t *testing.T) {
	fs, cleanup, err := OpenSnapshot(filepath.Join(fixtures, "cluster-node-tuning-operator/bare-metal-worker1.internal-sysinfo.tgz"))
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	for _, tc := range []struct {
		irq      int
		aff, eff string
		node     int
	}{{69, "32", "32", 0}, {70, "1", "1", 1}, {253, "62", "62", 0}} {
		a, err1 := fs.ReadIRQAffinity(tc.irq)
		e, err2 := fs.ReadIRQEffectiveAffinity(tc.irq)
		n, err3 := fs.ReadIRQNode(tc.irq)
		if err1 != nil || err2 != nil || err3 != nil || a.String() != tc.aff || e.String() != tc.eff || n != tc.node {
			t.Errorf("irq %d: %v %v %d (%v %v %v); want %s %s %d", tc.irq, a, e, n, err1, err2, err3, tc.aff, tc.eff, tc.node)
		}
	}
}

func TestProcIRQFallbackAndErrors(t *testing.T) {
	root := t.TempDir()
	write := func(rel, v string) {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// An old kernel: masks only (the 256-CPU width of the node_exporter fixture).
	write("proc/irq/5/smp_affinity", "00000000,00000000,00000000,00000000,00000000,00000000,00000000,0000f00f\n")
	write("proc/irq/5/effective_affinity", "1\n")
	write("proc/irq/6/smp_affinity_list", "3-1\n")
	write("proc/irq/6/node", "zero\n")
	fs := New(root)
	if a, err := fs.ReadIRQAffinity(5); err != nil || a.String() != "0-3,12-15" {
		t.Errorf("mask fallback: %v %v", a, err)
	}
	if e, err := fs.ReadIRQEffectiveAffinity(5); err != nil || e.String() != "0" {
		t.Errorf("effective mask fallback: %v %v", e, err)
	}
	if _, err := fs.ReadIRQAffinity(6); err == nil || !strings.Contains(err.Error(), "proc/irq/6/smp_affinity_list") {
		t.Errorf("bad list: %v", err)
	}
	if _, err := fs.ReadIRQNode(6); err == nil || !strings.Contains(err.Error(), "proc/irq/6/node") {
		t.Errorf("bad node: %v", err)
	}
	if _, err := fs.ReadIRQEffectiveAffinity(6); err == nil || !strings.Contains(err.Error(), "effective_affinity_list") {
		t.Errorf("missing effective: %v", err)
	}
}

func TestProcIRQLive(t *testing.T) {
	fs := New("/")
	ents, err := os.ReadDir("/proc/irq")
	if err != nil {
		t.Skip(err)
	}
	n := 0
	for _, e := range ents {
		var irq int
		if _, err := fmt.Sscan(e.Name(), &irq); err != nil {
			continue
		}
		a, err := fs.ReadIRQAffinity(irq)
		if err != nil {
			t.Errorf("irq %d: %v", irq, err)
			continue
		}
		eff, err := fs.ReadIRQEffectiveAffinity(irq)
		if err == nil && !eff.IsEmpty() && !eff.IsSubsetOf(a) {
			// Legal only transiently; the kernel keeps effective ⊆ allowed.
			t.Logf("irq %d: effective %v outside allowed %v", irq, eff, a)
		}
		n++
	}
	if n == 0 {
		t.Error("no IRQ read from /proc/irq")
	}
}
