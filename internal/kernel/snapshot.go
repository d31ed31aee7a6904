package kernel

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// Limits on what a snapshot may cost to unpack. A snapshot is untrusted input
// (it may come from anywhere), so every dimension of it is bounded well above
// what a real kernel produces, and exceeding one is an error that names the
// entry and the limit. The largest real capture at hand (shared fixtures:
// OpenShift bare-metal-master, 112 CPUs, 1 875 IRQs) has 19 034 entries,
// 3.2 MB in all, its largest file 2.4 MB, paths 8 levels deep; the largest
// real /proc/interrupts (pcp, 1152 CPUs) is 13.4 MB.
const (
	// maxSnapshotBytes bounds the bytes an archive may unpack to in all, so
	// that a hostile snapshot cannot fill /dev/shm or the disk.
	maxSnapshotBytes = 1 << 30
	// maxSnapshotFileBytes bounds one file. The largest kernel file a
	// snapshot holds is /proc/interrupts: about 11 bytes per CPU and row,
	// 13.4 MB at 1152 CPUs × 1 056 rows; at NR_CPUS' maximum of 8192 the
	// same rows are about 95 MB. The bound is also what a reader of the
	// file holds in memory (FS.ReadFile checks it before reading): at
	// 256 MiB, a 164 MB /proc/interrupts from a 200 KB archive ran the Go
	// runtime out of memory under a 2 GiB address-space limit (a fatal
	// error: no message, the directory left behind), so it is refused at
	// its tar header instead (TestSnapshotMemberCapUnderAddressSpaceLimit).
	maxSnapshotFileBytes = 96 << 20
	// maxSnapshotEntries bounds the number of archive entries (files,
	// directories, links, skipped ones). A ghw-style capture has about 70
	// files per CPU (topology, caches, cpufreq) plus a few per IRQ and
	// queue: some 600 000 at 8192 CPUs. Each entry costs an inode.
	maxSnapshotEntries = 1 << 20
	// maxSnapshotDepth bounds path depth (components). sysfs paths are
	// about 15 deep (/sys/devices/pci…/…/net/eth0/queues/rx-0/…), a few
	// more below chains of PCIe switches; without a bound, 1 900 nested
	// directories in a 59 KB archive took 85 s to unpack.
	maxSnapshotDepth = 64
	// maxSnapshotNameBytes bounds entry names and link targets: PATH_MAX.
	maxSnapshotNameBytes = 4096
)

// snapshotLimits are the limits above, in a value that tests can shrink.
type snapshotLimits struct {
	bytes, fileBytes        int64
	entries, depth, nameLen int
}

var defaultSnapshotLimits = snapshotLimits{
	bytes: maxSnapshotBytes, fileBytes: maxSnapshotFileBytes,
	entries: maxSnapshotEntries, depth: maxSnapshotDepth, nameLen: maxSnapshotNameBytes,
}

// snapshotPrefix starts the name of every snapshot directory. The full name
// is irqpilot-snapshot-<pid>-<start time of pid>-<random>, so that a later
// run can tell a directory whose owner died without removing it (SIGKILL,
// OOM kill) from one in use; see removeStaleSnapshots.
const snapshotPrefix = "irqpilot-snapshot-"

// errInterrupted ends an unpack whose directory a signal removed.
var errInterrupted = errors.New("interrupted")

// OpenSnapshot unpacks a .tar.gz (or .tgz) snapshot — ours from `irqpilot
// capture`, or a ghw-format snapshot — into a fresh temporary directory and
// returns an FS rooted there plus a function that removes it. Only regular
// files, directories and symlinks are unpacked; entry names that would escape
// the directory are refused. Symlink targets are rewritten by containLink so
// that following them never leaves the snapshot. Sizes, entry count, name
// length and depth are bounded (maxSnapshotBytes and the constants after it).
//
// Until the returned function is called, SIGINT and SIGTERM remove the
// directory (waiting for the entry being written) and then end the process
// the way the signal would have; a program that handles the signal itself
// keeps running, without the snapshot. Directories left by processes that
// died anyway are removed by the next OpenSnapshot.
func OpenSnapshot(file string) (*FS, func(), error) {
	return openSnapshot(file, defaultSnapshotLimits)
}

