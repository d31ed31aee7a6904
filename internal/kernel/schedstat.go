package kernel

import (
	"bytes"
	"fmt"
	"strconv"
)

// ProcRunNanos is the time every thread of process pid has spent on a CPU,
// in nanoseconds: the sum of the first field of each
// /proc/PID/task/TID/schedstat. Threads that end while being read are left
// out. Like every process read, nothing is recorded into a capture.
func (f *FS) ProcRunNanos(pid int) (uint64, error) {
	tids, err := f.Tasks(pid)
	if err != nil || len(tids) == 0 {
		return 0, fmt.Errorf("pid %d: no threads readable", pid)
	}
	var sum uint64
	for _, tid := range tids {
		p := fmt.Sprintf("proc/%d/task/%d/schedstat", pid, tid)
		b, err := f.readUnrecorded(p)
		if err != nil {
			continue // a thread that ended
		}
		v, ok, err := parseSchedstatRun(b)
		if err != nil {
			return 0, fmt.Errorf("/%s: %w", p, err)
		}
		if ok {
			sum += v
		}
	}
	return sum, nil
}

// parseSchedstatRun parses a schedstat line ("run_ns wait_ns timeslices"):
// the time on CPU in nanoseconds; ok is false for an empty line.
func parseSchedstatRun(b []byte) (ns uint64, ok bool, err error) {
	f := bytes.Fields(b)
	if len(f) == 0 {
		return 0, false, nil
	}
	v, err := strconv.ParseUint(string(f[0]), 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("%q is not a number of nanoseconds", truncate(f[0]))
	}
	return v, true, nil
}
