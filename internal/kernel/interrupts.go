package kernel

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
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

func (p *irqParser) checkLength(l []byte) error {
	if len(l) > maxInterruptLineBytes {
		return p.limitf("line is %d bytes long, over the limit of %d", len(l), maxInterruptLineBytes)
	}
	return nil
}

type irqParser struct {
	name    string
	data    []byte
	lineNo  int
	ncpu    int
	backing []uint64
}

func (p *irqParser) next() ([]byte, bool) {
	if len(p.data) == 0 {
		return nil, false
	}
	p.lineNo++
	var l []byte
	if i := bytes.IndexByte(p.data, '\n'); i < 0 {
		l, p.data = p.data, nil
	} else {
		l, p.data = p.data[:i], p.data[i+1:]
	}
	if n := len(l); n > 0 && l[n-1] == '\r' {
		l = l[:n-1]
	}
	return l, true
}

func (p *irqParser) errorf(format string, args ...any) error {
	return &ParseError{File: p.name, Line: p.lineNo, Msg: fmt.Sprintf(format, args...)}
}

// limitf is errorf for a limit on what the file may cost to parse: the
// *ParseError, matched by errors.Is(err, ErrOverLimit).
func (p *irqParser) limitf(format string, args ...any) error {
	return &parseLimitError{p.errorf(format, args...).(*ParseError)}
}

// parseLimitError is a *ParseError for a limit, not a malformed file.
type parseLimitError struct{ *ParseError }

func (e *parseLimitError) Unwrap() error        { return e.ParseError }
func (e *parseLimitError) Is(target error) bool { return target == ErrOverLimit }

// counts returns room for n counts from the shared backing array.
func (p *irqParser) counts(n int) []uint64 {
	if len(p.backing) < n {
		p.backing = make([]uint64, max(n, 1024))
	}
	c := p.backing[:0:n]
	p.backing = p.backing[n:]
	return c
}

func isBlank(c byte) bool { return c == ' ' || c == '\t' || c == '\v' || c == '\f' || c == '\r' }

func skipBlank(b []byte) []byte {
	i := 0
	for i < len(b) && isBlank(b[i]) {
		i++
	}
	return b[i:]
}

func trimBlank(b []byte) []byte {
	b = skipBlank(b)
	n := len(b)
	for n > 0 && isBlank(b[n-1]) {
		n--
	}
	return b[:n]
}

// parseDec parses an unsigned decimal of at most limit; ok is false for an
// empty field, a non-digit or a value above limit (including uint64 overflow).
func parseDec(b []byte, limit uint64) (uint64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	var v uint64
	for _, c := range b {
		d := uint64(c - '0')
		if d > 9 {
			return 0, false
		}
		if v > (limit-d)/10 {
			return 0, false
		}
		v = v*10 + d
	}
	return v, true
}

