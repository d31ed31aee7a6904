package apply

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// The state directory holds what root later trusts: journals that revert
// replays and the lock. Anyone who can write it, or replace one of its
// parents, could make root write or delete any file. So:
//   - it and every parent up to / must be owned by root (or by the user
//     running irqpilot) and not writable by group or others — except a
//     root-owned sticky directory such as /tmp, whose entries others
//     cannot rename or remove;
//   - it is created 0700 when missing;
//   - state files are opened with O_NOFOLLOW, created with O_EXCL, and
//     every journal entry is checked against what its kind may touch
//     before revert acts on it (see LoadJournal).

// SecureStateDir creates dir (0700, parents 0755) when missing and checks
// it with CheckStateDir.
func SecureStateDir(dir string) error {
	if dir == "" {
		return fmt.Errorf("no state directory given")
	}
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
			return fmt.Errorf("state directory %s: %w", dir, err)
		}
		if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("state directory %s: %w", dir, err)
		}
	}
	return CheckStateDir(dir)
}

// CheckStateDir refuses a state directory that another user could change
// (see above). A directory that does not exist yet passes if its nearest
// existing parent does.
func CheckStateDir(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("state directory %s: %w", dir, err)
	}
	first := true
	for p := abs; ; p = filepath.Dir(p) {
		fi, err := os.Lstat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist) && first:
			// Not created yet: its parents decide.
		case err != nil:
			return fmt.Errorf("state directory %s: %w", dir, err)
		default:
			if err := checkStateComponent(dir, p, fi, first); err != nil {
				return err
			}
		}
		first = false
		if p == "/" || p == filepath.Dir(p) {
			return nil
		}
	}
}

func checkStateComponent(dir, p string, fi fs.FileInfo, isDir bool) error {
	if fi.Mode()&fs.ModeSymlink != 0 {
		// A symlink among the parents is fine only if what it points to
		// passes too; the state directory itself must not be one.
		if isDir {
			return fmt.Errorf("state directory %s is a symbolic link; refused (give the real path)", dir)
		}
		target, err := filepath.EvalSymlinks(p)
		if err != nil {
			return fmt.Errorf("state directory %s: parent %s: %w", dir, p, err)
		}
		if err := CheckStateDir(target); err != nil {
			return fmt.Errorf("state directory %s: parent %s → %s: %w", dir, p, target, err)
		}
		st, err := os.Stat(p)
		if err != nil {
			return err
		}
		fi = st
	}
	if !fi.IsDir() {
		return fmt.Errorf("state directory %s: %s is not a directory", dir, p)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	uid := int(st.Uid)
	me := os.Geteuid()
	if uid != 0 && uid != me {
		return fmt.Errorf("state directory %s: %s is owned by uid %d, not root; refused (another user could forge journals that root replays)", dir, p, uid)
	}
	perm := fi.Mode().Perm()
	if perm&0o022 != 0 {
		sticky := fi.Mode()&fs.ModeSticky != 0
		if isDir || !sticky || uid != 0 {
			return fmt.Errorf("state directory %s: %s is writable by group or others (mode %04o); refused (another user could forge journals that root replays)", dir, p, perm)
		}
	}
	return nil
}

// secureSubdir creates dir (0700) below a checked state directory, or checks
// an existing one is a real directory owned by us and private.
func secureSubdir(dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("state dir: %w", err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	return checkStateComponent(dir, dir, fi, true)
}

// checkOwner refuses a state file owned by another user or writable by
// group or others.
func checkOwner(p string, fi fs.FileInfo) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	if int(st.Uid) != 0 && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("%s is owned by uid %d, not root; refused", p, st.Uid)
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%s is writable by group or others (mode %04o); refused", p, fi.Mode().Perm())
	}
	return nil
}
