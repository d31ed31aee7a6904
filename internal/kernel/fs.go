// Package kernel is the only package that touches the machine: it reads and
// writes /proc and /sys, issues ioctls (ethtool.go, nvme.go), scans and
// signals processes (process.go) and asks the service manager to start and
// stop units (service.go). Every path is relative to a root directory: "/"
// for the live machine, an unpacked snapshot, or a test tree. Parsers for the kernel's text formats
// live here too, as pure functions over bytes, so that they can be fuzzed and
// benchmarked without a file system.
package kernel

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/irqpilot/irqpilot/internal/program"

	"golang.org/x/sys/unix"
)

// FS reads and writes kernel files below a root directory.
//
// An FS can record every path it reads (StartRecording), which is how
// `irqpilot capture` archives exactly the files the tool reads: the bytes of
// every file read are kept as they were read, so a snapshot reproduces what
// the tool saw, and reads the kernel refused with an error other than
// "no such file" (EIO, EINVAL, EOPNOTSUPP from sysfs attributes) are kept too
// (RecordedErrors) and replayed by an FS opened on the snapshot. Facts that
// come from somewhere other than a file (ethtool ioctls, write probes for
// kernel-managed IRQs) are saved as synthetic files under "irqpilot/" with
// SaveSynthetic on the live machine and read back with ReadSynthetic from a
// snapshot.
//
// Errors from reads name the kernel path ("/sys/class/net/eth0/speed"), not
// the path on disk, so that the same failure reads the same live, below
// --root, and from a snapshot.
type FS struct {
	root string

	mu        sync.Mutex
	recording bool
	reads     map[string]Access
	content   map[string][]byte
	errs      map[string]ReadError
	synthetic map[string][]byte

	// replay holds the read errors recorded in a snapshot (read-errors.json).
	replay map[string]ReadError

	// held, when set, keeps files open between reads (Held).
	held *heldFiles

	// snapWarnings: what unpacking the snapshot left out or changed
	// (SnapshotWarnings).
	snapWarnings []string

	// programs starts the machine's programs (Programs); nil is
	// program.Exec.
	programs program.Runner
}

// Programs is how programs are started on the machine the FS is: this
// machine's (program.Exec) unless the caller gave another with
// SetPrograms. Library code starts processes only through it, as it reads
// files only through the FS.
func (f *FS) Programs() program.Runner {
	if f.programs == nil {
		return program.Exec{}
	}
	return f.programs
}

// SetPrograms makes r start the FS's programs (a program.Recorder in a
// test). It returns f.
func (f *FS) SetPrograms(r program.Runner) *FS {
	f.programs = r
	return f
}

// clean turns "proc/x", "/proc/x/" or "proc//x" into "/proc/x".
func clean(rel string) string { return filepath.Clean("/" + rel) }

// New returns an FS rooted at root ("/" for the live machine). Below any
// other root, the read errors recorded by a capture (irqpilot/read-errors.json)
// are replayed.
func New(root string) *FS {
	if root == "" {
		root = "/"
	}
	f := &FS{root: filepath.Clean(root)}
	if f.root != "/" {
		if b, err := readCapped(filepath.Join(f.root, SyntheticDir, ReadErrorsFile), maxSnapshotFileBytes); err == nil {
			var m map[string]ReadError
			if json.Unmarshal(b, &m) == nil {
				f.replay = m
			}
		}
	}
	return f
}

// Sub returns an FS rooted at dir, a directory of the machine behind f: on
// the live machine, /proc/PID/root is what a process in another mount
// namespace sees (its /sys shows its network namespace's devices). The new
// FS is as New makes it for that root: it records nothing, holds no files,
// and replays the read errors recorded there, if any.
func (f *FS) Sub(dir string) *FS { return New(f.Path(dir)) }

// Root is the directory this FS reads from.
func (f *FS) Root() string { return f.root }

// IsLive reports whether the FS reads the running kernel.
func (f *FS) IsLive() bool { return f.root == "/" }

// Path turns a kernel path such as "proc/interrupts" or "/proc/interrupts"
// into a path on disk.
func (f *FS) Path(rel string) string {
	return filepath.Join(f.root, strings.TrimPrefix(rel, "/"))
}

