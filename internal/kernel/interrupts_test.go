package kernel

import (
	"archive/tar"
	"bytes"
	"compress/bzip2"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fixtures is the shared real-capture tree, beside the repository.
const fixtures = "../../../shared/fixtures"

// readFixture returns the bytes of a fixture file. "a.tgz!proc/interrupts"
// reads one member of a gzip tarball; a ".bz2" file is decompressed.
func readFixture(tb testing.TB, name string) []byte {
	tb.Helper()
	file, member, inTar := strings.Cut(name, "!")
	raw, err := os.ReadFile(filepath.Join(fixtures, file))
	if err != nil {
		tb.Fatalf("fixture: %v", err)
	}
	switch {
	case inTar:
		gz, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			tb.Fatalf("%s: %v", file, err)
		}
		tr := tar.NewReader(gz)
		for {
			h, err := tr.Next()
			if err != nil {
				tb.Fatalf("%s: no member %s: %v", file, member, err)
			}
			if strings.TrimPrefix(h.Name, "./") == member {
				b, err := io.ReadAll(tr)
				if err != nil {
					tb.Fatalf("%s!%s: %v", file, member, err)
				}
				return b
			}
		}
	case strings.HasSuffix(file, ".bz2"):
		b, err := io.ReadAll(bzip2.NewReader(bytes.NewReader(raw)))
		if err != nil {
			tb.Fatalf("%s: %v", file, err)
		}
		return b
	}
	return raw
}

func parseFixture(tb testing.TB, name string) *Interrupts {
	tb.Helper()
	in, err := parseInterrupts(name, readFixture(tb, name))
	if err != nil {
		tb.Fatalf("parse %s: %v", name, err)
	}
	return in
}

func countAt(tb testing.TB, in *Interrupts, row *InterruptLine, cpu int) uint64 {
	tb.Helper()
	i := slices.Index(in.CPUs, cpu)
	if i < 0 || i >= len(row.Counts) {
		tb.Fatalf("row %s has no count for CPU %d (CPUs %v)", row.Name, cpu, in.CPUs)
	}
	return row.Counts[i]
}

// irqWant is what a test expects of one numbered row.
type irqWant struct {
	irq                  int
	chip, hwirq, trigger string
	actions              []string
	counts               map[int]uint64 // CPU id → count; others must be 0 when allZeroElse
	allZeroElse          bool
}

// summaryWant is an expected summary row value.
type summaryWant struct {
	name  string
	cpu   int // -1: the row has a single total
	count uint64
	desc  string
}

