package kernel

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// maxSnapshotBytes bounds what an archive may unpack to, so a hostile or
// broken snapshot cannot fill the disk.
const maxSnapshotBytes = 1 << 30

// OpenSnapshot unpacks a .tar.gz (or .tgz) snapshot — ours from `irqpilot
// capture`, or a ghw-format snapshot — into a fresh temporary directory and
// returns an FS rooted there plus a function that removes it. Only regular
// files, directories and symlinks are unpacked; entry names that would escape
// the directory are refused. Symlink targets are rewritten by containLink so
// that following them never leaves the snapshot.
func OpenSnapshot(file string) (*FS, func(), error) {
	dir, err := os.MkdirTemp(snapshotTempDir(), "irqpilot-snapshot-")
	if err != nil {
		return nil, nil, err
	}
	cleanup := func() { os.RemoveAll(dir) }
	if err := unpack(file, dir); err != nil {
		cleanup()
		return nil, nil, fmt.Errorf("snapshot %s: %w", file, err)
	}
	return New(dir), cleanup, nil
}

// snapshotTempDir is where snapshots are unpacked: $TMPDIR when set, else
// /dev/shm when it is a writable directory, else the system's temporary
// directory. A snapshot is thousands of small files (19 000 for a 112-CPU
// host); in memory they unpack in under a second, on a busy disk it can take
// half a minute. Snapshots are bounded by maxSnapshotBytes.
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

func unpack(file, dir string) error {
	fh, err := os.Open(file)
	if err != nil {
		return err
	}
	defer fh.Close()
	gz, err := gzip.NewReader(fh)
	if err != nil {
		return fmt.Errorf("not a gzip archive: %w", err)
	}
	tr := tar.NewReader(gz)
	var total int64
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		name := filepath.Clean("/" + h.Name)
		if name == "/" {
			continue
		}
		dst := filepath.Join(dir, name)
		if !strings.HasPrefix(dst, dir+string(filepath.Separator)) {
			return fmt.Errorf("entry %q escapes the snapshot", h.Name)
		}
		// An entry below a symlink would be written wherever the link
		// points, and a link inside a linked directory would be resolved
		// from a different place than containLink assumed. Archives made
		// by walking a real tree (ours, ghw's) never have such entries.
		if link := linkedParent(dir, name); link != "" {
			return fmt.Errorf("entry %q lies below the symlink %q", h.Name, link)
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(dst, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			total += h.Size
			if total > maxSnapshotBytes {
				return fmt.Errorf("unpacks to more than %d bytes", maxSnapshotBytes)
			}
			// O_NOFOLLOW: never write through a symlink an earlier entry made.
			out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC|syscall.O_NOFOLLOW, 0o644)
			if err != nil {
				return fmt.Errorf("entry %q: %w", h.Name, err)
			}
			_, err = io.Copy(out, io.LimitReader(tr, h.Size))
			if cerr := out.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		case tar.TypeSymlink:
			os.Remove(dst)
			if err := os.Symlink(containLink(name, h.Linkname), dst); err != nil {
				return err
			}
		default:
			// hard links, devices, fifos: not part of a kernel snapshot
		}
	}
}

// containLink rewrites a symlink target so that the operating system, when it
// follows the link inside the unpacked tree, stays inside that tree: absolute
// targets ("/sys/devices/…") and relative ones with too many ".." are
// resolved against the snapshot's root, the way they would be on the captured
// machine, and expressed relative to the link's directory.
func containLink(name, target string) string {
	linkDir := filepath.Dir(name) // root-relative, starts with "/"
	abs := target
	if !filepath.IsAbs(target) {
		abs = filepath.Join(linkDir, target) // Join cleans; ".." stops at "/"
	}
	abs = filepath.Clean(abs)
	rel, err := filepath.Rel(linkDir, abs)
	if err != nil {
		return "."
	}
	return rel
}

// linkedParent returns the first directory above name (root-relative, with a
// leading "/") that is a symlink in the tree being unpacked at dir, or "".
func linkedParent(dir, name string) string {
	parts := strings.Split(strings.Trim(filepath.Dir(name), "/"), "/")
	cur := dir
	for i, p := range parts {
		if p == "" {
			continue
		}
		cur = filepath.Join(cur, p)
		fi, err := os.Lstat(cur)
		if err != nil {
			return "" // not there yet: MkdirAll creates real directories
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			return "/" + strings.Join(parts[:i+1], "/")
		}
	}
	return ""
}