// kernelErr rewrites a *fs.PathError on a path below the root so that it names
// the kernel path ("/proc/irq/36/node") instead of the path on disk.
func (f *FS) kernelErr(err error) error {
	var pe *fs.PathError
	if err == nil || f.root == "/" || !errors.As(err, &pe) {
		return err
	}
	r, rerr := filepath.Rel(f.root, pe.Path)
	if rerr != nil || r == ".." || strings.HasPrefix(r, "../") {
		return err
	}
	return &fs.PathError{Op: pe.Op, Path: clean(r), Err: pe.Err}
}

// replayed returns the recorded error for a path of a snapshot, if any.
func (f *FS) replayed(rel string) error {
	if f.replay == nil {
		return nil
	}
	p := clean(rel)
	re, ok := f.replay[p]
	if !ok {
		return nil
	}
	errno := errnoByName(re.Errno)
	if errno == 0 {
		errno = syscall.EIO
	}
	return &fs.PathError{Op: re.Op, Path: p, Err: errno}
}

// errnoByName is the inverse of unix.ErrnoName (x/sys has no such lookup);
// 0 when the name is unknown.
func errnoByName(name string) syscall.Errno {
	for e := syscall.Errno(1); e < 256; e++ {
		if unix.ErrnoName(e) == name {
			return e
		}
	}
	return 0
}

// ReadFile reads a whole file. Files in /proc and /sys report size 0, so
// the content is read to the end, never sized by stat.
func (f *FS) ReadFile(rel string) ([]byte, error) {
	f.note(rel, AccessFile)
	if err := f.replayed(rel); err != nil {
		f.noteResult(rel, nil, err)
		return nil, err
	}
	var b []byte
	var err error
	if f.held != nil {
		err = f.held.read(f.Path(rel), oneValue(strings.TrimPrefix(rel, "/")), func(c []byte) { b = append([]byte{}, c...) })
	} else {
		b, err = f.readOnDisk(f.Path(rel))
	}
	err = f.kernelErr(err)
	if b == nil && err == nil {
		b = []byte{}
	}
	f.noteResult(rel, b, err)
	return b, err
}

// readParsed reads a kernel file and parses it; parse names the file by
// its kernel path in its errors.
func readParsed[T any](f *FS, rel string, parse func(name string, data []byte) (T, error)) (T, error) {
	data, err := f.ReadFile(rel)
	if err != nil {
		var zero T
		return zero, err
	}
	return parse("/"+rel, data)
}

// readOnDisk reads a file below the root: live files whole, files of a
// snapshot or --root tree through readCapped (regular files, bounded).
func (f *FS) readOnDisk(p string) ([]byte, error) {
	if f.root == "/" {
		return os.ReadFile(p)
	}
	return readCapped(p, maxSnapshotFileBytes)
}

// readCapped reads a file of a snapshot or --root tree, refusing one larger
// than limit before reading it (its size is known there, unlike in /proc
// and /sys): an untrusted tree must not make a reader hold more.
//
// Only regular files are read: a FIFO or a device in a tree would block the
// reader (or feed it without end), so the file is opened without blocking
// and refused by name unless fstat says it is a regular file.
func readCapped(p string, limit int64) ([]byte, error) {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: p, Err: err}
	}
	fh := os.NewFile(uintptr(fd), p)
	defer fh.Close()
	fi, err := fh.Stat()
	if err != nil {
		return nil, err
	}
	if fi.IsDir() {
		return nil, &fs.PathError{Op: "read", Path: p, Err: syscall.EISDIR} // as a read of a live one
	}
	if !fi.Mode().IsRegular() {
		return nil, &fs.PathError{Op: "read", Path: p, Err: fmt.Errorf("not a regular file (%s): a tree holds copies of kernel files, and only regular files are read", FileKind(fi.Mode()))}
	}
	if fi.Size() > limit {
		return nil, &fs.PathError{Op: "read", Path: p, Err: overLimit("%d bytes, over the limit of %d per file (no kernel file is that large)", fi.Size(), limit)}
	}
	var buf bytes.Buffer
	buf.Grow(int(fi.Size()) + bytes.MinRead) // one allocation, as os.ReadFile
	if _, err := buf.ReadFrom(io.LimitReader(fh, limit+1)); err != nil {
		return nil, err // an *fs.PathError from the read, as os.ReadFile's
	}
	b := buf.Bytes()
	if int64(len(b)) > limit {
		return nil, &fs.PathError{Op: "read", Path: p, Err: overLimit("over the limit of %d bytes per file (no kernel file is that large)", limit)}
	}
	return b, nil
}

// FileKind names the type of a file that is not a regular one ("a FIFO"),
// for errors that refuse it.
func FileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	}
	return "type " + m.Type().String()
}

