package kernel

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// WriteLockPath is the machine-wide lock every irqpilot process holds while
// it writes kernel settings on the live machine: an apply, a revert, and the
// managed-IRQ probe (which writes each IRQ's own affinity back). It keeps a
// probe from writing an old value back over one an apply has just written,
// whatever state directory each uses.
var WriteLockPath = "/run/irqpilot.lock"

// LockWrites takes the write lock for the live machine, waiting up to
// timeout for another irqpilot to finish. For any other root it takes no
// lock (a snapshot or test tree is not shared with other processes).
func (f *FS) LockWrites(timeout time.Duration) (release func(), err error) {
	if !f.IsLive() {
		return func() {}, nil
	}
	p := WriteLockPath
	if _, err := os.Stat(filepath.Dir(p)); err != nil {
		p = filepath.Join(os.TempDir(), filepath.Base(p))
	}
	fh, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("write lock %s: %w", p, err)
	}
	deadline := time.Now().Add(timeout)
	for {
		err := unix.Flock(int(fh.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EWOULDBLOCK) || time.Now().After(deadline) {
			holder := LockHolder(fh)
			fh.Close()
			if errors.Is(err, unix.EWOULDBLOCK) {
				return nil, fmt.Errorf("another process (%s) is writing kernel settings (lock %s); waited %s", holder, p, timeout)
			}
			return nil, fmt.Errorf("write lock %s: %w", p, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	fh.Truncate(0)
	fmt.Fprintf(fh, "%d\n", os.Getpid())
	return func() {
		// The pid names the holder only while it holds the lock.
		fh.Truncate(0)
		unix.Flock(int(fh.Fd()), unix.LOCK_UN)
		fh.Close()
	}, nil
}

// LockHolder names the process holding a flock(2) lock on the open file fh,
// "pid N (comm)", from the kernel's own list of locks (/proc/locks, matched
// by device and inode). The pid a lock file holds is only a hint: a holder
// that is not irqpilot (flock(1), an operator's script) writes none, and one
// that died or released it may have left its own; so the file's content is
// used only when /proc/locks does not name a holder, and never when it is
// this process's pid (a leftover of an earlier hold of ours). procfs has no
// reader for /proc/locks, hence the few lines here.
func LockHolder(fh *os.File) string {
	var st syscall.Stat_t
	if err := syscall.Fstat(int(fh.Fd()), &st); err == nil {
		if data, err := os.ReadFile("/proc/locks"); err == nil {
			if pids := flockHolders(string(data), uint64(st.Dev), st.Ino); len(pids) > 0 {
				return describePID(pids[0])
			}
		}
	}
	buf := make([]byte, 32)
	n, _ := fh.ReadAt(buf, 0)
	if pid, err := strconv.Atoi(strings.TrimSpace(string(buf[:n]))); err == nil && pid > 0 && pid != os.Getpid() {
		return describePID(pid)
	}
	return "holder unknown"
}

func describePID(pid int) string {
	if c, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm"); err == nil {
		return fmt.Sprintf("pid %d, %s", pid, strings.TrimSpace(string(c)))
	}
	return fmt.Sprintf("pid %d", pid)
}

// flockHolders parses /proc/locks ("1: FLOCK  ADVISORY  WRITE 25493
// fe:00:10124402 0 EOF"; device major and minor in hex) and returns the pids
// holding a FLOCK on the file dev/ino; waiters ("1: -> FLOCK …") are not
// holders.
func flockHolders(text string, dev, ino uint64) []int {
	want := fmt.Sprintf("%02x:%02x:%d", unix.Major(dev), unix.Minor(dev), ino)
	var pids []int
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || f[1] != "FLOCK" || f[5] != want {
			continue
		}
		if pid, err := strconv.Atoi(f[4]); err == nil && pid > 0 {
			pids = append(pids, pid)
		}
	}
	return pids
}
