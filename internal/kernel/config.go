package kernel

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/irqpilot/irqpilot/internal/outfile"
	"golang.org/x/sys/unix"
)

// FileState is a configuration file as it was: its bytes (nil: it did not
// exist), permission bits and owner, so it can be put back exactly.
type FileState struct {
	Data     *string
	Mode     os.FileMode
	UID, GID int
}

// ConfigFile reads a configuration file below the root (not a kernel file:
// /etc/default/irqbalance and the like) without following a symlink at its
// last component.
func (f *FS) ConfigFile(rel string) (FileState, error) {
	st := FileState{UID: -1, GID: -1}
	fh, err := os.OpenFile(f.Path(rel), os.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, os.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return st, fmt.Errorf("%s is a symbolic link; refusing to follow it", f.Path(rel))
		}
		return st, err
	}
	defer fh.Close()
	fi, err := fh.Stat()
	if err != nil {
		return st, err
	}
	if !fi.Mode().IsRegular() {
		return st, fmt.Errorf("%s is not a regular file", f.Path(rel))
	}
	const maxConfig = 1 << 20
	b, err := io.ReadAll(io.LimitReader(fh, maxConfig+1))
	if err != nil {
		return st, err
	}
	if len(b) > maxConfig {
		return st, fmt.Errorf("%s is larger than %d bytes; not a configuration file irqpilot edits", f.Path(rel), maxConfig)
	}
	s := string(b)
	st.Data = &s
	st.Mode = fi.Mode().Perm()
	// os.File.Stat's Sys is a *syscall.Stat_t (not unix.Stat_t, a
	// distinct type that never matches).
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		st.UID, st.GID = int(sys.Uid), int(sys.Gid)
	}
	return st, nil
}

// WriteConfigFile replaces a configuration file atomically (a new file in
// the same directory, created exclusively, fsynced, renamed over it) with
// the given mode and owner (uid/gid -1: leave as created). A nil Data
// removes the file. The directory must exist; a symlink at the file's place
// is replaced, never followed.
func (f *FS) WriteConfigFile(rel string, st FileState) error {
	full := f.Path(rel)
	if st.Data == nil {
		if err := os.Remove(full); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	}
	mode := st.Mode
	if mode == 0 {
		mode = 0o644
	}
	fh, err := outfile.Replacement(full, mode, st.UID, st.GID)
	if err != nil {
		return err
	}
	if _, err := fh.WriteString(*st.Data); err != nil {
		fh.Abort()
		return err
	}
	return fh.Close()
}
