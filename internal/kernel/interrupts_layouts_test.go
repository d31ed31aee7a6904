package kernel

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// repoDumps holds real /proc/interrupts dumps of layouts the shared
// fixtures lack, each with its source in testdata/interrupts/README.md.
const repoDumps = "../../testdata/interrupts"

func parseDump(t *testing.T, kind string) *Interrupts {
	t.Helper()
	name := filepath.Join(repoDumps, kind, "interrupts")
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	in, err := parseInterrupts(name, b)
	if err != nil {
		t.Fatalf("parse %s: %v", name, err)
	}
	return in
}

func checkRow(t *testing.T, in *Interrupts, w irqWant) {
	t.Helper()
	l := in.Line(w.irq)
	if l == nil {
		t.Errorf("irq %d missing", w.irq)
		return
	}
	if l.Chip != w.chip || l.HWIRQ != w.hwirq || l.Trigger != w.trigger || !slices.Equal(l.Actions, w.actions) {
		t.Errorf("irq %d: chip %q hwirq %q trigger %q actions %q, want %q %q %q %q",
			w.irq, l.Chip, l.HWIRQ, l.Trigger, l.Actions, w.chip, w.hwirq, w.trigger, w.actions)
	}
	for cpu, want := range w.counts {
		if got := countAt(t, in, l, cpu); got != want {
			t.Errorf("irq %d CPU %d: count %d, want %d", w.irq, cpu, got, want)
		}
	}
}

// TestParseInterruptsLayouts: one real dump per layout the parser has to
// take from the file rather than from splitting on blanks.
func TestParseInterruptsLayouts(t *testing.T) {
	for _, tc := range []struct {
		kind string
		ncpu int
		nIRQ int
		rows []irqWant
		sums []string
	}{
		// Old ARM kernels print no chip column: the text after the counts
		// is the action, spaces and all.
		{kind: "ixp4xx-nochip", ncpu: 1, nIRQ: 3, rows: []irqWant{
			{irq: 5, actions: []string{"IXP4xx Timer Tick"}, counts: map[int]uint64{0: 29620}},
			{irq: 25, actions: []string{"eth0"}, counts: map[int]uint64{0: 3813}},
		}, sums: []string{"Err"}},
		// Xen PV guest on a 2.6 kernel: chip and flow glued, and per-CPU
		// event channels (one timer per vCPU) with 10-digit counts.
		{kind: "xen-pv", ncpu: 8, nIRQ: 61, rows: []irqWant{
			{irq: 1, chip: "xen-pirq-ioapic", trigger: "edge", actions: []string{"i8042"}, counts: map[int]uint64{3: 565}},
			{irq: 6, chip: "xen-pirq-ioapic", trigger: "edge", actions: []string{"floppy"}},
			{irq: 9, chip: "IO-APIC", trigger: "fasteoi", actions: []string{"acpi"}},
			{irq: 64, chip: "xen-percpu-virq", actions: []string{"timer0"}, counts: map[int]uint64{0: 2844203322, 1: 0}},
			{irq: 101, chip: "xen-percpu-ipi", actions: []string{"resched6"}, counts: map[int]uint64{6: 4269631923}},
			{irq: 114, chip: "xen-dyn-event", actions: []string{"eth0"}, counts: map[int]uint64{0: 749775929}},
		}, sums: []string{"NMI", "LOC", "SPU", "PMI", "IWI", "RTR", "RES", "CAL", "TLB", "TRM", "THR", "MCE", "MCP", "ERR", "MIS"}},
		// POWER9 KVM guest: XIVE with 4-digit hwirqs, IRQ labels without
		// leading blanks, and a summary label (LOC) printed twice.
		{kind: "power9-xive", ncpu: 1, nIRQ: 10, rows: []irqWant{
			{irq: 16, chip: "XIVE-IPI", hwirq: "0", trigger: "Edge", actions: []string{"IPI"}},
			{irq: 258, chip: "XIVE-IRQ", hwirq: "4864", trigger: "Edge", actions: []string{"virtio0-config"}},
			{irq: 257, chip: "XIVE-IRQ", hwirq: "4353", trigger: "Edge", actions: []string{"ibmvscsi"}, counts: map[int]uint64{0: 12372}},
		}, sums: []string{"LOC", "BCT", "LOC", "SPU", "PMI", "MCE", "NMI", "DBL"}},
		// Actions with spaces on GICv3 ("kvm guest vtimer").
		{kind: "imx8mp", ncpu: 4, nIRQ: 16, rows: []irqWant{
			{irq: 12, chip: "GICv3", hwirq: "27", trigger: "Level", actions: []string{"kvm guest vtimer"}},
			{irq: 14, chip: "GICv3", hwirq: "79", trigger: "Level", actions: []string{"timer@306a0000"}, counts: map[int]uint64{3: 424}},
		}},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			in := parseDump(t, tc.kind)
			if len(in.CPUs) != tc.ncpu {
				t.Errorf("%d CPUs, want %d", len(in.CPUs), tc.ncpu)
			}
			var n int
			var sums []string
			for _, l := range in.Lines {
				if l.IRQ >= 0 {
					n++
				} else {
					sums = append(sums, l.Name)
				}
			}
			if n != tc.nIRQ {
				t.Errorf("%d numbered rows, want %d", n, tc.nIRQ)
			}
			if tc.sums != nil && !slices.Equal(sums, tc.sums) {
				t.Errorf("summary rows %v, want %v", sums, tc.sums)
			}
			for _, w := range tc.rows {
				checkRow(t, in, w)
			}
		})
	}
}