func TestParseInterruptsFixtures(t *testing.T) {
	tests := []struct {
		file      string
		cpus      []int // full list, or nil to check only ncpu/first/last
		ncpu      int
		firstCPU  int
		lastCPU   int
		nIRQ      int
		summaries []string // every summary row name in order (nil: skip)
		nSummary  int
		irqs      []irqWant
		sums      []summaryWant
	}{{
		file: "procfs/proc/interrupts", cpus: []int{0, 1, 2, 3}, nIRQ: 28,
		summaries: []string{"NMI", "LOC", "SPU", "PMI", "IWI", "RTR", "RES", "CAL", "TLB", "TRM", "THR", "DFR", "MCE", "MCP", "ERR", "MIS", "PIN", "NPI", "PIW"},
		irqs: []irqWant{
			{irq: 0, chip: "IO-APIC", hwirq: "2", trigger: "edge", actions: []string{"timer"}, counts: map[int]uint64{0: 49}, allZeroElse: true},
			{irq: 29, chip: "PCI-MSI", hwirq: "512000", trigger: "edge", actions: []string{"ahci[0000:00:1f.2]"}, counts: map[int]uint64{0: 1362, 3: 934}, allZeroElse: true},
			{irq: 9, chip: "IO-APIC", hwirq: "9", trigger: "fasteoi", actions: []string{"acpi"}, allZeroElse: true},
			{irq: 28, chip: "PCI-MSI", hwirq: "114692", trigger: "edge", actions: []string{"virtio5-req.3"}, counts: map[int]uint64{3: 1989}, allZeroElse: true},
		},
		sums: []summaryWant{{"LOC", 1, 7429, "Local timer interrupts"}, {"ERR", -1, 0, ""}, {"MIS", -1, 0, ""}, {"TLB", 3, 231, "TLB shootdowns"}, {"PIW", 0, 0, "Posted-interrupt wakeup event"}},
	}, {
		// Old 3.x layout: chip and trigger glued, no hwirq column.
		file: "node_exporter/proc/interrupts", cpus: []int{0, 1, 2, 3}, nIRQ: 15, nSummary: 15,
		irqs: []irqWant{
			{irq: 16, chip: "IR-IO-APIC", trigger: "fasteoi", actions: []string{"ehci_hcd:usb1", "mmc0"}, counts: map[int]uint64{0: 328511, 1: 322879, 2: 293782, 3: 351412}},
			{irq: 40, chip: "DMAR_MSI", trigger: "edge", actions: []string{"dmar0"}, allZeroElse: true},
			{irq: 46, chip: "IR-PCI-MSI", trigger: "edge", actions: []string{"iwlwifi"}, counts: map[int]uint64{0: 43078464, 1: 130, 2: 460171, 3: 290}},
		},
		sums: []summaryWant{{"LOC", 1, 135776678, "Local timer interrupts"}, {"MCP", 3, 2399, "Machine check polls"}},
	}, {
		// arm64: "GICv3 27 Level", glued "IPI0:2768808080", "Err:".
		file: "node_exporter/proc/interrupts_aarch64", cpus: []int{0, 1, 2, 3, 4, 5, 6, 7}, nIRQ: 51,
		summaries: []string{"IPI0", "IPI1", "IPI2", "IPI3", "IPI4", "IPI5", "IPI6", "Err"},
		irqs: []irqWant{
			{irq: 61, chip: "ITS-MSI", hwirq: "81924", trigger: "Edge", actions: []string{"eth0-Tx-Rx-3"}, counts: map[int]uint64{0: 2052879736, 6: 124}, allZeroElse: true},
			{irq: 50, chip: "ARMH0061:00", hwirq: "3", trigger: "Edge", actions: []string{"ACPI:Event"}, allZeroElse: true},
			{irq: 49, chip: "GICv3", hwirq: "23", trigger: "Level", actions: []string{"arm-pmu"}, allZeroElse: true},
			{irq: 57, chip: "ITS-MSI", hwirq: "81920", trigger: "Edge", actions: []string{"ena-mgmnt@pci:0000:00:05.0"}, counts: map[int]uint64{2: 51, 5: 32479308}, allZeroElse: true},
		},
		sums: []summaryWant{
			{"IPI0", 0, 2768808080, "Rescheduling interrupts"}, {"IPI0", 5, 3349096412, "Rescheduling interrupts"}, {"IPI0", 7, 2154252810, "Rescheduling interrupts"},
			{"IPI1", 0, 357815098, "Function call interrupts"}, {"IPI3", 2, 0, "CPU stop (for crash dump) interrupts"}, {"Err", -1, 0, ""},
		},
	}, {
		// CPU6 offline: columns CPU0..CPU5, CPU7.
		file: "sysstat/root3/proc/interrupts", cpus: []int{0, 1, 2, 3, 4, 5, 7}, nIRQ: 21, nSummary: 22,
		irqs: []irqWant{{irq: 0, chip: "IO-APIC", hwirq: "2", trigger: "edge", actions: []string{"timer"}, counts: map[int]uint64{0: 8}, allZeroElse: true}},
		sums: []summaryWant{{"LOC", 7, 12540126, "Local timer interrupts"}, {"LOC", 5, 11213289, "Local timer interrupts"}, {"ERR", -1, 0, ""}},
	}, {
		file: "sysstat/root4/proc/interrupts", cpus: []int{0, 1, 2, 3, 4, 5, 7, 8}, nIRQ: 21, nSummary: 22,
		irqs: []irqWant{{irq: 27, chip: "PCI-MSI", hwirq: "3670018", trigger: "edge", actions: []string{"xhci_hcd"}, counts: map[int]uint64{8: 50}, allZeroElse: true}},
		sums: []summaryWant{{"LOC", 7, 12605877, "Local timer interrupts"}, {"LOC", 8, 12456, "Local timer interrupts"}},
	}, {
		file: "cluster-node-tuning-operator/bare-metal-master.internal-sysinfo.tgz!proc/interrupts",
		ncpu: 112, firstCPU: 0, lastCPU: 111, nIRQ: 1862, nSummary: 19,
		irqs: []irqWant{
			{irq: 1089, chip: "IR-PCI-MSIX-0000:4b:00.0", hwirq: "2", trigger: "edge", actions: []string{"ice-ens3f0-TxRx-0"}, counts: map[int]uint64{54: 7, 60: 2, 78: 8189, 100: 12, 106: 1}, allZeroElse: true},
			{irq: 124, chip: "IR-PCI-MSI-0000:16:02.0", hwirq: "0", trigger: "edge", actions: []string{"PCIe PME", "pciehp"}},
			{irq: 148, chip: "IR-PCI-MSIX-0000:b1:00.0", hwirq: "1", trigger: "edge", actions: []string{"nvme0q1"}, allZeroElse: true},
		},
		sums: []summaryWant{{"LOC", 0, 40469087, "Local timer interrupts"}, {"CAL", 4, 26101079, "Function call interrupts"}},
	}, {
		file: "cluster-node-tuning-operator/bare-metal-worker1.internal-sysinfo.tgz!proc/interrupts",
		ncpu: 80, firstCPU: 0, lastCPU: 79, nIRQ: 542, nSummary: 19,
		irqs: []irqWant{
			{irq: 69, chip: "IR-PCI-MSIX-0000:18:00.0", hwirq: "0", trigger: "edge", actions: []string{"megasas1-msix0"}, counts: map[int]uint64{34: 680}, allZeroElse: true},
			{irq: 253, chip: "IR-PCI-MSIX-0000:19:00.0", hwirq: "1", trigger: "edge", actions: []string{"i40e-eno1-TxRx-0"}},
		},
		sums: []summaryWant{{"LOC", 1, 70758248, "Local timer interrupts"}, {"IWI", 0, 204, "IRQ work interrupts"}},
	}, {
		file: "cluster-node-tuning-operator/sno-sysinfo.tgz!proc/interrupts",
		ncpu: 12, firstCPU: 0, lastCPU: 11, nIRQ: 57, nSummary: 20,
		irqs: []irqWant{
			{irq: 22, chip: "IO-APIC", hwirq: "22", trigger: "fasteoi", actions: []string{"virtio4"}},
			{irq: 39, chip: "PCI-MSIX-0000:06:00.0", hwirq: "1", trigger: "edge", actions: []string{"virtio5-input"}},
		},
		sums: []summaryWant{{"LOC", 0, 297535, "Local timer interrupts"}, {"LOC", 11, 290486, "Local timer interrupts"}, {"HYP", 11, 1, "Hypervisor callback interrupts"}},
	}, {
		file: "pcp/interrupts-1152cpu-x86_64.bz2",
		ncpu: 1152, firstCPU: 0, lastCPU: 1151, nIRQ: 1034, nSummary: 22,
		irqs: []irqWant{
			{irq: 107, chip: "IR-PCI-MSI", hwirq: "103284736", trigger: "edge", actions: []string{"lpfc:0"}, counts: map[int]uint64{579: 2786}, allZeroElse: true},
			{irq: 500, chip: "IR-PCI-MSI", hwirq: "201850987", trigger: "edge", actions: []string{"lpfc:107"}},
		},
		sums: []summaryWant{{"LOC", 0, 6342723, "Local timer interrupts"}, {"LOC", 1151, 425311, "Local timer interrupts"}, {"PIW", 1151, 0, "Posted-interrupt wakeup event"}},
	}}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			in := parseFixture(t, tc.file)
			if tc.cpus != nil {
				if !slices.Equal(in.CPUs, tc.cpus) {
					t.Errorf("CPUs = %v, want %v", in.CPUs, tc.cpus)
				}
			} else if len(in.CPUs) != tc.ncpu || in.CPUs[0] != tc.firstCPU || in.CPUs[len(in.CPUs)-1] != tc.lastCPU {
				t.Errorf("CPUs: %d from %d to %d, want %d from %d to %d", len(in.CPUs), in.CPUs[0], in.CPUs[len(in.CPUs)-1], tc.ncpu, tc.firstCPU, tc.lastCPU)
			}
			var names []string
			nIRQ := 0
			for _, l := range in.Lines {
				if l.IRQ >= 0 {
					nIRQ++
					if len(l.Counts) != len(in.CPUs) {
						t.Errorf("irq %d: %d counts for %d CPUs", l.IRQ, len(l.Counts), len(in.CPUs))
					}
					if l.Chip == "" || len(l.Actions) == 0 {
						t.Errorf("irq %d: chip %q actions %q", l.IRQ, l.Chip, l.Actions)
					}
				} else {
					names = append(names, l.Name)
				}
			}
			if nIRQ != tc.nIRQ {
				t.Errorf("%d numbered IRQs, want %d", nIRQ, tc.nIRQ)
			}
			if tc.summaries != nil && !slices.Equal(names, tc.summaries) {
				t.Errorf("summary rows %v, want %v", names, tc.summaries)
			}
			if tc.summaries == nil && len(names) != tc.nSummary {
				t.Errorf("%d summary rows %v, want %d", len(names), names, tc.nSummary)
			}
			for _, w := range tc.irqs {
				l := in.Line(w.irq)
				if l == nil {
					t.Errorf("irq %d missing", w.irq)
					continue
				}
				if l.Chip != w.chip || l.HWIRQ != w.hwirq || l.Trigger != w.trigger || !slices.Equal(l.Actions, w.actions) {
					t.Errorf("irq %d: chip %q hwirq %q trigger %q actions %q; want %q %q %q %q",
						w.irq, l.Chip, l.HWIRQ, l.Trigger, l.Actions, w.chip, w.hwirq, w.trigger, w.actions)
				}
				for cpu, want := range w.counts {
					if got := countAt(t, in, l, cpu); got != want {
						t.Errorf("irq %d CPU%d = %d, want %d", w.irq, cpu, got, want)
					}
				}
				if w.allZeroElse {
					for i, c := range l.Counts {
						if _, ok := w.counts[in.CPUs[i]]; !ok && c != 0 {
							t.Errorf("irq %d CPU%d = %d, want 0", w.irq, in.CPUs[i], c)
						}
					}
				}
			}
			for _, w := range tc.sums {
				l := in.Summary(w.name)
				if l == nil {
					t.Errorf("summary %s missing", w.name)
					continue
				}
				if l.Description != w.desc {
					t.Errorf("%s description %q, want %q", w.name, l.Description, w.desc)
				}
				if w.cpu < 0 {
					if len(l.Counts) != 1 || l.Counts[0] != w.count {
						t.Errorf("%s counts %v, want the single total %d", w.name, l.Counts, w.count)
					}
					continue
				}
				if got := countAt(t, in, l, w.cpu); got != w.count {
					t.Errorf("%s CPU%d = %d, want %d", w.name, w.cpu, got, w.count)
				}
			}
		})
	}
}

