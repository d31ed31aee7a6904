package kernel

import (
	"bytes"
	"fmt"
	"math"
)

// Interrupts is a parsed /proc/interrupts.
type Interrupts struct {
	// CPUs are the CPU ids named in the header, in column order. Offline CPUs
	// are absent, so ids need not be contiguous ("CPU0 … CPU5 CPU7").
	CPUs  []int
	Lines []InterruptLine
}

// InterruptLine is one row of /proc/interrupts.
type InterruptLine struct {
	// Name is the row label without the colon: "24", "NMI", "IPI0".
	Name string
	// IRQ is the interrupt number for numbered rows, -1 for summary rows.
	IRQ int
	// Counts are per CPU, aligned with Interrupts.CPUs. Rows that the
	// kernel prints with a single total (ERR, MIS) have one element.
	Counts []uint64
	// Chip, HWIRQ and Trigger describe the interrupt controller side of a
	// numbered IRQ ("IO-APIC", "2", "edge"; "ITS-MSI", "524288", "Edge").
	// Old kernels glue chip and trigger ("IR-PCI-MSI-edge"); they are split.
	Chip, HWIRQ, Trigger string
	// Actions are the handler names registered on the IRQ, in kernel order.
	Actions []string
	// Description is the text of a summary row ("Non-maskable interrupts").
	Description string
}

// Total is the sum of the row's counts.
func (l *InterruptLine) Total() uint64 {
	var t uint64
	for _, c := range l.Counts {
		t += c
	}
	return t
}

// Line returns the numbered row for irq, or nil.
func (in *Interrupts) Line(irq int) *InterruptLine {
	// Numbered rows are ascending (parseInterrupts enforces it), so search.
	lo, hi := 0, len(in.Lines)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		l := &in.Lines[m]
		if l.IRQ < 0 || l.IRQ >= irq { // summary rows sort after numbered ones
			hi = m
		} else {
			lo = m + 1
		}
	}
	if lo < len(in.Lines) && in.Lines[lo].IRQ == irq {
		return &in.Lines[lo]
	}
	return nil
}

// Summary returns the summary row with the given name ("LOC", "IPI0"), or nil.
func (in *Interrupts) Summary(name string) *InterruptLine {
	for i := range in.Lines {
		if in.Lines[i].IRQ < 0 && in.Lines[i].Name == name {
			return &in.Lines[i]
		}
	}
	return nil
}

// ParseError locates a problem in a kernel file.
type ParseError struct {
	File string
	Line int
	Msg  string
}

func (e *ParseError) Error() string { return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg) }

// maxIRQ bounds interrupt numbers. The kernel's nr_irqs is at most
// IRQ_BITMAP_BITS (NR_IRQS + 8196 with sparse IRQs, i.e. well below a million).
const maxIRQ = 1 << 24

// InterruptsPath is /proc/interrupts, relative to the root (Interrupts
// reads it).
const InterruptsPath = "proc/interrupts"

// Interrupts reads /proc/interrupts (parseInterrupts).
//
// The limits on rows and counts are for a snapshot or tree, which anyone
// may have written: the live kernel's file is as large as the machine, and
// a machine larger than the limits must still be read.
func (f *FS) Interrupts() (*Interrupts, error) {
	if f.root == "/" {
		return readParsed(f, "proc/interrupts", parseLiveInterrupts)
	}
	return readParsed(f, "proc/interrupts", parseInterrupts)
}

func parseLiveInterrupts(name string, data []byte) (*Interrupts, error) {
	return parseInterruptsWithin(name, data, math.MaxInt, math.MaxInt)
}

// parseInterrupts parses the text of /proc/interrupts. name is used in errors.
//
// The kernel prints a header of CPU ids (online CPUs only), then one row per
// numbered IRQ in ascending order ("  36:  0  41924  PCI-MSIX-0000:00:02.0
// 1-edge  virtio1-req.0"), then the architecture's summary rows (x86: NMI,
// LOC, … ERR, MIS, PIN…; arm64: IPI0…IPIn, whose label is glued to the first
// count when it has 10 digits, and Err). Bad input yields a *ParseError.
//
// Written by hand instead of using prometheus/procfs: procfs keeps counts as
// strings, ignores the CPU ids of the header (wrong with offline CPUs) and
// misreads glued arm64 IPI rows; it is also several times slower on
// thousand-CPU files because it splits every field into its own string.
func parseInterrupts(name string, data []byte) (*Interrupts, error) {
	return parseInterruptsWithin(name, data, maxInterruptRows, maxInterruptCells)
}