func (p *irqParser) parseLine(l []byte) (InterruptLine, error) {
	colon := bytes.IndexByte(l, ':')
	if colon < 0 {
		return InterruptLine{}, p.errorf("no label in %q", truncate(l))
	}
	labelB := trimBlank(l[:colon])
	if len(labelB) == 0 {
		return InterruptLine{}, p.errorf("empty label in %q", truncate(l))
	}
	line := InterruptLine{IRQ: -1}
	if c := labelB[0]; c >= '0' && c <= '9' {
		n, ok := parseDec(labelB, maxIRQ)
		if !ok {
			return InterruptLine{}, p.errorf("label %q is not an irq number", truncate(labelB))
		}
		line.IRQ = int(n)
		line.Name = strconv.Itoa(line.IRQ)
	} else {
		line.Name = string(labelB)
	}
	rest := l[colon+1:]
	line.Counts = p.counts(p.ncpu)
	// Counts: up to ncpu decimal fields. On arm64 the first count may be glued
	// to the label ("IPI0:2768808080"): the colon split handles that.
	for len(line.Counts) < p.ncpu {
		r := skipBlank(rest)
		end := 0
		for end < len(r) && r[end] >= '0' && r[end] <= '9' {
			end++
		}
		if end == 0 || (end < len(r) && !isBlank(r[end])) {
			break // not a count: the description starts here
		}
		v, ok := parseDec(r[:end], ^uint64(0))
		if !ok {
			return InterruptLine{}, p.errorf("%s: count %q does not fit 64 bits", line.Name, truncate(r[:end]))
		}
		line.Counts = append(line.Counts, v)
		rest = r[end:]
	}
	if len(line.Counts) == 0 {
		if line.Name == "FIQ" {
			// 32-bit ARM prints the FIQ's owner and no counts
			// (show_fiq_list: "FIQ:              usb_fiq").
			line.Counts = nil
			line.Description = string(trimBlank(rest))
			return line, nil
		}
		return InterruptLine{}, p.errorf("%s: no counts", line.Name)
	}
	text := trimBlank(rest)
	if line.IRQ < 0 {
		line.Description = string(text)
		return line, nil
	}
	if len(line.Counts) != p.ncpu {
		return InterruptLine{}, p.errorf("irq %s: %d counts for %d CPUs", line.Name, len(line.Counts), p.ncpu)
	}
	// Each action becomes a string header (16 bytes) from as little as two
	// bytes of text: bounded, they cannot multiply the file eightfold.
	if n := bytes.Count(text, []byte{','}) + 1; n > maxInterruptActions {
		return InterruptLine{}, p.limitf("irq %s: %d actions, over the limit of %d", line.Name, n, maxInterruptActions)
	}
	// The description is split once the whole file is read: whether it
	// has a chip column is a property of the file (parseInterrupts).
	line.Description = string(text)
	return line, nil
}

// nextField splits the first blank-separated field off s.
func nextField(s string) (field, rest string) {
	i := 0
	for i < len(s) && isBlank(s[i]) {
		i++
	}
	j := i
	for j < len(s) && !isBlank(s[j]) {
		j++
	}
	return s[i:j], s[j:]
}

// parseIRQDesc splits what follows a numbered row's counts into the chip,
// hwirq, trigger and actions. The kernel prints (kernel/irq/proc.c) the chip
// name right-aligned in eight columns, the hwirq right-aligned in the label's
// width, then "Level"/"Edge" (CONFIG_GENERIC_IRQ_SHOW_LEVEL) or "-" and the
// flow handler's name, then two spaces and the actions joined by ", ":
//
//	"IO-APIC   2-edge      timer", "GICv3  27 Level     arch_timer",
//	"PCI-MSIX-0000:00:02.0   1-edge      virtio1-req.0",
//	"Hyper-V PCIe MSI 4138200989697-edge      mana_q0@pci:7870:00:00.0".
//
// The chip name may hold spaces, so it is not the first field: it is all the
// text before the hwirq, found as the first "N-flow" field or "N" followed
// by a trigger word (a chip whose IRQs have no domain prints a bare trigger
// word instead). Old kernels print no hwirq and glue the chip to the flow
// ("IR-PCI-MSI-edge      eth0", "xen-pirq-ioapic-edge  i8042"); there the
// chip column ends at the first run of two blanks. Kernels older still
// (2.6 on ARM and others) print no chip column at all ("IXP4xx Timer Tick",
// "eth0"): chipless says the file has that layout (see hasChipColumn), and
// the whole text is then the actions.
// All results are substrings of text, so the row costs one string allocation
// plus the action slice.
func parseIRQDesc(line *InterruptLine, text string, chipless bool) {
	if trimString(text) == "" {
		return
	}
	var acts string
	if chipless {
		acts = text
	} else {
		chip, hwirq, trigger, rest, ok := splitAnchor(text)
		if !ok {
			chip, rest = splitColumn(text)
			if i := lastIndexByte(chip, '-'); i > 0 && isTriggerWord(chip[i+1:]) {
				chip, trigger = chip[:i], chip[i+1:]
			}
		}
		line.Chip, line.HWIRQ, line.Trigger = trimString(chip), hwirq, trigger
		acts = rest
	}
	// Actions are joined by ", " and may themselves contain spaces
	// ("PCIe PME, pciehp"), so cut the text rather than the fields.
	n := 0
	for i := 0; i < len(acts); i++ {
		if acts[i] == ',' {
			n++
		}
	}
	for {
		a, more, found := cut(acts, ',')
		if a = trimString(a); a != "" {
			if line.Actions == nil {
				line.Actions = make([]string, 0, n+1)
			}
			line.Actions = append(line.Actions, a)
		}
		if !found {
			break
		}
		acts = more
	}
}