func TestParseInterruptsShapes(t *testing.T) {
	in, err := parseInterrupts("t", []byte("           CPU0       CPU1\r\n"+
		"  0:         1          2   IO-APIC   2-edge      timer\r\n"+
		" 16:  18446744073709551615 0   IO-APIC  16-fasteoi   ehci_hcd:usb1, mmc0 , \r\n"+
		" 17:         0          0   weird-chip\n"+
		" 18:         0          0\n"+
		"\n"+
		"IPI0:4294967296 5   Rescheduling interrupts\n"+
		"ERR:          7\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []InterruptLine{
		{Name: "0", IRQ: 0, Counts: []uint64{1, 2}, Chip: "IO-APIC", HWIRQ: "2", Trigger: "edge", Actions: []string{"timer"}},
		{Name: "16", IRQ: 16, Counts: []uint64{18446744073709551615, 0}, Chip: "IO-APIC", HWIRQ: "16", Trigger: "fasteoi", Actions: []string{"ehci_hcd:usb1", "mmc0"}},
		{Name: "17", IRQ: 17, Counts: []uint64{0, 0}, Chip: "weird-chip"},
		{Name: "18", IRQ: 18, Counts: []uint64{0, 0}},
		{Name: "IPI0", IRQ: -1, Counts: []uint64{4294967296, 5}, Description: "Rescheduling interrupts"},
		{Name: "ERR", IRQ: -1, Counts: []uint64{7}},
	}
	if d := cmp.Diff(want, in.Lines); d != "" {
		t.Errorf("lines (-want +got):\n%s", d)
	}
	if got := in.Lines[4].Total(); got != 4294967301 {
		t.Errorf("IPI0 total %d", got)
	}
	if in.Line(17) == nil || in.Line(19) != nil || in.Line(-1) != nil || in.Summary("NMI") != nil {
		t.Error("Line/Summary lookups wrong")
	}
}

func TestParseInterruptsErrors(t *testing.T) {
	const hdr = "   CPU0   CPU1\n"
	tests := []struct {
		name, data string
		line       int
		msg        string
	}{
		{"empty", "", 1, "empty file"},
		{"bad header", "   CPU0   CPUx\n", 1, "not CPUn"},
		{"header not cpu", "  foo\n", 1, "not CPUn"},
		{"header decreasing", "  CPU3 CPU1\n", 1, "not increasing"},
		{"header blank", "   \n 0: 1\n", 1, "names no CPU"},
		{"header huge id", "  CPU99999999999999999999\n", 1, "not CPUn"},
		{"no label", hdr + "  0:  1 2 IO-APIC 2-edge timer\n  garbage\n", 3, "no label"},
		{"empty label", hdr + "  :  1 2\n", 2, "empty label"},
		{"short row", hdr + "  0:  1 IO-APIC 2-edge timer\n", 2, "irq 0: 1 counts for 2 CPUs"},
		{"no counts", hdr + "NMI: Non-maskable interrupts\n", 2, "NMI: no counts"},
		{"overflow", hdr + "  0:  18446744073709551616 0 x\n", 2, "does not fit 64 bits"},
		{"bad irq", hdr + "  1x:  1 2 x\n", 2, "not an irq number"},
		{"huge irq", hdr + "  99999999999:  1 2 x\n", 2, "not an irq number"},
		{"repeated irq", hdr + "  5:  1 2 x\n  5:  1 2 x\n", 3, "out of order or repeated"},
		{"irq after summary", hdr + "NMI:  1 2 x\n  5:  1 2 x\n", 3, "after the summary rows"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseInterrupts("/proc/interrupts", []byte(tc.data))
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v is not a *ParseError", err)
			}
			if pe.File != "/proc/interrupts" || pe.Line != tc.line || !strings.Contains(pe.Msg, tc.msg) {
				t.Errorf("got %q (line %d), want line %d containing %q", err, pe.Line, tc.line, tc.msg)
			}
		})
	}
}

