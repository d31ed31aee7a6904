package kernel

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
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

// ParseError locates a problem in a kernel file.
type ParseError struct {
	File string
	Line int
	Msg  string
}

func (e *ParseError) Error() string { return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg) }

// ParseInterrupts parses the text of /proc/interrupts. name is used in errors.
func ParseInterrupts(name string, data []byte) (*Interrupts, error) {
	lineNo := 0
	next := func() ([]byte, bool) {
		if len(data) == 0 {
			return nil, false
		}
		lineNo++
		i := bytes.IndexByte(data, '\n')
		var l []byte
		if i < 0 {
			l, data = data, nil
		} else {
			l, data = data[:i], data[i+1:]
		}
		return l, true
	}
	header, ok := next()
	if !ok {
		return nil, &ParseError{name, 1, "empty file"}
	}
	in := &Interrupts{}
	for _, f := range bytes.Fields(header) {
		if !bytes.HasPrefix(f, []byte("CPU")) {
			return nil, &ParseError{name, 1, fmt.Sprintf("header field %q is not CPUn", f)}
		}
		id, err := strconv.Atoi(string(f[3:]))
		if err != nil || id < 0 {
			return nil, &ParseError{name, 1, fmt.Sprintf("header field %q is not CPUn", f)}
		}
		if n := len(in.CPUs); n > 0 && id <= in.CPUs[n-1] {
			return nil, &ParseError{name, 1, fmt.Sprintf("header CPU ids not increasing at %q", f)}
		}
		in.CPUs = append(in.CPUs, id)
	}
	if len(in.CPUs) == 0 {
		return nil, &ParseError{name, 1, "header names no CPU"}
	}
	ncpu := len(in.CPUs)
	for {
		l, ok := next()
		if !ok {
			break
		}
		if len(bytes.TrimSpace(l)) == 0 {
			continue
		}
		line, err := parseInterruptLine(l, ncpu)
		if err != nil {
			return nil, &ParseError{name, lineNo, err.Error()}
		}
		in.Lines = append(in.Lines, line)
	}
	return in, nil
}

func parseInterruptLine(l []byte, ncpu int) (InterruptLine, error) {
	colon := bytes.IndexByte(l, ':')
	if colon < 0 {
		return InterruptLine{}, fmt.Errorf("no label in %q", truncate(l))
	}
	label := string(bytes.TrimSpace(l[:colon]))
	if label == "" {
		return InterruptLine{}, fmt.Errorf("empty label in %q", truncate(l))
	}
	line := InterruptLine{Name: label, IRQ: -1}
	if n, err := strconv.Atoi(label); err == nil && n >= 0 {
		line.IRQ = n
	}
	rest := l[colon+1:]
	line.Counts = make([]uint64, 0, ncpu)
	// Counts: up to ncpu decimal fields. On arm64 the first count may be glued
	// to the label ("IPI0:2768808080"): the colon split handles that.
	for len(line.Counts) < ncpu {
		rest = bytes.TrimLeft(rest, " \t")
		end := 0
		for end < len(rest) && rest[end] >= '0' && rest[end] <= '9' {
			end++
		}
		if end == 0 || (end < len(rest) && rest[end] != ' ' && rest[end] != '\t') {
			break
		}
		v, err := strconv.ParseUint(string(rest[:end]), 10, 64)
		if err != nil {
			return InterruptLine{}, fmt.Errorf("%s: count %q: %v", label, rest[:end], err)
		}
		line.Counts = append(line.Counts, v)
		rest = rest[end:]
	}
	if len(line.Counts) == 0 {
		return InterruptLine{}, fmt.Errorf("%s: no counts", label)
	}
	text := strings.TrimSpace(string(rest))
	if line.IRQ < 0 {
		line.Description = text
		return line, nil
	}
	if len(line.Counts) != ncpu {
		return InterruptLine{}, fmt.Errorf("irq %s: %d counts for %d CPUs", label, len(line.Counts), ncpu)
	}
	parseIRQDesc(&line, text)
	return line, nil
}

// parseIRQDesc splits "IO-APIC   2-edge      timer", "GICv3  27 Level  arch_timer",
// "IR-PCI-MSI-edge  eth0" (old kernels) or "PCI-MSIX-0000:00:02.0   1-edge  virtio1-req.0".
func parseIRQDesc(line *InterruptLine, text string) {
	f := strings.Fields(text)
	if len(f) == 0 {
		return
	}
	consumed := 0
	switch {
	case len(f) >= 2 && isHwirqTrigger(f[1]):
		line.Chip = f[0]
		line.HWIRQ, line.Trigger, _ = strings.Cut(f[1], "-")
		consumed = 2
	case len(f) >= 3 && isDecimal(f[1]) && isTriggerWord(f[2]):
		line.Chip, line.HWIRQ, line.Trigger = f[0], f[1], f[2]
		consumed = 3
	case len(f) >= 2 && isDecimal(f[1]):
		line.Chip, line.HWIRQ = f[0], f[1]
		consumed = 2
	default:
		chip := f[0]
		if i := strings.LastIndexByte(chip, '-'); i > 0 && isTriggerWord(chip[i+1:]) {
			line.Chip, line.Trigger = chip[:i], chip[i+1:]
		} else {
			line.Chip = chip
		}
		consumed = 1
	}
	// Actions follow the consumed fields; they are joined by ", " and may
	// themselves contain spaces, so cut the text rather than the fields.
	acts := text
	for i := 0; i < consumed; i++ {
		acts = strings.TrimLeft(acts, " \t")
		acts = acts[len(f[i]):]
	}
	acts = strings.TrimSpace(acts)
	if acts == "" {
		return
	}
	for _, a := range strings.Split(acts, ",") {
		if a = strings.TrimSpace(a); a != "" {
			line.Actions = append(line.Actions, a)
		}
	}
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
	h, t, ok := strings.Cut(s, "-")
	return ok && isDecimal(h) && isTriggerWord(t)
}

func isTriggerWord(s string) bool {
	switch strings.ToLower(s) {
	case "edge", "level", "fasteoi", "simple", "percpu", "none", "bad":
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
