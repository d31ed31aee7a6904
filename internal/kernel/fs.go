// Package kernel is the only package that reads or writes /proc and /sys.
// Every path is relative to a root directory: "/" for the live machine, an
// unpacked snapshot, or a test tree. Parsers for the kernel's text formats
// live here too, as pure functions over bytes, so that they can be fuzzed and
// benchmarked without a file system.
package kernel

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Typed errors for writes the kernel refuses. Callers test with errors.Is.
var (
	// ErrManaged: the IRQ's affinity is managed by the kernel (MSI-X vectors
	// spread by the driver with pci_alloc_irq_vectors_affinity); writes to
	// smp_affinity fail with EIO on older kernels and EPERM on newer ones.
	ErrManaged = errors.New("kernel-managed affinity")
	// ErrNotPermitted: the caller lacks the privilege to write.
	ErrNotPermitted = errors.New("not permitted")
	// ErrUnsupported: the setting does not exist on this kernel or device.
	ErrUnsupported = errors.New("not supported")
)

// FS reads and writes kernel files below a root directory.
//
// An FS can record every path it reads (StartRecording), which is how
// `irqpilot capture` archives exactly the files the tool reads. Facts that
// come from somewhere other than a file (ethtool ioctls, write probes for
// kernel-managed IRQs) are saved as synthetic files under "irqpilot/" with
// SaveSynthetic on the live machine and read back with ReadSynthetic from a
// snapshot.
type FS struct {
	root string

	mu        sync.Mutex
	recording bool
	reads     map[string]Access
	synthetic map[string][]byte
}

// Access says how a recorded path was used.
type Access int

// Kinds of access, so that a capture stores a listed directory's entries
// and a read file's content.
const (
	AccessFile Access = 1 << iota // content read
	AccessDir                     // directory listed
	AccessStat                    // existence or link checked
)

// SyntheticDir is the directory, relative to a snapshot's root, that holds
// facts irqpilot learned without a file.
const SyntheticDir = "irqpilot"

// StartRecording makes the FS remember every path read from now on.
func (f *FS) StartRecording() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.recording = true
	f.reads = map[string]Access{}
	f.synthetic = map[string][]byte{}
}

// Recorded returns the root-relative paths (leading "/") read since
// StartRecording, with how each was used.
func (f *FS) Recorded() map[string]Access {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]Access, len(f.reads))
	for k, v := range f.reads {
		out[k] = v
	}
	return out
}

// Synthetics returns the synthetic files saved since StartRecording.
func (f *FS) Synthetics() map[string][]byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string][]byte, len(f.synthetic))
	for k, v := range f.synthetic {
		out[k] = v
	}
	return out
}

func (f *FS) note(rel string, a Access) {
	f.mu.Lock()
	if f.recording {
		f.reads["/"+strings.TrimPrefix(filepath.Clean("/"+rel), "/")] |= a
	}
	f.mu.Unlock()
}

// SaveSynthetic keeps data under name for a capture (only while recording).
func (f *FS) SaveSynthetic(name string, data []byte) {
	f.mu.Lock()
	if f.recording {
		f.synthetic[name] = append([]byte(nil), data...)
	}
	f.mu.Unlock()
}

// ReadSynthetic reads a synthetic file saved by a capture: <root>/irqpilot/<name>.
func (f *FS) ReadSynthetic(name string) ([]byte, error) {
	return os.ReadFile(filepath.Join(f.root, SyntheticDir, name))
}

// New returns an FS rooted at root ("/" for the live machine).
func New(root string) *FS {
	if root == "" {
		root = "/"
	}
	return &FS{root: filepath.Clean(root)}
}

// Root is the directory this FS reads from.
func (f *FS) Root() string { return f.root }

// IsLive reports whether the FS reads the running kernel.
func (f *FS) IsLive() bool { return f.root == "/" }

// Path turns a kernel path such as "proc/interrupts" or "/proc/interrupts"
// into a path on disk.
func (f *FS) Path(rel string) string {
	return filepath.Join(f.root, strings.TrimPrefix(rel, "/"))
}

// ReadFile reads a whole file.
func (f *FS) ReadFile(rel string) ([]byte, error) {
	f.note(rel, AccessFile)
	return os.ReadFile(f.Path(rel))
}