// FuzzParseInterrupts checks that no input panics, that what parses is
// internally consistent, and that printing it back the kernel's way parses to
// the same values.
func FuzzParseInterrupts(f *testing.F) {
	for _, name := range []string{"procfs/proc/interrupts", "node_exporter/proc/interrupts",
		"node_exporter/proc/interrupts_aarch64", "sysstat/root4/proc/interrupts"} {
		b, err := os.ReadFile(filepath.Join(fixtures, name))
		if err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("CPU0 CPU2\n 1: 3 4 X 5-edge a, b\nIPI0:1 2 x\nERR: 0\n"))
	f.Add([]byte("CPU0\n 0: 1 IR-PCI-MSI-edge\u00a0\u00a0\u00a0 bbbbbbbbbb\n"))
	f.Add([]byte("CPU0\n 0: 1 \v\v\vchip\f 1-edge\r x,,y\n"))
	f.Add([]byte("CPU0 CPU1\n 25: 1 2  Hyper-V PCIe MSI 4138200989697-edge      mana_q0@pci:7870:00:00.0\nFIQ:              usb_fiq\n"))
	f.Add([]byte("CPU0\n5:      29620   IXP4xx Timer Tick\n25:       3813   eth0\nErr:          0\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		in, err := parseInterrupts("fuzz", data)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v is not a *ParseError", err)
			}
			return
		}
		if len(in.CPUs) == 0 {
			t.Fatal("parsed with no CPUs")
		}
		var sb strings.Builder
		for _, c := range in.CPUs {
			sb.WriteString(" CPU")
			sb.WriteString(itoa(c))
		}
		sb.WriteByte('\n')
		last := -1
		for _, l := range in.Lines {
			if (len(l.Counts) == 0 && l.Name != "FIQ") || len(l.Counts) > len(in.CPUs) {
				t.Fatalf("row %s: %d counts for %d CPUs", l.Name, len(l.Counts), len(in.CPUs))
			}
			if l.IRQ >= 0 {
				if l.IRQ <= last || len(l.Counts) != len(in.CPUs) {
					t.Fatalf("irq %d after %d with %d counts", l.IRQ, last, len(l.Counts))
				}
				last = l.IRQ
			}
			sb.WriteString(l.Name)
			sb.WriteByte(':')
			for _, c := range l.Counts {
				sb.WriteByte(' ')
				sb.WriteString(utoa(c))
			}
			if l.IRQ >= 0 {
				if l.Chip != "" {
					sb.WriteString(" " + l.Chip)
					if l.HWIRQ != "" {
						sb.WriteString(" " + l.HWIRQ)
						if l.Trigger != "" {
							sb.WriteString("-" + l.Trigger)
						}
					} else if l.Trigger != "" {
						sb.WriteString("-" + l.Trigger)
					}
				}
				if len(l.Actions) > 0 {
					sb.WriteString(" " + strings.Join(l.Actions, ", "))
				}
			} else if l.Description != "" {
				sb.WriteString(" " + l.Description)
			}
			sb.WriteByte('\n')
		}
		again, err := parseInterrupts("again", []byte(sb.String()))
		if err != nil {
			t.Fatalf("re-parse of %q: %v", sb.String(), err)
		}
		if !slices.Equal(again.CPUs, in.CPUs) || len(again.Lines) != len(in.Lines) {
			t.Fatalf("re-parse differs: %v %d vs %v %d", again.CPUs, len(again.Lines), in.CPUs, len(in.Lines))
		}
		for i := range in.Lines {
			a, b := in.Lines[i], again.Lines[i]
			if a.Name != b.Name || a.IRQ != b.IRQ || !slices.Equal(a.Counts, b.Counts) {
				t.Fatalf("row %d: %+v became %+v", i, a, b)
			}
		}
	})
}

func itoa(n int) string { return utoa(uint64(n)) }

func utoa(n uint64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}
