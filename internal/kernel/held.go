package kernel

import (
	"io/fs"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// DefaultMaxHeld bounds the files a held FS keeps open: far more than a
// plan's settings on a large host (4 NICs × 128 queues × 3 files), far below
// the open-file limit Go raises every process to.
const DefaultMaxHeld = 4096

// heldFiles keeps kernel files open between reads and re-reads each with
// pread(2) from offset 0: one or two system calls per read instead of
// open/fcntl/fstat/read/read/close and a path walk (which, for
// /sys/class/net/DEV, resolves a symlink into /sys/devices). procfs and
// sysfs files are seq_file-backed: a read at offset 0 runs the kernel's
// show function again, so each read is fresh.
//
// A held file whose object went away fails the read (sysfs: ENODEV once the
// device is removed, even if one with the same name came back; procfs: EIO
// once the IRQ's directory is removed): the file is then opened again by its
// path, once, so a re-created device or re-requested IRQ is read where it is
// now. A device renamed or moved to another network namespace is not
// removed: its held files keep reading the same device, now under another
// name, until Release (the agent releases on link events, and on every pass
// when it has none). Below a directory tree (a snapshot, a test tree) a file rewritten in
// place is read fresh, but one replaced by another file (rename) is read as
// it was until Release.
type heldFiles struct {
	mu  sync.Mutex
	max int
	fds map[string]int // path on disk → open fd
	buf []byte
}

// Held returns an FS on the same root whose ReadFile and readString keep
// each file they read open (up to max files; 0 means DefaultMaxHeld) and
// re-read it in place: the cheap path for re-reading the same settings
// over and over (the agent's enforcement pass). Everything else behaves as
// on f, except that it records reads only when recording is started on the
// returned FS itself. Call Release when done.
func (f *FS) Held(max int) *FS {
	if max <= 0 {
		max = DefaultMaxHeld
	}
	return &FS{root: f.root, replay: f.replay, held: &heldFiles{max: max, fds: map[string]int{}, buf: make([]byte, 4096)}}
}

// Release closes every file a held FS keeps open; the next read of each
// opens it again. A no-op on an FS that holds no files.
func (f *FS) Release() {
	h := f.held
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for p, fd := range h.fds {
		unix.Close(fd)
		delete(h.fds, p)
	}
}

// HeldFiles reports how many files a held FS keeps open.
func (f *FS) HeldFiles() int {
	if f.held == nil {
		return 0
	}
	f.held.mu.Lock()
	defer f.held.mu.Unlock()
	return len(f.held.fds)
}

// read reads the file at path (on disk) and passes its content to use,
// which must not keep the slice; whole: see oneValue.
func (h *heldFiles) read(path string, whole bool, use func([]byte)) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if fd, ok := h.fds[path]; ok {
		if b, err := h.pread(fd, whole); err == nil {
			use(b)
			return nil
		}
		// Gone (device removed, IRQ freed) or failing: open it afresh.
		unix.Close(fd)
		delete(h.fds, path)
	}
	var fd int
	var err error
	for {
		fd, err = unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return &fs.PathError{Op: "open", Path: path, Err: err}
	}
	b, err := h.pread(fd, whole)
	if err != nil {
		unix.Close(fd)
		return &fs.PathError{Op: "read", Path: path, Err: err}
	}
	use(b)
	if len(h.fds) < h.max {
		h.fds[path] = fd
	} else {
		unix.Close(fd)
	}
	return nil
}

// pread reads the whole file from offset 0 into h.buf. A file of one value
// (whole says so) is read in one call: a read shorter than the buffer is all
// of it. Any other file is read to the end (a read returning 0): a procfs
// seq_file of many records (/proc/interrupts) may return less than asked
// before its end.
func (h *heldFiles) pread(fd int, whole bool) ([]byte, error) {
	n := 0
	for {
		if n == len(h.buf) {
			h.buf = append(h.buf, make([]byte, len(h.buf))...)
		}
		m, err := unix.Pread(fd, h.buf[n:], int64(n))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		n += m
		if m == 0 || whole && n < len(h.buf) {
			return h.buf[:n], nil
		}
	}
}

// oneValue reports whether a kernel file (root-relative, no leading "/")
// returns its whole content on the first read when the buffer is large
// enough: a sysfs attribute (one show() into one page, sysfs.rst), an IRQ's
// /proc/irq/N files (single_open) and a sysctl (/proc/sys, formatted whole).
// A regular file below a directory tree does too (a short read of a regular
// file is its end).
func oneValue(rel string) bool {
	return strings.HasPrefix(rel, "sys/") || strings.HasPrefix(rel, "proc/irq/") || strings.HasPrefix(rel, "proc/sys/")
}
