package kernel

import (
	"bytes"
	"fmt"
	"strconv"
)

// NetDevRx reads /proc/net/dev (parseNetDev): each network device of the
// calling process's network namespace with the packets it has received.
//
// prometheus/procfs parses this file too, but only by path below a root of
// its own; read through this FS, the file is recorded for capture and read
// from snapshots like every other kernel file.
func (f *FS) NetDevRx() (map[string]uint64, error) {
	return readParsed(f, "proc/net/dev", parseNetDev)
}

// NetDevRxOf is NetDevRx as process pid sees it (/proc/PID/net/dev): the
// devices of its network namespace, which may not be this process's.
func (f *FS) NetDevRxOf(pid int) (map[string]uint64, error) {
	return readParsed(f, fmt.Sprintf("proc/%d/net/dev", pid), parseNetDev)
}

// parseNetDev parses /proc/net/dev: two header lines, then one line per
// device, "NAME: rx_bytes rx_packets …" (16 counters; the name may touch
// the colon's other side). Only the received packets are kept. name is
// used in errors; bad input yields a *ParseError.
func parseNetDev(name string, data []byte) (map[string]uint64, error) {
	out := map[string]uint64{}
	for n, l := range bytes.Split(data, []byte("\n")) {
		if n < 2 || len(bytes.TrimSpace(l)) == 0 {
			continue
		}
		i := bytes.LastIndexByte(l, ':')
		if i < 0 {
			return nil, &ParseError{name, n + 1, fmt.Sprintf("%q has no \"name:\"", truncate(l))}
		}
		dev := string(bytes.TrimSpace(l[:i]))
		f := bytes.Fields(l[i+1:])
		if dev == "" || len(f) < 2 {
			return nil, &ParseError{name, n + 1, fmt.Sprintf("%q: want a device name and at least two counters", truncate(l))}
		}
		v, err := strconv.ParseUint(string(f[1]), 10, 64)
		if err != nil {
			return nil, &ParseError{name, n + 1, fmt.Sprintf("%s: received packets %q is not a number", dev, truncate(f[1]))}
		}
		out[dev] = v
	}
	return out, nil
}
