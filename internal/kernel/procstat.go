package kernel

import (
	"bytes"
	"fmt"
	"sort"
	"strconv"
)

// UserHZ is USER_HZ, the unit of the clock ticks /proc/stat and
// /proc/PID/stat count in: 100 on every Linux architecture's user ABI
// (procfs assumes the same).
const UserHZ = 100

// CPUStat is one "cpuN" line of /proc/stat, in USER_HZ clock ticks. As in
// the kernel, User includes Guest and Nice includes GuestNice.
type CPUStat struct {
	CPU       int
	User      uint64
	Nice      uint64
	System    uint64
	Idle      uint64
	IOWait    uint64
	IRQ       uint64
	SoftIRQ   uint64
	Steal     uint64
	Guest     uint64
	GuestNice uint64
	// Columns is how many counters the kernel printed: 10 since 2.6.33,
	// fewer on older kernels (the missing ones are 0).
	Columns int
}

// statCPUColumns is how many counters of a cpu line CPUStat holds; later
// columns, should a kernel add any, are ignored.
const statCPUColumns = 10

// StatCPUs reads the per-CPU lines of /proc/stat (parseStatCPUs).
func (f *FS) StatCPUs() ([]CPUStat, error) { return readParsed(f, "proc/stat", parseStatCPUs) }

// parseStatCPUs parses the per-CPU lines ("cpu0 …") of /proc/stat, which
// the kernel prints for online CPUs only, and returns them by ascending CPU
// id. The "cpu" total and every other line are skipped; a cpu line without
// counters is skipped too. name is used in errors; bad input yields a
// *ParseError.
//
// Written here rather than with prometheus/procfs because procfs reads the
// file itself, which a kernel.FS could not record for a capture.
func parseStatCPUs(name string, data []byte) ([]CPUStat, error) {
	var out []CPUStat
	seen := map[int]bool{}
	for n, l := range bytes.Split(data, []byte("\n")) {
		f := bytes.Fields(l)
		if len(f) < 2 || !bytes.HasPrefix(f[0], []byte("cpu")) || len(f[0]) == 3 {
			continue
		}
		id, err := strconv.Atoi(string(f[0][3:]))
		if err != nil || id < 0 || id > maxCPUID {
			return nil, &ParseError{name, n + 1, fmt.Sprintf("%q is not cpuN", truncate(f[0]))}
		}
		if seen[id] {
			return nil, &ParseError{name, n + 1, fmt.Sprintf("cpu%d listed twice", id)}
		}
		seen[id] = true
		c := CPUStat{CPU: id, Columns: min(len(f)-1, statCPUColumns)}
		dst := []*uint64{&c.User, &c.Nice, &c.System, &c.Idle, &c.IOWait, &c.IRQ, &c.SoftIRQ, &c.Steal, &c.Guest, &c.GuestNice}
		for i, v := range f[1 : 1+c.Columns] {
			if *dst[i], err = strconv.ParseUint(string(v), 10, 64); err != nil {
				return nil, &ParseError{name, n + 1, fmt.Sprintf("cpu%d column %d: %q is not a number", id, i+1, truncate(v))}
			}
		}
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CPU < out[j].CPU })
	return out, nil
}

// SoftnetStat is one row of /proc/net/softnet_stat (struct softnet_data
// counters, printed in hex). The kernel keeps them as 32-bit counters; they
// wrap.
type SoftnetStat struct {
	Processed    uint32 // column 1
	Dropped      uint32 // column 2
	TimeSqueeze  uint32 // column 3
	CPUCollision uint32 // column 9 (always 0 since 4.x)
	ReceivedRPS  uint32 // column 10 (since 2.6.39)
	FlowLimit    uint32 // column 11 (since 3.11)
	Backlog      uint32 // column 12 (since 5.10): a gauge, input_pkt_queue + process_queue
	// CPU is column 13 (since 5.10), the CPU the row belongs to; -1 when the
	// row has fewer columns. Older kernels print rows for online CPUs only,
	// in order, so row k is the k-th online CPU, not CPU k.
	CPU int
	// Columns is how many columns the kernel printed (9, 10, 11 or 13).
	Columns int
}

// softnetMinColumns is the width of the oldest layout (2.6.23).
const softnetMinColumns = 9

// Softnet reads /proc/net/softnet_stat (parseSoftnet).
func (f *FS) Softnet() ([]SoftnetStat, error) {
	return readParsed(f, "proc/net/softnet_stat", parseSoftnet)
}

// parseSoftnet parses /proc/net/softnet_stat, one SoftnetStat per row in
// file order. Blank lines are skipped. name is used in errors; bad input
// yields a *ParseError.
func parseSoftnet(name string, data []byte) ([]SoftnetStat, error) {
	var out []SoftnetStat
	for n, l := range bytes.Split(data, []byte("\n")) {
		f := bytes.Fields(l)
		if len(f) == 0 {
			continue
		}
		if len(f) < softnetMinColumns {
			return nil, &ParseError{name, n + 1, fmt.Sprintf("%d columns, want at least %d", len(f), softnetMinColumns)}
		}
		var v [13]uint32
		width := min(len(f), len(v))
		for i, s := range f[:width] {
			x, err := strconv.ParseUint(string(s), 16, 32)
			if err != nil {
				return nil, &ParseError{name, n + 1, fmt.Sprintf("column %d: %q is not a 32-bit hex number", i+1, truncate(s))}
			}
			v[i] = uint32(x)
		}
		r := SoftnetStat{
			Processed: v[0], Dropped: v[1], TimeSqueeze: v[2], CPUCollision: v[8],
			ReceivedRPS: v[9], FlowLimit: v[10], CPU: -1, Columns: len(f),
		}
		if len(f) >= 13 {
			r.Backlog, r.CPU = v[11], int(v[12])
		}
		out = append(out, r)
	}
	return out, nil
}
