package record

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/load"
)

// Recording is a recording read back.
type Recording struct {
	// Name is the file name (or what the caller called the reader).
	Name    string
	Header  Header
	Samples []*load.Sample
	// Truncated is set when the last line was incomplete (the recorder was
	// killed mid-write) and was dropped.
	Truncated bool
}

// Host is the recording's host name: the header's, else the inventory's.
func (r *Recording) Host() string {
	if r.Header.Host != "" {
		return r.Header.Host
	}
	if r.Header.Inventory != nil {
		return r.Header.Inventory.Hostname
	}
	return r.Name
}

// ReadFile reads a recording file.
func ReadFile(path string) (*Recording, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Read(f, path)
}

// Read reads a recording. name is used in error messages ("run.jsonl:7: …").
//
// A last line without its newline that does not parse is taken as the trace
// of a killed recorder: it is dropped and Truncated is set. Any other bad
// line is an error naming the line. Lines of unknown type are skipped, so
// newer recorders may add them.
func Read(r io.Reader, name string) (*Recording, error) {
	rec := &Recording{Name: name}
	br := bufio.NewReaderSize(r, 64<<10)
	info := map[string]*irqInfo{}
	for n := 1; ; n++ {
		b, err := br.ReadBytes('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s:%d: %w", name, n, err)
		}
		complete := len(b) > 0 && b[len(b)-1] == '\n'
		atEOF := err != nil
		if len(bytes.TrimSpace(b)) == 0 {
			if atEOF {
				break
			}
			continue
		}
		perr := rec.parseLine(b, n, info)
		if perr != nil {
			if !complete && atEOF && n > 1 {
				rec.Truncated = true
				break
			}
			return nil, fmt.Errorf("%s:%d: %w", name, n, perr)
		}
		if atEOF {
			break
		}
	}
	if rec.Header.Type == "" {
		return nil, fmt.Errorf("%s: empty recording (no header line)", name)
	}
	return rec, nil
}

func (rec *Recording) parseLine(b []byte, n int, info map[string]*irqInfo) error {
	if n == 1 {
		var h Header
		if err := json.Unmarshal(b, &h); err != nil {
			return fmt.Errorf("header: %w", err)
		}
		if h.Type != "header" || h.Format != Format {
			return fmt.Errorf("not an irqpilot recording (first line has type %q, format %q)", h.Type, h.Format)
		}
		if h.Version > Version {
			return fmt.Errorf("recording format version %d is newer than this irqpilot reads (%d)", h.Version, Version)
		}
		rec.Header = h
		return nil
	}
	var typ struct {
		Type string `json:"type"`
	}
	var l line
	if err := json.Unmarshal(b, &l); err != nil {
		// Distinguish an unknown line type from a broken sample.
		if json.Unmarshal(b, &typ) == nil && typ.Type != "sample" {
			return nil
		}
		return fmt.Errorf("sample: %w", err)
	}
	if l.Type != "sample" {
		return nil
	}
	s, err := l.sample(info)
	if err != nil {
		return err
	}
	rec.Samples = append(rec.Samples, s)
	return nil
}

// sample rebuilds a load.Sample from a stored line.
func (l *line) sample(info map[string]*irqInfo) (*load.Sample, error) {
	for k, v := range l.IRQInfo {
		info[k] = v
	}
	if len(l.CPUs) == 0 {
		return nil, errors.New("sample has no cpus")
	}
	s := &load.Sample{
		Time: l.Time, Clock: time.Duration(l.Clock), ClockSource: l.ClockSource,
		CPUs: l.CPUs, Softirqs: l.Softirqs, Softnet: l.Softnet, Unavailable: l.Unavailable, Cost: l.Cost,
	}
	in := &kernel.Interrupts{CPUs: l.IRQCPUs, Lines: make([]kernel.InterruptLine, 0, len(l.IRQs))}
	for _, r := range l.IRQs {
		if len(r.Counts) != len(l.IRQCPUs) && len(r.Counts) != 1 {
			return nil, fmt.Errorf("irq %s: %d counts for %d CPUs", r.Name, len(r.Counts), len(l.IRQCPUs))
		}
		il := kernel.InterruptLine{Name: r.Name, IRQ: -1, Counts: r.Counts}
		if v, err := strconv.Atoi(r.Name); err == nil && v >= 0 {
			il.IRQ = v
		}
		if d := info[r.Name]; d != nil {
			il.Chip, il.HWIRQ, il.Trigger, il.Description = d.Chip, d.HWIRQ, d.Trigger, d.Description
			il.Actions = d.Actions
		}
		in.Lines = append(in.Lines, il)
	}
	s.Interrupts = in
	return s, nil
}