func openSnapshot(file string, lim snapshotLimits) (*FS, func(), error) {
	parent := snapshotTempDir()
	if parent == "" {
		parent = os.TempDir()
	}
	removeStaleSnapshots(parent)
	d := &snapshotDir{signalled: make(chan struct{})}
	// Registered before the directory exists, so that no signal can come
	// between its creation and its registration; remove waits for d.mu.
	d.mu.Lock()
	registerSnapshot(d)
	self := os.Getpid()
	start, _ := New("/").ProcStart(self) // 0 when /proc is not mounted
	dir, err := os.MkdirTemp(parent, fmt.Sprintf("%s%d-%d-", snapshotPrefix, self, start))
	d.path = dir
	d.mu.Unlock()
	if err != nil {
		unregisterSnapshot(d)
		return nil, nil, err
	}
	cleanup := func() {
		d.remove()
		unregisterSnapshot(d)
	}
	u, err := unpack(file, d, lim)
	if err != nil {
		if errors.Is(err, errInterrupted) {
			// A signal removed the directory and is ending the process;
			// if the program handles the signal itself, it continues here.
			<-d.signalled
		}
		cleanup()
		return nil, nil, fmt.Errorf("snapshot %s: %w", file, err)
	}
	fs := New(dir)
	fs.snapWarnings = u.warnings()
	return fs, cleanup, nil
}

// SnapshotWarnings says what unpacking the snapshot left out or changed:
// entries that a kernel snapshot never holds (hard links, device files,
// FIFOs, sockets) are not unpacked, and names that were absolute or held
// ".." are read inside the snapshot. Each kind is one line naming up to
// three of its entries. The verb that opened the snapshot prints them.
func (f *FS) SnapshotWarnings() []string { return f.snapWarnings }

// snapshotTempDir is where snapshots are unpacked: $TMPDIR when set, else
// /dev/shm when it is a writable directory, else the system's temporary
// directory ("" means os.TempDir()). A snapshot is thousands of small files
// (19 000 for a 112-CPU host); in memory they unpack in under a second, on a
// busy disk it can take half a minute. Snapshots are bounded by
// maxSnapshotBytes.
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

// snapshotDir is one unpacked snapshot directory of this process.
type snapshotDir struct {
	path string
	// abort asks the unpack to stop at once (checked per entry and per
	// read of file data), so that remove does not wait for a large file.
	abort atomic.Bool
	// mu is held while an entry is written and while the directory is
	// removed: nothing is written into it after its removal.
	mu      sync.Mutex
	removed bool
	// signalled is closed when a signal removed the directory and the
	// process survived the signal (a handler of the program's took it).
	signalled chan struct{}
}

func (d *snapshotDir) remove() {
	d.abort.Store(true)
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.removed && d.path != "" {
		os.RemoveAll(d.path)
	}
	d.removed = true
}

// liveSnapshots are this process's snapshot directories, removed when a
// SIGINT or SIGTERM arrives. The signals are watched only while there is at
// least one, and never when the process ignores them (nohup): Notify would
// un-ignore them.
var liveSnapshots struct {
	sync.Mutex
	dirs map[*snapshotDir]bool
	ch   chan os.Signal
}

func registerSnapshot(d *snapshotDir) {
	ls := &liveSnapshots
	ls.Lock()
	defer ls.Unlock()
	if ls.dirs == nil {
		ls.dirs = map[*snapshotDir]bool{}
		ls.ch = make(chan os.Signal, 1)
		go watchSnapshotSignals(ls.ch)
	}
	ls.dirs[d] = true
	if len(ls.dirs) == 1 {
		for _, sig := range []os.Signal{syscall.SIGINT, syscall.SIGTERM} {
			if !signal.Ignored(sig) {
				signal.Notify(ls.ch, sig)
			}
		}
	}
}

func unregisterSnapshot(d *snapshotDir) {
	ls := &liveSnapshots
	ls.Lock()
	defer ls.Unlock()
	if ls.dirs[d] {
		delete(ls.dirs, d)
		if len(ls.dirs) == 0 {
			signal.Stop(ls.ch)
		}
	}
}

