package kernel

import (
	"bytes"
	"fmt"
	"strconv"
)

// Softirqs is /proc/softirqs: Counts[t][i] is softirq type Types[t] on CPU
// CPUs[i]. Its JSON names are those of recorded samples.
type Softirqs struct {
	CPUs   []int      `json:"cpus"`
	Types  []string   `json:"types"`
	Counts [][]uint64 `json:"counts"`
}

// Softirqs reads /proc/softirqs (parseSoftirqs).
func (f *FS) Softirqs() (*Softirqs, error) { return readParsed(f, "proc/softirqs", parseSoftirqs) }

// parseSoftirqs parses /proc/softirqs keeping the CPU ids of the header.
// name is used in errors; bad input yields a *ParseError.
//
// Written here rather than using procfs.FS.Softirqs because procfs drops the
// header, so its columns carry no CPU ids, and it knows only the ten softirq
// names of today's kernels (older ones have BLOCK_IOPOLL, newer may add
// more).
func parseSoftirqs(name string, data []byte) (*Softirqs, error) {
	lines := bytes.Split(data, []byte("\n"))
	if len(lines) == 0 || len(bytes.TrimSpace(lines[0])) == 0 {
		return nil, &ParseError{File: name, Line: 1, Msg: "empty file"}
	}
	sq := &Softirqs{}
	for _, f := range bytes.Fields(lines[0]) {
		id, err := strconv.Atoi(string(bytes.TrimPrefix(f, []byte("CPU"))))
		if !bytes.HasPrefix(f, []byte("CPU")) || err != nil || id < 0 {
			return nil, &ParseError{File: name, Line: 1, Msg: fmt.Sprintf("header field %q is not CPUn", f)}
		}
		sq.CPUs = append(sq.CPUs, id)
	}
	if len(sq.CPUs) == 0 {
		return nil, &ParseError{File: name, Line: 1, Msg: "header names no CPU"}
	}
	for n, l := range lines[1:] {
		f := bytes.Fields(l)
		if len(f) == 0 {
			continue
		}
		label, ok := bytes.CutSuffix(f[0], []byte(":"))
		if !ok || len(label) == 0 {
			return nil, &ParseError{File: name, Line: n + 2, Msg: fmt.Sprintf("no label in %q", l)}
		}
		if len(f)-1 != len(sq.CPUs) {
			return nil, &ParseError{File: name, Line: n + 2, Msg: fmt.Sprintf("%s: %d counts for %d CPUs", label, len(f)-1, len(sq.CPUs))}
		}
		row := make([]uint64, len(sq.CPUs))
		for i, v := range f[1:] {
			c, err := strconv.ParseUint(string(v), 10, 64)
			if err != nil {
				return nil, &ParseError{File: name, Line: n + 2, Msg: fmt.Sprintf("%s CPU%d: count %q is not a number", label, sq.CPUs[i], v)}
			}
			row[i] = c
		}
		sq.Types = append(sq.Types, string(label))
		sq.Counts = append(sq.Counts, row)
	}
	return sq, nil
}
