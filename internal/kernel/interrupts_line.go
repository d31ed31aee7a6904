package kernel

import (
	"bytes"
	"fmt"
	"strconv"
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

func truncate(b []byte) string {
	if len(b) > 60 {
		return string(b[:60]) + "…"
	}
	return string(b)
}