// maxChipWords bounds how many blank-separated words a chip name may have
// before the hwirq ("BRCM STB PCIe MSI" has four); an anchor found later is
// in the actions.
const maxChipWords = 6

// splitAnchor finds the hwirq and trigger after a chip name that may hold
// spaces: the first field that is "N-flow", "N" followed by a trigger word,
// or (no domain, CONFIG_GENERIC_IRQ_SHOW_LEVEL) a bare trigger word, after at
// least one chip word. A lone "N" right after a one-word chip is the hwirq
// of a chip without a flow name. rest is the text after the anchor.
func splitAnchor(text string) (chip, hwirq, trigger, rest string, ok bool) {
	pos := 0
	for k := 0; k <= maxChipWords; k++ {
		f, r := nextField(text[pos:])
		if f == "" {
			return "", "", "", "", false
		}
		start := pos + (len(text[pos:]) - len(r)) - len(f)
		end := start + len(f)
		if k > 0 {
			switch {
			case isHwirqTrigger(f):
				i := indexByte(f, '-')
				return text[:start], f[:i], f[i+1:], text[end:], true
			case isDecimal(f):
				f2, r2 := nextField(text[end:])
				if isTriggerWord(f2) {
					return text[:start], f, f2, r2, true
				}
				if k == 1 {
					return text[:start], f, "", text[end:], true
				}
			case isTriggerWord(f) && k == 1:
				return text[:start], "", f, text[end:], true
			case k == 1 && len(f) > 1 && f[0] == '-':
				// No domain, so no hwirq: the flow name follows the chip
				// ("xen-dyn    -event     vif0-q0-tx", "-edge").
				return text[:start], "", f[1:], text[end:], true
			}
		}
		if indexByte(f, ',') >= 0 {
			return "", "", "", "", false // into the actions
		}
		pos = end
	}
	return "", "", "", "", false
}

// splitColumn cuts text at the first run of two or more blanks after its
// first field: the chip column of old layouts, then the actions.
func splitColumn(text string) (chip, rest string) {
	t := skipBlank([]byte(text))
	off := len(text) - len(t)
	for i := off; i+1 < len(text); i++ {
		if isBlank(text[i]) && isBlank(text[i+1]) {
			return text[off:i], text[i:]
		}
	}
	return text[off:], ""
}

// hasChipColumn reports whether a row's description has a chip column: an
// hwirq anchor or two blank-separated columns. A file in which no numbered
// row has one was printed by a kernel without the chip column.
func hasChipColumn(text string) bool {
	if _, _, _, _, ok := splitAnchor(text); ok {
		return true
	}
	_, rest := splitColumn(text)
	return trimString(rest) != ""
}

func indexByte(s string, c byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return i
		}
	}
	return -1
}

func lastIndexByte(s string, c byte) int {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == c {
			return i
		}
	}
	return -1
}

func cut(s string, c byte) (before, after string, found bool) {
	if i := indexByte(s, c); i >= 0 {
		return s[:i], s[i+1:], true
	}
	return s, "", false
}

func trimString(s string) string {
	i, j := 0, len(s)
	for i < j && isBlank(s[i]) {
		i++
	}
	for j > i && isBlank(s[j-1]) {
		j--
	}
	return s[i:j]
}

func isDecimal(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func isHwirqTrigger(s string) bool {
	i := indexByte(s, '-')
	return i > 0 && isDecimal(s[:i]) && isTriggerWord(s[i+1:])
}

// isTriggerWord reports whether s is a flow-handler name ("edge", "fasteoi"…)
// as /proc/interrupts prints it after the hwirq, or the "Edge"/"Level" that
// CONFIG_GENERIC_IRQ_SHOW_LEVEL kernels (arm64) print instead.
func isTriggerWord(s string) bool {
	switch s {
	case "edge", "level", "fasteoi", "simple", "percpu", "percpu_devid", "none", "bad",
		"Edge", "Level", "EDGE", "LEVEL":
		return true
	}
	return false
}

func truncate(b []byte) string {
	if len(b) > 60 {
		return string(b[:60]) + "…"
	}
	return string(b)
}
