package kernel

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// TaskStat is what irqpilot reads of a /proc/PID/task/TID/stat line (the
// format of /proc/PID/stat, proc(5)).
type TaskStat struct {
	TID  int
	Comm string
	// State is field 3 ("R", "S", "Z"…), PPID field 4.
	State string
	PPID  int
	// Flags is field 9 (the kernel's PF_* bits).
	Flags uint64
	// UTime and STime are fields 14 and 15 (the kernel prints USER_HZ
	// clock ticks): exact, so that a thread's time over an interval is a
	// whole number of ticks.
	UTime, STime time.Duration
	// CPU is field 39 ("processor"): the CPU the task last ran on.
	CPU int
}

// pfKthread is PF_KTHREAD (include/linux/sched.h).
const pfKthread = 0x00200000

// KernelThread reports whether the task is a kernel thread (PF_KTHREAD).
func (t *TaskStat) KernelThread() bool { return t.Flags&pfKthread != 0 }

// TaskStat reads /proc/PID/task/TID/stat. Unlike the process scans of
// process.go, the read is recorded: the load sampler's per-thread times
// are kept in a capture.
func (f *FS) TaskStat(pid, tid int) (TaskStat, error) {
	p := fmt.Sprintf("proc/%d/task/%d/stat", pid, tid)
	data, err := f.ReadFile(p)
	if err != nil {
		return TaskStat{}, err
	}
	t, err := parseTaskStat(data)
	if err != nil {
		return TaskStat{}, fmt.Errorf("/%s: %w", p, err)
	}
	return t, nil
}

// splitStat splits a /proc/PID/stat line: the id before the command name,
// the command name (field 2, in parentheses, which may hold spaces and
// parentheses itself, so it ends at the last ')') and the fields after it,
// field n (3 and on) at rest[n-3].
func splitStat(data []byte) (id, comm string, rest []string, err error) {
	open := bytes.IndexByte(data, '(')
	closing := bytes.LastIndexByte(data, ')')
	if open < 0 || closing < open {
		return "", "", nil, fmt.Errorf("no (comm) in %q", truncate(data))
	}
	return strings.TrimSpace(string(data[:open])), string(data[open+1 : closing]), strings.Fields(string(data[closing+1:])), nil
}

// statField is field n (n ≥ 3) of a split stat line as a number; want says
// how many fields the caller needs, for the error.
func statField(rest []string, n, want int, name string) (uint64, error) {
	if len(rest) < want-2 {
		return 0, fmt.Errorf("%d fields after comm, want at least %d", len(rest), want-2)
	}
	v, err := strconv.ParseUint(rest[n-3], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("field %d%s %q is not a number", n, name, truncate([]byte(rest[n-3])))
	}
	return v, nil
}

// parseTaskStat parses a /proc/PID/task/TID/stat line.
func parseTaskStat(data []byte) (TaskStat, error) {
	var t TaskStat
	id, comm, rest, err := splitStat(data)
	if err != nil {
		return t, err
	}
	if t.TID, err = strconv.Atoi(id); err != nil {
		return t, fmt.Errorf("pid %q is not a number", id)
	}
	t.Comm = comm
	var cpu, ppid, utime, stime uint64
	for _, fl := range []struct {
		n   int
		dst *uint64
	}{{4, &ppid}, {9, &t.Flags}, {14, &utime}, {15, &stime}, {39, &cpu}} {
		if *fl.dst, err = statField(rest, fl.n, 39, ""); err != nil {
			return t, err
		}
	}
	t.State, t.PPID, t.CPU = rest[0], int(ppid), int(cpu)
	t.UTime, t.STime = tickDuration(utime), tickDuration(stime)
	return t, nil
}

// parseStatStartTime returns field 22 (starttime) of a /proc/PID/stat or
// /proc/PID/task/TID/stat line.
func parseStatStartTime(data []byte) (uint64, error) {
	_, _, rest, err := splitStat(data)
	if err != nil {
		return 0, err
	}
	return statField(rest, 22, 22, " (starttime)")
}
