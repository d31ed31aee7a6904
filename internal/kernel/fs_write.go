package kernel

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
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

// ReadSettingFile reads back a file that WriteFile writes, trimmed of the
// white space around it: it is for the setting kinds (package setting),
// which name the file they write and read its value in force by that name.
// Everything else reads the kernel through a typed method; a test in this
// package keeps other packages from calling it.
func (f *FS) ReadSettingFile(rel string) (string, error) { return f.readString(rel) }

// GlobSettingFiles lists the files matching pattern (relative to the root,
// as "proc/irq/*/smp_affinity_list"), as root-relative paths with a leading
// "/", in name order: it is for the setting kinds (package setting), which
// name the files they write and look for them to tell whether this kernel
// has them. Like ReadSettingFile, it is no door for anything else.
func (f *FS) GlobSettingFiles(pattern string) ([]string, error) { return f.glob(pattern) }

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
