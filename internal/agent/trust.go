package agent

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// checkTrusted refuses an input of the agent (the plan file, the status
// socket's directory) that a user other than root could change: the path,
// after symbolic links, and every directory above it must be owned by root
// (or by the agent's own user) and not writable by group or others. A
// parent directory with the sticky bit owned by root (/tmp) is accepted:
// others may add entries to it but not replace ours; so is a group- or
// other-writable directory that is itself the root of a read-only mount (a
// Kubernetes ConfigMap volume mounted readOnly has a mode 0777 root).
// Ownership is required everywhere, and the file's own mode is never
// excused: a read-only view of a file — the agent unit's
// ProtectSystem=strict makes /etc one — says nothing of who can change it
// through the host's own mount. It returns the path with symbolic links
// resolved, which is what the caller should open.
func checkTrusted(what, path string) (string, error) {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", what, path, err)
	}
	if real, err = filepath.Abs(real); err != nil {
		return "", fmt.Errorf("%s %s: %w", what, path, err)
	}
	me := os.Geteuid()
	for p, first := real, true; ; p, first = filepath.Dir(p), false {
		fi, err := os.Lstat(p)
		if err != nil {
			return "", fmt.Errorf("%s %s: %w", what, path, err)
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			uid := int(st.Uid)
			if uid != 0 && uid != me {
				return "", fmt.Errorf("%s %s: %s is owned by uid %d, not root; refused (another user could change what the agent enforces as root)", what, path, p, uid)
			}
			perm := fi.Mode().Perm()
			stickyRoot := !first && fi.IsDir() && fi.Mode()&fs.ModeSticky != 0 && uid == 0
			roMountRoot := !first && fi.IsDir() && readOnlyMount(p) && mountRoot(p, st)
			if perm&0o022 != 0 && !stickyRoot && !roMountRoot {
				return "", fmt.Errorf("%s %s: %s is writable by group or others (mode %04o); refused (another user could change what the agent enforces as root)", what, path, p, perm)
			}
		}
		if p == filepath.Dir(p) {
			return real, nil
		}
	}
}

func readOnlyMount(p string) bool {
	var sf unix.Statfs_t
	return unix.Statfs(p, &sf) == nil && sf.Flags&unix.ST_RDONLY != 0
}

// mountRoot reports whether directory p (with stat st) is the root of a
// mount of its own file system: its device differs from its parent's.
// A bind mount of a directory of the same file system is not recognised,
// which errs on the side of refusing.
func mountRoot(p string, st *syscall.Stat_t) bool {
	parent := filepath.Dir(p)
	if parent == p {
		return true
	}
	var ps syscall.Stat_t
	return syscall.Lstat(parent, &ps) == nil && ps.Dev != st.Dev
}
