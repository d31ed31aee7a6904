package kernel

import (
	"errors"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// snapshotTempDir is where snapshots are unpacked: $TMPDIR when set, else
// /dev/shm when it is a writable directory, else the system's temporary
// directory ("" means os.TempDir()). A snapshot is thousands of small files
// (19 000 for a 112-CPU host); in memory they unpack in under a second, on a
// busy disk it can take half a minute. Snapshots are bounded by
// maxSnapshotBytes.
func snapshotTempDir() string {
	if os.Getenv("TMPDIR") != "" {
		return ""
	}
	const shm = "/dev/shm"
	if fi, err := os.Stat(shm); err == nil && fi.IsDir() && unix.Access(shm, unix.W_OK) == nil {
		return shm
	}
	return ""
}

// snapshotDir is one unpacked snapshot directory of this process.
type snapshotDir struct {
	path string
	// abort asks the unpack to stop at once (checked per entry and per
	// read of file data), so that remove does not wait for a large file.
	abort atomic.Bool
	// mu is held while an entry is written and while the directory is
	// removed: nothing is written into it after its removal.
	mu      sync.Mutex
	removed bool
	// signalled is closed when a signal removed the directory and the
	// process survived the signal (a handler of the program's took it).
	signalled chan struct{}
}

func (d *snapshotDir) remove() {
	d.abort.Store(true)
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.removed && d.path != "" {
		os.RemoveAll(d.path)
	}
	d.removed = true
}

// liveSnapshots are this process's snapshot directories, removed when a
// SIGINT, SIGTERM or SIGHUP (the terminal closed) arrives. The signals are watched only while there is at
// least one, and never when the process ignores them (nohup): Notify would
// un-ignore them.
var liveSnapshots struct {
	sync.Mutex
	dirs map[*snapshotDir]bool
	ch   chan os.Signal
}

func registerSnapshot(d *snapshotDir) {
	ls := &liveSnapshots
	ls.Lock()
	defer ls.Unlock()
	if ls.dirs == nil {
		ls.dirs = map[*snapshotDir]bool{}
		ls.ch = make(chan os.Signal, 1)
		go watchSnapshotSignals(ls.ch)
	}
	ls.dirs[d] = true
	if len(ls.dirs) == 1 {
		for _, sig := range []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
			if !signal.Ignored(sig) {
				signal.Notify(ls.ch, sig)
			}
		}
	}
}

func unregisterSnapshot(d *snapshotDir) {
	ls := &liveSnapshots
	ls.Lock()
	defer ls.Unlock()
	if ls.dirs[d] {
		delete(ls.dirs, d)
		if len(ls.dirs) == 0 {
			signal.Stop(ls.ch)
		}
	}
}

// watchSnapshotSignals removes every live snapshot directory on a signal,
// stops watching, and sends the signal again to its own thread: with no
// other handler the process dies of it before tgkill returns (status 130 for
// SIGINT, 143 for SIGTERM in a shell), as it would have without snapshots.
func watchSnapshotSignals(ch chan os.Signal) {
	runtime.LockOSThread() // tgkill below targets this thread
	for sig := range ch {
		ls := &liveSnapshots
		ls.Lock()
		dirs := make([]*snapshotDir, 0, len(ls.dirs))
		for d := range ls.dirs {
			dirs = append(dirs, d)
		}
		ls.Unlock()
		for _, d := range dirs {
			d.remove()
		}
		ls.Lock()
		for _, d := range dirs {
			delete(ls.dirs, d)
		}
		if len(ls.dirs) == 0 {
			signal.Stop(ch)
		}
		ls.Unlock()
		if s, ok := sig.(syscall.Signal); ok {
			unix.Tgkill(os.Getpid(), unix.Gettid(), s)
		}
		// Still alive: the program handles the signal itself.
		for _, d := range dirs {
			close(d.signalled)
		}
	}
}

// removeStaleSnapshots removes the snapshot directories in parent that this
// user's processes left when they died without cleaning up. A directory is
// stale when its name says which process made it (pid and that process's
// start time, so a reused pid is told apart) and that process is gone. Kept:
// directories of live processes, of other users, and of older versions
// (whose names do not say). Best effort: errors are ignored.
func removeStaleSnapshots(parent string) {
	ents, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	uid := uint32(os.Geteuid())
	for _, e := range ents {
		pid, start, ok := snapshotOwner(e.Name())
		if !ok || !e.IsDir() {
			continue
		}
		p := filepath.Join(parent, e.Name())
		fi, err := os.Lstat(p)
		if err != nil || !fi.IsDir() {
			continue
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); !ok || st.Uid != uid {
			continue
		}
		if processGone(pid, start) {
			os.RemoveAll(p)
		}
	}
}

// snapshotOwner parses irqpilot-snapshot-<pid>-<start>-<random>.
func snapshotOwner(name string) (pid int, start uint64, ok bool) {
	rest, found := strings.CutPrefix(name, snapshotPrefix)
	if !found {
		return 0, 0, false
	}
	f := strings.Split(rest, "-")
	if len(f) != 3 || !isDecimal(f[2]) {
		return 0, 0, false
	}
	p, err1 := strconv.Atoi(f[0])
	s, err2 := strconv.ParseUint(f[1], 10, 64)
	if err1 != nil || err2 != nil || p <= 0 {
		return 0, 0, false
	}
	return p, s, true
}

// processGone reports whether the process pid that started at start (clock
// ticks after boot; 0 = unknown) has ended. In doubt it says no.
func processGone(pid int, start uint64) bool {
	st, err := New("/").ProcStart(pid)
	switch {
	case err == nil:
		return start != 0 && st != start // the pid was reused
	case errors.Is(err, fs.ErrNotExist):
		// No such process, if /proc is there to say so.
		_, serr := os.Stat("/proc/self/stat")
		return serr == nil
	}
	return false
}