// readString reads a file and trims surrounding white space.
func (f *FS) readString(rel string) (string, error) {
	if f.held != nil {
		// The hot path of a held FS: one string, no intermediate copy.
		f.note(rel, AccessFile)
		if err := f.replayed(rel); err != nil {
			f.noteResult(rel, nil, err)
			return "", err
		}
		var s string
		err := f.kernelErr(f.held.read(f.Path(rel), oneValue(strings.TrimPrefix(rel, "/")), func(c []byte) {
			f.noteResult(rel, c, nil)
			s = string(bytes.TrimSpace(c))
		}))
		if err != nil {
			f.noteResult(rel, nil, err)
		}
		return s, err
	}
	b, err := f.ReadFile(rel)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// readInt reads a file holding one decimal integer.
func (f *FS) readInt(rel string) (int64, error) {
	s, err := f.readString(rel)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %q is not an integer", rel, s)
	}
	return n, nil
}

// Exists reports whether the path exists (following symlinks).
func (f *FS) Exists(rel string) bool {
	f.note(rel, AccessStat)
	_, err := os.Stat(f.Path(rel))
	return err == nil
}

// readDir lists the names in a directory, sorted by name.
func (f *FS) readDir(rel string) ([]string, error) {
	f.note(rel, AccessDir)
	if err := f.replayed(rel); err != nil {
		f.noteResult(rel, nil, err)
		return nil, err
	}
	ents, err := os.ReadDir(f.Path(rel))
	if err != nil {
		err = f.kernelErr(err)
		f.noteResult(rel, nil, err)
		return nil, err
	}
	names := make([]string, len(ents))
	for i, e := range ents {
		names[i] = e.Name()
	}
	return names, nil
}

// readlink returns the target of a symlink as stored.
func (f *FS) readlink(rel string) (string, error) {
	f.note(rel, AccessStat)
	if err := f.replayed(rel); err != nil {
		return "", err
	}
	t, err := os.Readlink(f.Path(rel))
	return t, f.kernelErr(err)
}

// glob matches a pattern relative to the root and returns root-relative
// paths (with a leading "/").
func (f *FS) glob(pattern string) ([]string, error) {
	m, err := filepath.Glob(f.Path(pattern))
	if err != nil {
		return nil, err
	}
	for i := range m {
		r, _ := filepath.Rel(f.root, m[i])
		m[i] = "/" + r
		f.note(m[i], AccessStat)
	}
	return m, nil
}

// resolve follows symlinks within the root and returns the root-relative
// real path (e.g. /sys/class/net/eth0 → /sys/devices/pci0000:00/…/net/eth0).
// Absolute link targets are interpreted inside the root, never on the host,
// so a snapshot cannot point the tool at the live machine.
func (f *FS) resolve(rel string) (string, error) {
	f.note(rel, AccessStat)
	real, _, err := f.ResolveLinks(rel)
	if err != nil {
		return "", err
	}
	return real, nil
}

// ResolveLinks resolves rel like resolve and also returns every symlink met
// on the way (root-relative, in the order followed). When resolution fails
// part way, real is the part that did resolve (an existing directory) and
// links the links followed so far. It does not record: capture uses it to
// archive what makes a recorded path resolve, or fail, the same way in the
// snapshot.
func (f *FS) ResolveLinks(rel string) (real string, links []string, err error) {
	parts := strings.Split(strings.Trim(clean(rel), "/"), "/")
	cur := "/"
	for hops := 0; len(parts) > 0; {
		p := parts[0]
		parts = parts[1:]
		if p == "" || p == "." {
			continue
		}
		if p == ".." {
			cur = filepath.Dir(cur)
			continue
		}
		next := filepath.Join(cur, p)
		fi, err := os.Lstat(f.Path(next))
		if err != nil {
			return cur, links, f.kernelErr(err)
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			cur = next
			continue
		}
		if hops++; hops > 40 {
			return cur, links, fmt.Errorf("%s: too many levels of symbolic links", clean(rel))
		}
		t, err := os.Readlink(f.Path(next))
		if err != nil {
			return cur, links, f.kernelErr(err)
		}
		links = append(links, next)
		if !filepath.IsAbs(t) {
			t = filepath.Join(cur, t)
		}
		parts = append(strings.Split(strings.Trim(filepath.Clean(t), "/"), "/"), parts...)
		cur = "/"
	}
	return cur, links, nil
}
