package kernel

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Process scans. A capture must not archive the machine's process list or a
// daemon's environment, so everything in this file reads through
// readUnrecorded: never recorded, whatever StartRecording says. What a
// caller learns from a scan and needs in a snapshot it saves itself, reduced
// to what it needs, with SaveSynthetic.

// readUnrecorded reads a file below the root without recording it. Errors
// name the kernel path, as ReadFile's do.
func (f *FS) readUnrecorded(rel string) ([]byte, error) {
	b, err := f.readOnDisk(f.Path(rel))
	return b, f.kernelErr(err)
}

// Process is one process of a /proc scan.
type Process struct {
	PID  int
	Comm string // /proc/PID/comm, trimmed
	// StartTime is field 22 of /proc/PID/stat: when the process started, in
	// clock ticks after boot. With the PID it names one process for good
	// (a PID is reused, the pair is not). 0 when stat could not be read.
	StartTime uint64
}

// Processes lists the processes in /proc (not threads), by ascending PID,
// with their command name and start time. Processes that exit during the
// scan are left out. Nothing it reads is recorded for a capture.
func (f *FS) Processes() ([]Process, error) {
	ents, err := os.ReadDir(f.Path("proc"))
	if err != nil {
		return nil, f.kernelErr(err)
	}
	var out []Process
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 {
			continue
		}
		comm, err := f.readUnrecorded("proc/" + e.Name() + "/comm")
		if err != nil {
			continue // exited, or not a process directory
		}
		p := Process{PID: pid, Comm: strings.TrimSpace(string(comm))}
		// Unreadable (exited): StartTime 0. Unparsable: an error.
		if p.StartTime, err = f.ProcStart(pid); err != nil && !errors.As(err, new(*fs.PathError)) {
			return nil, err
		}
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PID < out[j].PID })
	return out, nil
}

// Daemon is the lowest-PID process named name that is the system's
// daemon, not a look-alike: on the live machine its real and effective
// user are root (the Uid: line of /proc/PID/status — the owner of
// /proc/PID is root for any process that made itself non-dumpable) and
// its executable is a file called name that root owns and no one else may
// write (comm is whatever a process sets with prctl, any user can run a
// program called "irqbalance", and irqpilot stops and signals what this
// returns). Every process with that comm is checked, so a look-alike with
// a lower PID hides nothing. Below another root (a snapshot) the comm
// alone decides. false when none runs.
func (f *FS) Daemon(name string) (Process, bool) {
	procs, err := f.Processes()
	if err != nil {
		return Process{}, false
	}
	for _, p := range procs { // ascending PID
		if p.Comm != name {
			continue
		}
		if f.IsLive() && !f.isRootDaemon(p.PID, name) {
			continue
		}
		return p, true
	}
	return Process{}, false
}

// isRootDaemon: /proc/PID/status says uid 0 (real and effective) and
// /proc/PID/exe is a root-owned file called name, not writable by group
// or others (" (deleted)" allowed: the package was upgraded under it).
func (f *FS) isRootDaemon(pid int, name string) bool {
	dir := f.Path("proc/" + strconv.Itoa(pid))
	status, err := f.readOnDisk(dir + "/status")
	if err != nil {
		return false
	}
	root := false
	for _, l := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(l, "Uid:"); ok {
			ids := strings.Fields(v) // real, effective, saved, filesystem
			root = len(ids) >= 2 && ids[0] == "0" && ids[1] == "0"
			break
		}
	}
	if !root {
		return false
	}
	exe, err := os.Readlink(dir + "/exe")
	if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) {
		// /proc/PID/exe needs ptrace read access, which a caller with
		// fewer capabilities than the daemon lacks (the agent's unit
		// bounds its capabilities; irqbalance runs with all of them).
		// The process is root's (above): its command line's program,
		// readable by anyone, stands in for the link.
		return f.rootProgram(dir, name)
	}
	if err != nil {
		return false
	}
	exe = strings.TrimSuffix(exe, " (deleted)")
	if exe[strings.LastIndexByte(exe, '/')+1:] != name {
		return false
	}
	// The file itself, through the process (it may have been replaced on
	// disk since): stat follows the magic link to the executable mapped.
	var st unix.Stat_t
	if err := unix.Stat(dir+"/exe", &st); err != nil {
		return false
	}
	return st.Uid == 0 && st.Mode&0o022 == 0
}

