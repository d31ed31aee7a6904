package record

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	"github.com/irqpilot/irqpilot/internal/load"
)

// Writer writes a recording. Each line goes to the underlying writer in a
// single Write call, so a killed recorder leaves at most one partial line.
// Buffers are reused between samples; a Writer is not safe for concurrent use.
type Writer struct {
	w     io.Writer
	buf   bytes.Buffer
	enc   *json.Encoder
	line  line
	rows  []irqRow
	info  map[string]*irqInfo // last irq_info written, by row label
	delta map[string]*irqInfo
	n     int
}

// NewWriter writes the header line and returns a Writer for the samples.
func NewWriter(w io.Writer, h Header) (*Writer, error) {
	h.Type, h.Format, h.Version = "header", Format, Version
	wr := &Writer{w: w, info: map[string]*irqInfo{}, delta: map[string]*irqInfo{}}
	wr.enc = json.NewEncoder(&wr.buf)
	if err := wr.enc.Encode(&h); err != nil {
		return nil, fmt.Errorf("record header: %w", err)
	}
	if _, err := w.Write(wr.buf.Bytes()); err != nil {
		return nil, fmt.Errorf("record header: %w", err)
	}
	return wr, nil
}

// Samples is how many samples were written.
func (w *Writer) Samples() int { return w.n }

// Write appends one sample.
func (w *Writer) Write(s *load.Sample) error {
	l := &w.line
	*l = line{
		Type: "sample", Time: s.Time, Clock: int64(s.Clock), ClockSource: s.ClockSource,
		CPUs: s.CPUs, Softirqs: s.Softirqs, Softnet: s.Softnet, Unavailable: s.Unavailable, Cost: s.Cost,
	}
	clear(w.delta)
	w.rows = w.rows[:0]
	if in := s.Interrupts; in != nil {
		l.IRQCPUs = in.CPUs
		for i := range in.Lines {
			il := &in.Lines[i]
			w.rows = append(w.rows, irqRow{Name: il.Name, Counts: il.Counts})
			cur := irqInfo{Chip: il.Chip, HWIRQ: il.HWIRQ, Trigger: il.Trigger, Actions: il.Actions, Description: il.Description}
			if prev, ok := w.info[il.Name]; !ok || !prev.equal(&cur) {
				c := cur
				c.Actions = append([]string(nil), il.Actions...)
				w.info[il.Name] = &c
				w.delta[il.Name] = &c
			}
		}
	}
	l.IRQs = w.rows
	if len(w.delta) > 0 {
		l.IRQInfo = w.delta
	}
	w.buf.Reset()
	if err := w.enc.Encode(l); err != nil {
		return fmt.Errorf("record sample %d: %w", w.n+1, err)
	}
	if _, err := w.w.Write(w.buf.Bytes()); err != nil {
		return fmt.Errorf("record sample %d: %w", w.n+1, err)
	}
	w.n++
	return nil
}

// MarshalJSON encodes a row as ["label",[c0,c1,…]]. Written by hand because
// these rows are most of every line and reflection would dominate the
// recorder's CPU time on many-CPU hosts.
func (r irqRow) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 8+len(r.Name)+len(r.Counts)*8)
	b = strconv.AppendQuote(append(b, '['), r.Name)
	b = append(b, ",["...)
	for i, c := range r.Counts {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendUint(b, c, 10)
	}
	return append(b, "]]"...), nil
}

// UnmarshalJSON decodes ["label",[c0,c1,…]].
func (r *irqRow) UnmarshalJSON(b []byte) error {
	var raw []json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	if len(raw) != 2 {
		return fmt.Errorf("irq row: want [label, counts], got %d elements", len(raw))
	}
	if err := json.Unmarshal(raw[0], &r.Name); err != nil {
		return fmt.Errorf("irq row label: %w", err)
	}
	if err := json.Unmarshal(raw[1], &r.Counts); err != nil {
		return fmt.Errorf("irq row %s counts: %w", r.Name, err)
	}
	return nil
}
