package kernel

import (
	"bytes"
	"fmt"
	"math"
	"sort"
	"strconv"
	"time"
)

// userHZ is USER_HZ, the unit of the clock ticks /proc/stat and
// /proc/PID/stat count in: 100 on every Linux architecture's user ABI
// (procfs assumes the same). The readers here convert ticks to seconds
// (CPUStat) or a time.Duration (TaskStat); no other package sees a tick.
const userHZ = 100

// tickSeconds is a clock-tick count in seconds. Division keeps the result
// the nearest float64 to the decimal the count stands for (1234 ticks read
// as exactly 12.34), as prometheus/procfs reports it.
func tickSeconds(n uint64) float64 { return float64(n) / userHZ }

// tickDuration is a clock-tick count as a duration (exact: a tick is 10 ms).
func tickDuration(n uint64) time.Duration { return time.Duration(n) * (time.Second / userHZ) }

// Ticks is the clock-tick count /proc/stat printed for a CPUStat time (in
// seconds): to compare two such times without float noise, or to quote
// the counter itself.
func Ticks(seconds float64) uint64 { return uint64(math.Round(seconds * userHZ)) }

// CPUStat is one "cpuN" line of /proc/stat, in seconds (the kernel counts
// USER_HZ clock ticks, a hundredth of a second). As in the kernel, User
// includes Guest and Nice includes GuestNice.
type CPUStat struct {
	CPU       int
	User      float64
	Nice      float64
	System    float64
	Idle      float64
	IOWait    float64
	IRQ       float64
	SoftIRQ   float64
	Steal     float64
	Guest     float64
	GuestNice float64
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
		dst := []*float64{&c.User, &c.Nice, &c.System, &c.Idle, &c.IOWait, &c.IRQ, &c.SoftIRQ, &c.Steal, &c.Guest, &c.GuestNice}
		for i, v := range f[1 : 1+c.Columns] {
			ticks, err := strconv.ParseUint(string(v), 10, 64)
			if err != nil {
				return nil, &ParseError{name, n + 1, fmt.Sprintf("cpu%d column %d: %q is not a number", id, i+1, truncate(v))}
			}
			*dst[i] = tickSeconds(ticks)
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