// parseInterruptsWithin is parseInterrupts with its limits on rows and on
// counts (columns × rows) given.
func parseInterruptsWithin(name string, data []byte, maxRows, maxCells int) (*Interrupts, error) {
	p := irqParser{name: name, data: data}
	header, ok := p.next()
	if !ok {
		return nil, &ParseError{name, 1, "empty file"}
	}
	if err := p.checkLength(header); err != nil {
		return nil, err
	}
	n := 0
	for range bytes.FieldsSeq(header) {
		n++
	}
	if n > maxInterruptColumns {
		return nil, p.limitf("%d CPU columns, over the limit of %d (NR_CPUS is at most 8192)", n, maxInterruptColumns)
	}
	in := &Interrupts{}
	for f := range bytes.FieldsSeq(header) {
		if len(f) < 4 || string(f[:3]) != "CPU" {
			return nil, p.errorf("header field %q is not CPUn", truncate(f))
		}
		id, ok := parseDec(f[3:], maxCPUID)
		if !ok {
			return nil, p.errorf("header field %q is not CPUn", truncate(f))
		}
		if n := len(in.CPUs); n > 0 && int(id) <= in.CPUs[n-1] {
			return nil, p.errorf("header CPU ids not increasing at %q", f)
		}
		in.CPUs = append(in.CPUs, int(id))
	}
	if len(in.CPUs) == 0 {
		return nil, p.errorf("header names no CPU")
	}
	p.ncpu = len(in.CPUs)

	// One backing array for all counts keeps allocations per file, not per
	// row. Every count takes at least two bytes (a digit and a separator), so
	// len(data)/2 bounds the total and a hostile header cannot make us
	// allocate more than the input justifies.
	rows := bytes.Count(p.data, []byte{'\n'}) + 1
	if rows > maxRows {
		return nil, p.limitf("%d rows, over the limit of %d (one per IRQ in use: the largest real file has 1 057)", rows, maxRows)
	}
	if cells := rows * p.ncpu; cells > maxCells {
		return nil, p.limitf("%d CPU columns × %d rows = %d counts, over the limit of %d (the largest real file, 1152 CPUs × 1 057 rows, has 1.2 million)",
			p.ncpu, rows, cells, maxCells)
	}
	p.backing = make([]uint64, min(rows*p.ncpu, len(data)/2+p.ncpu))
	in.Lines = make([]InterruptLine, 0, rows)
	lastIRQ, sawSummary := -1, false
	for {
		l, ok := p.next()
		if !ok {
			break
		}
		if err := p.checkLength(l); err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(l)) == 0 {
			continue
		}
		line, err := p.parseLine(l)
		if err != nil {
			return nil, err
		}
		if line.IRQ >= 0 {
			if sawSummary {
				return nil, p.errorf("irq %d listed after the summary rows", line.IRQ)
			}
			if line.IRQ <= lastIRQ {
				return nil, p.errorf("irq %d out of order or repeated (after irq %d)", line.IRQ, lastIRQ)
			}
			lastIRQ = line.IRQ
		} else {
			sawSummary = true
		}
		in.Lines = append(in.Lines, line)
	}
	chipless := true
	for i := range in.Lines {
		if l := &in.Lines[i]; l.IRQ >= 0 && hasChipColumn(l.Description) {
			chipless = false
			break
		}
	}
	for i := range in.Lines {
		if l := &in.Lines[i]; l.IRQ >= 0 {
			parseIRQDesc(l, l.Description, chipless)
			l.Description = ""
		}
	}
	return in, nil
}

// maxCPUID bounds CPU ids in the header (the kernel's NR_CPUS is ≤ 8192).
const maxCPUID = 1 << 16

// Limits on what a /proc/interrupts may cost to parse, all far above what a
// kernel prints, checked before anything proportional to them is allocated.
// The largest real file at hand (pcp's 1152-CPU x86 capture) is 13.4 MB:
// 1 057 lines of up to 12 740 bytes, 1.2 million counts.
const (
	// maxInterruptColumns: one column per online CPU, and CONFIG_NR_CPUS
	// is at most 8192 on every architecture (x86 MAXSMP, powerpc).
	maxInterruptColumns = 8192
	// maxInterruptRows: one row per IRQ in use. nr_irqs may reach 532 740
	// at 8192 CPUs (IRQ_BITMAP_BITS), but the rows are the IRQs allocated:
	// 1 057 on the 1152-CPU capture. Each row costs a line record (about
	// 150 bytes) whatever its width, reserved up front: 10 MB here.
	maxInterruptRows = 1 << 16
	// maxInterruptCells bounds columns × rows, the counts reserved up front
	// (8 bytes each, so 32 MiB): 3.4 times the 1152-CPU capture, 512 rows
	// at 8192 CPUs, 2 048 at 2048. It is what keeps a parse, with the file
	// it reads (maxSnapshotFileBytes), inside a 1 GiB address-space limit:
	// 8192 columns × 2 047 rows of zeros, 34 MB from a 57 KB archive,
	// reserved 128 MiB per parse under the earlier 2^24 and ran the runtime
	// out of memory under 1 to 1.75 GiB
	// (TestSnapshotInterruptsUnderAddressSpaceLimit).
	maxInterruptCells = 1 << 22
	// maxInterruptLineBytes bounds one line: 8192 counts of 20 digits
	// (uint64) with separators are 172 KB, plus the chip and action names.
	maxInterruptLineBytes = 1 << 20
	// maxInterruptActions bounds the handlers named on one IRQ (a shared
	// legacy line has a handful): without it, 47 rows of "a, a, …" in a
	// 48 MB file made 25 million action strings, 394 MB.
	maxInterruptActions = 64
)
