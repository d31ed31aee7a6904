package kernel

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
)

// unpacker holds the state of one unpack.
type unpacker struct {
	d       *snapshotDir
	lim     snapshotLimits
	links   map[string]bool // root-relative names of the symlinks unpacked
	entries int
	total   int64
	// dropped and renamed count, by kind, the entries left out or read
	// under another name, with the first few names (warnings).
	dropped map[string]*noted
	order   []string
}

// noted is one kind of warned-about entry.
type noted struct {
	n     int
	names []string
}

// note records entry name under kind (see warnings).
func (u *unpacker) note(kind, name string) {
	if u.dropped == nil {
		u.dropped = map[string]*noted{}
	}
	k := u.dropped[kind]
	if k == nil {
		k = &noted{}
		u.dropped[kind] = k
		u.order = append(u.order, kind)
	}
	k.n++
	if len(k.names) < 3 {
		k.names = append(k.names, strconv.Quote(name))
	}
}

// warnings is one line per kind of entry noted, in the order first seen.
func (u *unpacker) warnings() []string {
	var out []string
	for _, kind := range u.order {
		k := u.dropped[kind]
		names := strings.Join(k.names, ", ")
		if k.n > len(k.names) {
			names += fmt.Sprintf(" and %d more", k.n-len(k.names))
		}
		out = append(out, fmt.Sprintf("%d %s: %s", k.n, kind, names))
	}
	return out
}

func unpack(file string, d *snapshotDir, lim snapshotLimits) (*unpacker, error) {
	fh, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	gz, err := gzip.NewReader(fh)
	if err != nil {
		return nil, fmt.Errorf("not a gzip archive: %w", err)
	}
	tr := tar.NewReader(abortReader{gz, &d.abort})
	u := &unpacker{d: d, lim: lim, links: map[string]bool{}}
	for {
		if d.abort.Load() {
			return nil, errInterrupted
		}
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return u, nil
		}
		if err != nil {
			return nil, err
		}
		if err := u.check(h); err != nil {
			return nil, err
		}
		if err := u.entry(h, tr); err != nil {
			return nil, err
		}
		if unpackHook != nil {
			unpackHook(u.entries)
		}
	}
}

// unpackHook, when set (by tests), is called after each entry.
var unpackHook func(entries int)

// check refuses an entry that would exceed a limit, before its data is read.
func (u *unpacker) check(h *tar.Header) error {
	u.entries++
	if u.entries > u.lim.entries {
		return overLimit("more than %d entries (limit; real snapshots have tens of thousands)", u.lim.entries)
	}
	if len(h.Name) > u.lim.nameLen {
		return overLimit("entry %.60q…: name is %d bytes, over the limit of %d", h.Name, len(h.Name), u.lim.nameLen)
	}
	if len(h.Linkname) > u.lim.nameLen {
		return overLimit("entry %q: link target is %d bytes, over the limit of %d", h.Name, len(h.Linkname), u.lim.nameLen)
	}
	if n := strings.Count(filepath.Clean("/"+h.Name), "/"); n > u.lim.depth {
		return overLimit("entry %.60q…: %d levels deep, over the limit of %d", h.Name, n, u.lim.depth)
	}
	// Every entry's size counts, also of entries that are skipped: their
	// data is decompressed to be read past.
	if h.Size > u.lim.fileBytes {
		return overLimit("entry %q is %d bytes, over the limit of %d per file (no kernel file is that large)", h.Name, h.Size, u.lim.fileBytes)
	}
	if u.total += h.Size; u.total > u.lim.bytes {
		return overLimit("unpacks to more than %d bytes (limit) at entry %q", u.lim.bytes, h.Name)
	}
	return nil
}

// entry writes one entry, holding d.mu so that a concurrent remove either
// comes first (and the entry is not written) or waits for it.
func (u *unpacker) entry(h *tar.Header, r io.Reader) error {
	d := u.d
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.removed {
		return errInterrupted
	}
	dir := d.path
	name := filepath.Clean("/" + h.Name)
	if name == "/" {
		return nil
	}
	if filepath.IsAbs(h.Name) || strings.HasPrefix(h.Name, "../") || strings.Contains(h.Name, "/../") || h.Name == ".." || strings.HasSuffix(h.Name, "/..") {
		u.note(`entries with an absolute name or "..", read inside the snapshot`, h.Name)
	}
	dst := filepath.Join(dir, name)
	if !strings.HasPrefix(dst, dir+string(filepath.Separator)) {
		return fmt.Errorf("entry %q escapes the snapshot", h.Name)
	}
	// An entry below a symlink would be written wherever the link
	// points, and a link inside a linked directory would be resolved
	// from a different place than containLink assumed. Archives made
	// by walking a real tree (ours, ghw's) never have such entries.
	if link := u.linkedParent(name); link != "" {
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
		// O_NOFOLLOW: never write through a symlink an earlier entry made.
		out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC|syscall.O_NOFOLLOW, 0o644)
		if err != nil {
			return fmt.Errorf("entry %q: %w", h.Name, err)
		}
		_, err = io.Copy(out, io.LimitReader(r, h.Size))
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
		u.links[name] = true
	case tar.TypeLink:
		u.note("hard links (not part of a kernel snapshot) left out", h.Name)
	case tar.TypeChar, tar.TypeBlock:
		u.note("device files (not part of a kernel snapshot) left out", h.Name)
	case tar.TypeFifo:
		u.note("FIFOs (not part of a kernel snapshot) left out", h.Name)
	case tar.TypeXGlobalHeader:
		// archive metadata (pax), not an entry
	default:
		u.note(fmt.Sprintf("entries of tar type %q left out", h.Typeflag), h.Name)
	}
	return nil
}

// linkedParent returns the first directory above name (root-relative, with a
// leading "/") that is a symlink in the tree being unpacked, or "". Only
// symlink entries make symlinks in the fresh directory, so the set of those
// unpacked answers without a system call per level.
func (u *unpacker) linkedParent(name string) string {
	for i := 1; i < len(name); i++ {
		if name[i] == '/' && u.links[name[:i]] {
			return name[:i]
		}
	}
	return ""
}

// abortReader fails reads once abort is set, so that a signal does not wait
// for a large entry to be decompressed.
type abortReader struct {
	r     io.Reader
	abort *atomic.Bool
}

func (a abortReader) Read(p []byte) (int, error) {
	if a.abort.Load() {
		return 0, errInterrupted
	}
	return a.r.Read(p)
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
