package kernel

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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
			holder, _ := os.ReadFile(p)
			fh.Close()
			if errors.Is(err, unix.EWOULDBLOCK) {
				return nil, fmt.Errorf("another irqpilot (pid %s) is writing kernel settings (lock %s); waited %s", strings.TrimSpace(string(holder)), p, timeout)
			}
			return nil, fmt.Errorf("write lock %s: %w", p, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	fh.Truncate(0)
	fmt.Fprintf(fh, "%d\n", os.Getpid())
	return func() {
		unix.Flock(int(fh.Fd()), unix.LOCK_UN)
		fh.Close()
	}, nil
}
