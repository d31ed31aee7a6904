package kernel

import (
	"os"
	"slices"
	"strings"
	"testing"
)

func TestParsePerCPUCount(t *testing.T) {
	got, err := parsePerCPUCount("0,41924\n")
	if err != nil || !slices.Equal(got, []uint64{0, 41924}) {
		t.Fatalf("got %v, %v", got, err)
	}
	if got, err := parsePerCPUCount("18446744073709551615"); err != nil || got[0] != 1<<64-1 {
		t.Fatalf("max uint64: %v %v", got, err)
	}
	for _, bad := range []string{"", "1,,2", "1,x", "1, 2", "-1", "18446744073709551616"} {
		if _, err := parsePerCPUCount(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if a := parseSysIRQActions("PCIe PME,pciehp\n"); !slices.Equal(a, []string{"PCIe PME", "pciehp"}) {
		t.Errorf("actions %q", a)
	}
	if a := parseSysIRQActions(""); a != nil {
		t.Errorf("empty actions %q", a)
	}
}

// TestSysIRQCapture reads /sys/kernel/irq as captured on the 2-CPU virtio VM
// (testdata/vm2cpu) and cross-checks it with /proc/interrupts of the same moment.
func TestSysIRQCapture(t *testing.T) {
	fs := New("testdata/vm2cpu")
	if !fs.HasSysIRQ() {
		t.Fatal("capture has no sys/kernel/irq")
	}
	nums, err := fs.SysIRQNumbers()
	if err != nil || len(nums) != 20 || nums[0] != 24 || nums[19] != 43 {
		t.Fatalf("SysIRQNumbers = %v, %v", nums, err)
	}
	s, err := fs.ReadSysIRQ(36)
	if err != nil {
		t.Fatal(err)
	}
	if s.ChipName != "PCI-MSIX-0000:00:02.0" || s.HWIRQ != "1" || s.Trigger() != "edge" || s.Type != "edge" ||
		!slices.Equal(s.Actions, []string{"virtio1-req.0"}) || !slices.Equal(s.PerCPUCount, []uint64{0, 119924}) || s.Missing != nil {
		t.Errorf("irq 36 = %+v", s)
	}
	// IRQ 27 has no handler: in sysfs, not in /proc/interrupts.
	if s, err := fs.ReadSysIRQ(27); err != nil || s.Actions != nil || s.ChipName != "IO-APIC" {
		t.Errorf("irq 27 = %+v, %v", s, err)
	}
	if _, err := fs.ReadSysIRQ(9); err == nil || !strings.Contains(err.Error(), "sys/kernel/irq/9") {
		t.Errorf("missing irq 9: %v", err)
	}
	crossCheckAll(t, fs)
}

// crossCheckAll compares every /proc/interrupts row with /sys/kernel/irq,
// read afterwards: names must agree and counts may only have grown.
func crossCheckAll(t *testing.T, fs *FS) {
	t.Helper()
	data, err := fs.ReadFile("proc/interrupts")
	if err != nil {
		t.Fatal(err)
	}
	in, err := parseInterrupts("/proc/interrupts", data)
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for i := range in.Lines {
		l := &in.Lines[i]
		if l.IRQ < 0 {
			continue
		}
		s, err := fs.ReadSysIRQ(l.IRQ)
		if err != nil {
			t.Errorf("irq %d: %v", l.IRQ, err)
			continue
		}
		if d := s.CrossCheck(l); d != nil {
			t.Errorf("irq %d: %v", l.IRQ, d)
		}
		if s.HWIRQ != l.HWIRQ || s.Trigger() != l.Trigger {
			t.Errorf("irq %d: sysfs hwirq %q trigger %q, proc %q %q", l.IRQ, s.HWIRQ, s.Trigger(), l.HWIRQ, l.Trigger)
		}
		for j, cpu := range in.CPUs {
			if cpu >= len(s.PerCPUCount) || s.PerCPUCount[cpu] < l.Counts[j] {
				t.Errorf("irq %d CPU%d: sysfs %v below /proc %d", l.IRQ, cpu, s.PerCPUCount, l.Counts[j])
			}
		}
		checked++
	}
	if checked < 10 {
		t.Errorf("only %d IRQs checked", checked)
	}
}

func TestSysIRQLive(t *testing.T) {
	fs := New("/")
	if !fs.HasSysIRQ() {
		t.Skip("no /sys/kernel/irq on this machine")
	}
	if _, err := os.Stat("/proc/interrupts"); err != nil {
		t.Skip(err)
	}
	crossCheckAll(t, fs)
}

func TestCrossCheckReportsMismatch(t *testing.T) {
	// The bare-metal master's row 124 as /proc/interrupts prints it, against
	// what sysfs would say after a driver renamed its handler.
	in := parseFixture(t, "cluster-node-tuning-operator/bare-metal-master.internal-sysinfo.tgz!proc/interrupts")
	l := in.Line(124)
	same := &SysIRQ{ChipName: "IR-PCI-MSI-0000:16:02.0", Actions: parseSysIRQActions("PCIe PME,pciehp")}
	if d := same.CrossCheck(l); d != nil {
		t.Errorf("agreeing rows reported: %v", d)
	}
	other := &SysIRQ{ChipName: "IR-PCI-MSI-0000:16:03.0", Actions: []string{"pciehp"}}
	d := other.CrossCheck(l)
	if len(d) != 2 || !strings.Contains(d[0], `"IR-PCI-MSI-0000:16:03.0"`) || !strings.Contains(d[1], `"PCIe PME"`) {
		t.Errorf("mismatch report %q", d)
	}
}