// rootProgram: the absolute program path in /proc/PID/cmdline (dir) is a
// root-owned file called name, not writable by group or others.
func (f *FS) rootProgram(dir, name string) bool {
	b, err := f.readOnDisk(dir + "/cmdline")
	if err != nil {
		return false
	}
	argv0, _, _ := bytes.Cut(b, []byte{0})
	prog := string(argv0)
	if !strings.HasPrefix(prog, "/") || prog[strings.LastIndexByte(prog, '/')+1:] != name {
		return false
	}
	var st unix.Stat_t
	if err := unix.Stat(prog, &st); err != nil {
		return false
	}
	return st.Uid == 0 && st.Mode&0o022 == 0
}

// ProcStart is when process (or thread) pid started, in clock ticks after
// boot: field 22 of /proc/PID/stat. With the id it names one process for
// good (an id is reused, the pair is not). Like every process read, it is
// never recorded into a capture. A missing process is the read's
// fs.ErrNotExist.
func (f *FS) ProcStart(pid int) (uint64, error) {
	b, err := f.readUnrecorded(fmt.Sprintf("proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	v, err := parseStatStartTime(b)
	if err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return v, nil
}

// ProcStat reads /proc/PID/stat: the process's state, parent, and times.
// Like every process read, it is never recorded into a capture. A missing
// process is the read's fs.ErrNotExist.
func (f *FS) ProcStat(pid int) (TaskStat, error) {
	b, err := f.readUnrecorded(fmt.Sprintf("proc/%d/stat", pid))
	if err != nil {
		return TaskStat{}, err
	}
	t, err := parseTaskStat(b)
	if err != nil {
		return TaskStat{}, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return t, nil
}

// Environ returns the environment of process pid (/proc/PID/environ) as
// "KEY=value" strings. The whole environment is a daemon's secret as much
// as its configuration: it is never recorded, and callers keep only the
// variables they need.
func (f *FS) Environ(pid int) ([]string, error) {
	b, err := f.readUnrecorded(fmt.Sprintf("proc/%d/environ", pid))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, kv := range bytes.Split(b, []byte{0}) {
		if len(kv) > 0 {
			out = append(out, string(kv))
		}
	}
	return out, nil
}

// Tgid returns the thread group (process) a thread belongs to, from the
// Tgid: line of /proc/TID/status. Not recorded.
func (f *FS) Tgid(tid int) (int, error) {
	b, err := f.readUnrecorded(fmt.Sprintf("proc/%d/status", tid))
	if err != nil {
		if errors.Is(err, syscall.ENOENT) {
			return 0, fmt.Errorf("thread %d: %w", tid, ErrNoSuchTask)
		}
		return 0, err
	}
	for l := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "Tgid:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil || n <= 0 {
				return 0, fmt.Errorf("/proc/%d/status: Tgid %q is not a process id", tid, strings.TrimSpace(v))
			}
			return n, nil
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no Tgid line", tid)
}

// Signal sends sig to process pid with kill(2). Only on the live machine;
// pid must be a single process (kill's 0 and negative ids, which reach
// process groups or everything, are refused). A process that is gone is
// ErrNoSuchTask; lacking the privilege is ErrNotPermitted.
func (f *FS) Signal(pid int, sig syscall.Signal) error {
	if !f.IsLive() {
		return fmt.Errorf("signal %v to pid %d: %w on a snapshot", sig, pid, ErrUnsupported)
	}
	if pid <= 0 {
		return fmt.Errorf("signal %v: pid %d is not a single process", sig, pid)
	}
	err := unix.Kill(pid, sig)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.ESRCH):
		return fmt.Errorf("pid %d: %w", pid, ErrNoSuchTask)
	case errors.Is(err, unix.EPERM):
		return fmt.Errorf("signal %v to pid %d: %w (%v)", sig, pid, ErrNotPermitted, err)
	}
	return fmt.Errorf("signal %v to pid %d: %w", sig, pid, err)
}