// watchSnapshotSignals removes every live snapshot directory on a signal,
// stops watching, and sends the signal again to its own thread: with no
// other handler the process dies of it before tgkill returns (status 130 for
// SIGINT, 143 for SIGTERM in a shell), as it would have without snapshots.
func watchSnapshotSignals(ch chan os.Signal) {
	runtime.LockOSThread() // tgkill below targets this thread
	for sig := range ch {
		ls := &liveSnapshots
		ls.Lock()
		dirs := make([]*snapshotDir, 0, len(ls.dirs))
		for d := range ls.dirs {
			dirs = append(dirs, d)
		}
		ls.Unlock()
		for _, d := range dirs {
			d.remove()
		}
		ls.Lock()
		for _, d := range dirs {
			delete(ls.dirs, d)
		}
		if len(ls.dirs) == 0 {
			signal.Stop(ch)
		}
		ls.Unlock()
		if s, ok := sig.(syscall.Signal); ok {
			unix.Tgkill(os.Getpid(), unix.Gettid(), s)
		}
		// Still alive: the program handles the signal itself.
		for _, d := range dirs {
			close(d.signalled)
		}
	}
}

// removeStaleSnapshots removes the snapshot directories in parent that this
// user's processes left when they died without cleaning up. A directory is
// stale when its name says which process made it (pid and that process's
// start time, so a reused pid is told apart) and that process is gone. Kept:
// directories of live processes, of other users, and of older versions
// (whose names do not say). Best effort: errors are ignored.
func removeStaleSnapshots(parent string) {
	ents, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	uid := uint32(os.Geteuid())
	for _, e := range ents {
		pid, start, ok := snapshotOwner(e.Name())
		if !ok || !e.IsDir() {
			continue
		}
		p := filepath.Join(parent, e.Name())
		fi, err := os.Lstat(p)
		if err != nil || !fi.IsDir() {
			continue
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); !ok || st.Uid != uid {
			continue
		}
		if processGone(pid, start) {
			os.RemoveAll(p)
		}
	}
}

// snapshotOwner parses irqpilot-snapshot-<pid>-<start>-<random>.
func snapshotOwner(name string) (pid int, start uint64, ok bool) {
	rest, found := strings.CutPrefix(name, snapshotPrefix)
	if !found {
		return 0, 0, false
	}
	f := strings.Split(rest, "-")
	if len(f) != 3 || !isDecimal(f[2]) {
		return 0, 0, false
	}
	p, err1 := strconv.Atoi(f[0])
	s, err2 := strconv.ParseUint(f[1], 10, 64)
	if err1 != nil || err2 != nil || p <= 0 {
		return 0, 0, false
	}
	return p, s, true
}

// processGone reports whether the process pid that started at start (clock
// ticks after boot; 0 = unknown) has ended. In doubt it says no.
func processGone(pid int, start uint64) bool {
	st, err := New("/").ProcStart(pid)
	switch {
	case err == nil:
		return start != 0 && st != start // the pid was reused
	case errors.Is(err, fs.ErrNotExist):
		// No such process, if /proc is there to say so.
		_, serr := os.Stat("/proc/self/stat")
		return serr == nil
	}
	return false
}

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
		return fmt.Errorf("more than %d entries (limit; real snapshots have tens of thousands)", u.lim.entries)
	}
	if len(h.Name) > u.lim.nameLen {
		return fmt.Errorf("entry %.60q…: name is %d bytes, over the limit of %d", h.Name, len(h.Name), u.lim.nameLen)
	}
	if len(h.Linkname) > u.lim.nameLen {
		return fmt.Errorf("entry %q: link target is %d bytes, over the limit of %d", h.Name, len(h.Linkname), u.lim.nameLen)
	}
	if n := strings.Count(filepath.Clean("/"+h.Name), "/"); n > u.lim.depth {
		return fmt.Errorf("entry %.60q…: %d levels deep, over the limit of %d", h.Name, n, u.lim.depth)
	}
	// Every entry's size counts, also of entries that are skipped: their
	// data is decompressed to be read past.
	if h.Size > u.lim.fileBytes {
		return fmt.Errorf("entry %q is %d bytes, over the limit of %d per file (no kernel file is that large)", h.Name, h.Size, u.lim.fileBytes)
	}
	if u.total += h.Size; u.total > u.lim.bytes {
		return fmt.Errorf("unpacks to more than %d bytes (limit) at entry %q", u.lim.bytes, h.Name)
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
