package agent

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// checkTrusted refuses an input of the agent (the plan file, the status
// socket's directory) that a user other than root could change. Every
// component of the path as given is checked, in order, as sudo and OpenSSH
// do: each directory and the file itself must be owned by root (or by the
// agent's own user) and not writable by group or others, and a symbolic
// link must be owned by root (or the agent's user) — the directory holding
// it was checked before it — and its target is then checked the same way,
// component by component. A directory with the sticky bit owned by root
// (/tmp) is accepted: others may add entries to it but not replace ours
// (an entry they add is theirs, and refused); so is a group- or
// other-writable directory that is itself the root of a read-only mount (a
// Kubernetes ConfigMap volume mounted readOnly has a mode 0777 root).
// The file's own mode is never excused: a read-only view of a file — the
// agent unit's ProtectSystem=strict makes /etc one — says nothing of who
// can change it through the host's own mount. It returns the path with
// symbolic links resolved, which the caller opens with O_NOFOLLOW
// (openTrusted).
func checkTrusted(what, path string) (string, error) {
	abs := path
	if !filepath.IsAbs(abs) {
		wd, err := os.Getwd()
		if err != nil {
			return "", fmt.Errorf("%s %s: %w", what, path, err)
		}
		abs = wd + "/" + path
	}
	w := &trustWalk{what: what, path: path, me: os.Geteuid()}
	if err := w.check("/", false); err != nil {
		return "", err
	}
	real, err := w.walk("/", abs)
	if err != nil {
		return "", err
	}
	if err := w.check(real, true); err != nil {
		return "", err
	}
	return real, nil
}

// maxTrustLinks bounds the symbolic links followed on one path, as the
// kernel's ELOOP does.
const maxTrustLinks = 40

// trustWalk resolves a path one component at a time, checking each.
type trustWalk struct {
	what, path string
	me         int
	links      int
}

// walk resolves rel below dir, a directory already checked with every
// directory above it, and returns the resolved path.
func (w *trustWalk) walk(dir, rel string) (string, error) {
	for _, name := range strings.Split(rel, "/") {
		switch name {
		case "", ".":
			continue
		case "..":
			dir = filepath.Dir(dir) // dir is resolved: its parent was checked
			continue
		}
		p := filepath.Join(dir, name)
		fi, err := os.Lstat(p)
		if err != nil {
			return "", fmt.Errorf("%s %s: %w", w.what, w.path, err)
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			if err := w.check(p, false); err != nil {
				return "", err
			}
			dir = p
			continue
		}
		if err := w.owner(p, fi); err != nil {
			return "", err
		}
		if w.links++; w.links > maxTrustLinks {
			return "", fmt.Errorf("%s %s: too many levels of symbolic links", w.what, w.path)
		}
		target, err := os.Readlink(p)
		if err != nil {
			return "", fmt.Errorf("%s %s: %w", w.what, w.path, err)
		}
		base := dir
		if filepath.IsAbs(target) {
			base = "/"
		}
		if dir, err = w.walk(base, target); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// check checks the owner and mode of p, a resolved path. A directory on the
// way (final false) may be writable by others when it is root's and sticky,
// or the root of a read-only mount; the final object never.
func (w *trustWalk) check(p string, final bool) error {
	fi, err := os.Lstat(p)
	if err != nil {
		return fmt.Errorf("%s %s: %w", w.what, w.path, err)
	}
	if err := w.owner(p, fi); err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	perm := fi.Mode().Perm()
	stickyRoot := !final && fi.IsDir() && fi.Mode()&fs.ModeSticky != 0 && st.Uid == 0
	roMountRoot := !final && fi.IsDir() && readOnlyMount(p) && mountRoot(p, st)
	if perm&0o022 != 0 && !stickyRoot && !roMountRoot {
		return fmt.Errorf("%s %s: %s is writable by group or others (mode %04o); refused (another user could change what the agent enforces as root)", w.what, w.path, p, perm)
	}
	return nil
}

// owner refuses p (a directory, file or symbolic link) owned by another
// user than root or the agent's own.
func (w *trustWalk) owner(p string, fi fs.FileInfo) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	if uid := int(st.Uid); uid != 0 && uid != w.me {
		kind := ""
		if fi.Mode()&fs.ModeSymlink != 0 {
			kind = " (a symbolic link)"
		}
		return fmt.Errorf("%s %s: %s%s is owned by uid %d, not root; refused (another user could change what the agent enforces as root)", w.what, w.path, p, kind, uid)
	}
	return nil
}

// openTrusted opens real, a path checkTrusted returned, without following
// a symbolic link and without blocking on a FIFO, and checks the file it
// opened as checkTrusted checks the last component: what was replaced
// after the check (only by root, as every directory above is root's) is
// checked again rather than believed.
func openTrusted(what, path, real string) (*os.File, error) {
	fh, err := os.OpenFile(real, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", what, path, err)
	}
	fi, err := fh.Stat()
	if err == nil {
		w := &trustWalk{what: what, path: path, me: os.Geteuid()}
		if err = w.owner(real, fi); err == nil && fi.Mode().Perm()&0o022 != 0 {
			err = fmt.Errorf("%s %s: %s is writable by group or others (mode %04o); refused (another user could change what the agent enforces as root)", what, path, real, fi.Mode().Perm())
		}
	}
	if err != nil {
		fh.Close()
		return nil, err
	}
	return fh, nil
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
