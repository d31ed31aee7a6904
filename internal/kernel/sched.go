package kernel

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/irqpilot/irqpilot/internal/cpuset"
)

// ErrNoSuchTask: the process or thread exited.
var ErrNoSuchTask = errors.New("no such process or thread")

// Tasks lists the thread ids of process pid from /proc/PID/task, ascending.
func (f *FS) Tasks(pid int) ([]int, error) {
	names, err := f.readDir(fmt.Sprintf("proc/%d/task", pid))
	if err != nil {
		if errors.Is(err, syscall.ENOENT) {
			return nil, fmt.Errorf("pid %d: %w", pid, ErrNoSuchTask)
		}
		return nil, err
	}
	tids := make([]int, 0, len(names))
	for _, n := range names {
		if t, err := strconv.Atoi(n); err == nil {
			tids = append(tids, t)
		}
	}
	sort.Ints(tids)
	return tids, nil
}

// Comm is the command name of a process (/proc/PID/comm).
func (f *FS) Comm(pid int) (string, error) {
	return f.readString(fmt.Sprintf("proc/%d/comm", pid))
}

// PIDs lists the process ids in /proc.
func (f *FS) PIDs() ([]int, error) {
	names, err := f.readDir("proc")
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, n := range names {
		if p, err := strconv.Atoi(n); err == nil {
			pids = append(pids, p)
		}
	}
	sort.Ints(pids)
	return pids, nil
}

// CgroupProcs lists the PIDs in a cgroup v2 directory (cgroup.procs), given
// relative to /sys/fs/cgroup, e.g. "system.slice/memcached.service".
func (f *FS) CgroupProcs(cgroup string) ([]int, error) {
	p := "sys/fs/cgroup/" + strings.Trim(cgroup, "/") + "/cgroup.procs"
	s, err := f.readString(p)
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, l := range strings.Fields(s) {
		if n, err := strconv.Atoi(l); err == nil {
			pids = append(pids, n)
		}
	}
	return pids, nil
}

// ThreadAffinity reads a thread's allowed CPUs with sched_getaffinity(2).
// Only meaningful on the live machine.
func (f *FS) ThreadAffinity(tid int) (cpuset.Set, error) {
	if !f.IsLive() {
		return cpuset.Set{}, fmt.Errorf("thread %d affinity: %w on a snapshot", tid, ErrUnsupported)
	}
	var m unix.CPUSet
	if err := unix.SchedGetaffinity(tid, &m); err != nil {
		return cpuset.Set{}, taskErr(tid, err)
	}
	var cpus []int
	for c := 0; c < len(m)*64; c++ {
		if m.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpuset.Of(cpus...), nil
}

// SetThreadAffinity sets a thread's allowed CPUs with sched_setaffinity(2).
// unix.CPUSet holds 1024 CPUs, the glibc default; larger ids are refused.
func (f *FS) SetThreadAffinity(tid int, s cpuset.Set) error {
	if !f.IsLive() {
		return fmt.Errorf("thread %d affinity: %w on a snapshot", tid, ErrUnsupported)
	}
	var m unix.CPUSet
	if s.Max() >= len(m)*64 {
		return fmt.Errorf("thread %d: cpu %d beyond the %d CPUs sched_setaffinity supports here", tid, s.Max(), len(m)*64)
	}
	for _, c := range s.CPUs() {
		m.Set(c)
	}
	if err := unix.SchedSetaffinity(tid, &m); err != nil {
		return taskErr(tid, err)
	}
	return nil
}

func taskErr(tid int, err error) error {
	switch {
	case errors.Is(err, unix.ESRCH):
		return fmt.Errorf("thread %d: %w", tid, ErrNoSuchTask)
	case errors.Is(err, unix.EPERM):
		return fmt.Errorf("thread %d: %w (%v)", tid, ErrNotPermitted, err)
	case errors.Is(err, unix.EINVAL):
		return fmt.Errorf("thread %d: no allowed CPU is online or permitted by its cpuset (%v)", tid, err)
	}
	return fmt.Errorf("thread %d: %w", tid, err)
}

// TaskStart is when thread tid started, in clock ticks after boot
// (/proc/TID/stat field 22). With the id it identifies a thread across time:
// a thread id reused by a new thread has another start time. Like every
// process read, it is never recorded into a capture.
func (f *FS) TaskStart(tid int) (uint64, error) {
	start, err := f.ProcStart(tid)
	if errors.Is(err, syscall.ENOENT) || errors.Is(err, os.ErrNotExist) {
		return 0, fmt.Errorf("thread %d: %w", tid, ErrNoSuchTask)
	}
	return start, err
}