// TestParseInterruptsChipWithSpaces: the Hyper-V PCI MSI chip is named
// "Hyper-V PCIe MSI". The rows come without their header (a mailing-list
// excerpt), so they are parsed with the four CPU columns they show.
func TestParseInterruptsChipWithSpaces(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoDumps, "hyperv-mana", "interrupts"))
	if err != nil {
		t.Fatal(err)
	}
	in, err := parseInterrupts("hyperv-mana", append([]byte("CPU0 CPU1 CPU2 CPU3\n"), b...))
	if err != nil {
		t.Fatal(err)
	}
	for i, q := range []int{25, 26, 27} {
		checkRow(t, in, irqWant{irq: q, chip: "Hyper-V PCIe MSI", hwirq: itoa(4138200989697 + i), trigger: "edge",
			actions: []string{"mana_q" + itoa(i) + "@pci:7870:00:00.0"}})
	}
	checkRow(t, in, irqWant{irq: 25, chip: "Hyper-V PCIe MSI", hwirq: "4138200989697", trigger: "edge",
		actions: []string{"mana_q0@pci:7870:00:00.0"}, counts: map[int]uint64{1: 103, 3: 2989138}})
}

// TestParseInterruptsFourDigitIRQs: pcp's 1152-CPU capture numbers IRQs past
// 999, so the kernel widens the label column (and the header's indent).
func TestParseInterruptsFourDigitIRQs(t *testing.T) {
	in := parseFixture(t, "pcp/interrupts-1152cpu-x86_64.bz2")
	var big int
	for _, l := range in.Lines {
		if l.IRQ >= 1000 {
			big++
			if len(l.Counts) != 1152 || l.Chip == "" {
				t.Errorf("irq %d: %d counts, chip %q", l.IRQ, len(l.Counts), l.Chip)
			}
		}
	}
	if big == 0 {
		t.Error("no IRQ numbered 1000 or more")
	}
}

// TestParseInterruptsARM32: a Raspberry Pi 1 (ARMCTRL chip, no hwirq): rows
// with a chip and no handler, actions with spaces, and the FIQ row, which
// names the FIQ's owner and has no counts.
func TestParseInterruptsARM32(t *testing.T) {
	in := parseDump(t, "rpi1-armctrl")
	checkRow(t, in, irqWant{irq: 3, chip: "ARMCTRL", actions: []string{"BCM2708 Timer Tick"}, counts: map[int]uint64{0: 119269}})
	checkRow(t, in, irqWant{irq: 75, chip: "ARMCTRL", counts: map[int]uint64{0: 1}})
	checkRow(t, in, irqWant{irq: 32, chip: "ARMCTRL", actions: []string{"dwc_otg", "dwc_otg_pcd", "dwc_otg_hcd:usb1"}})
	checkRow(t, in, irqWant{irq: 77, chip: "ARMCTRL", actions: []string{"bcm2708_sdhci (dma)"}})
	fiq := in.Summary("FIQ")
	if fiq == nil || len(fiq.Counts) != 0 || fiq.Description != "usb_fiq" {
		t.Errorf("FIQ row = %+v, want no counts and usb_fiq", fiq)
	}
	if e := in.Summary("Err"); e == nil || len(e.Counts) != 1 {
		t.Errorf("Err row = %+v", e)
	}
}

// TestParseInterruptsFlowWithoutHwirq: Xen's dynamic event chip has no
// domain, so the flow name follows the chip after blanks ("xen-dyn
// -event"). Rows published without their header.
func TestParseInterruptsFlowWithoutHwirq(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoDumps, "xen-dyn-vif", "interrupts"))
	if err != nil {
		t.Fatal(err)
	}
	in, err := parseInterrupts("xen-dyn-vif", append([]byte("CPU0 CPU1 CPU2 CPU3\n"), b...))
	if err != nil {
		t.Fatal(err)
	}
	checkRow(t, in, irqWant{irq: 72, chip: "xen-dyn", trigger: "event", actions: []string{"vif0-q1-tx"}, counts: map[int]uint64{0: 586350}})
}