// ReadString reads a file and trims surrounding white space.
func (f *FS) ReadString(rel string) (string, error) {
	b, err := f.ReadFile(rel)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// ReadInt reads a file holding one decimal integer.
func (f *FS) ReadInt(rel string) (int64, error) {
	s, err := f.ReadString(rel)
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

// ReadDir lists the names in a directory, sorted by name.
func (f *FS) ReadDir(rel string) ([]string, error) {
	f.note(rel, AccessDir)
	ents, err := os.ReadDir(f.Path(rel))
	if err != nil {
		return nil, err
	}
	names := make([]string, len(ents))
	for i, e := range ents {
		names[i] = e.Name()
	}
	return names, nil
}

// Readlink returns the target of a symlink as stored.
func (f *FS) Readlink(rel string) (string, error) {
	f.note(rel, AccessStat)
	return os.Readlink(f.Path(rel))
}

// Glob matches a pattern relative to the root and returns root-relative
// paths (with a leading "/").
func (f *FS) Glob(pattern string) ([]string, error) {
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

// Resolve follows symlinks within the root and returns the root-relative
// real path (e.g. /sys/class/net/eth0 → /sys/devices/pci0000:00/…/net/eth0).
// Absolute link targets are interpreted inside the root, never on the host,
// so a snapshot cannot point the tool at the live machine.
func (f *FS) Resolve(rel string) (string, error) {
	f.note(rel, AccessStat)
	parts := strings.Split(strings.Trim(filepath.Clean("/"+rel), "/"), "/")
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
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			cur = next
			continue
		}
		if hops++; hops > 40 {
			return "", fmt.Errorf("%s: too many levels of symbolic links", rel)
		}
		t, err := os.Readlink(f.Path(next))
		if err != nil {
			return "", err
		}
		if !filepath.IsAbs(t) {
			t = filepath.Join(cur, t)
		}
		parts = append(strings.Split(strings.Trim(filepath.Clean(t), "/"), "/"), parts...)
		cur = "/"
	}
	return cur, nil
}

// WriteFile writes value to a kernel file the way `echo value > file` does,
// in a single write(2), and classifies the kernel's refusal into typed errors.
// It does not create files: a missing file is ErrUnsupported.
func (f *FS) WriteFile(rel, value string) error {
	p := f.Path(rel)
	fh, err := os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return classify(rel, err)
	}
	_, werr := fh.Write([]byte(value))
	cerr := fh.Close()
	if werr != nil {
		return classify(rel, werr)
	}
	if cerr != nil {
		return classify(rel, cerr)
	}
	return nil
}

// WriteError describes a refused write with the file and the errno.
type WriteError struct {
	Path  string
	Errno syscall.Errno // 0 when not a system error
	Kind  error         // ErrManaged, ErrNotPermitted, ErrUnsupported or nil
	Err   error
}

func (e *WriteError) Error() string {
	if e.Kind != nil {
		return fmt.Sprintf("write %s: %v (%v)", e.Path, e.Kind, e.Err)
	}
	return fmt.Sprintf("write %s: %v", e.Path, e.Err)
}

func (e *WriteError) Unwrap() []error {
	if e.Kind != nil {
		return []error{e.Kind, e.Err}
	}
	return []error{e.Err}
}

func classify(rel string, err error) error {
	we := &WriteError{Path: rel, Err: err}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		we.Errno = errno
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		we.Kind = ErrUnsupported
	case isIRQAffinity(rel) && (we.Errno == syscall.EIO || we.Errno == syscall.EPERM):
		// The only reason root gets EIO/EPERM from smp_affinity is a managed
		// (or per-CPU) interrupt: irq_can_set_affinity_usr() fails.
		we.Kind = ErrManaged
	case we.Errno == syscall.EACCES || we.Errno == syscall.EPERM || errors.Is(err, fs.ErrPermission):
		we.Kind = ErrNotPermitted
	case we.Errno == syscall.EOPNOTSUPP || we.Errno == syscall.ENOTSUP:
		we.Kind = ErrUnsupported
	}
	return we
}

func isIRQAffinity(rel string) bool {
	rel = "/" + strings.TrimPrefix(rel, "/")
	return strings.HasPrefix(rel, "/proc/irq/") &&
		(strings.HasSuffix(rel, "/smp_affinity") || strings.HasSuffix(rel, "/smp_affinity_list"))
}
