package kernel

import (
	"errors"
	"fmt"
	"os"
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
	// that a hostile snapshot cannot fill /dev/shm or the disk: 80 times
	// the largest real capture.
	maxSnapshotBytes = 256 << 20
	// maxSnapshotFileBytes bounds one file. The largest kernel file a
	// snapshot holds is /proc/interrupts: about 11 bytes per CPU and row,
	// 13.4 MB at 1152 CPUs × 1 056 rows; its parser allows 2^22 counts
	// (maxInterruptCells), 46 MB of 10-digit counts. The bound is also
	// what a reader of the file holds in memory (FS.ReadFile checks it
	// before reading), so it is set for the address space: a 91 MB file
	// inside the earlier 96 MiB ran the runtime out of memory under
	// ulimit -v 1 GiB (a fatal error, exit status 2, the directory left
	// behind), and at 256 MiB a 164 MB one under 2 GiB
	// (TestSnapshotMemberCapUnderAddressSpaceLimit); 48 MiB files of the
	// costliest shapes are read under 1 GiB.
	maxSnapshotFileBytes = 48 << 20
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
// Until the returned function is called, SIGINT, SIGTERM and SIGHUP remove the
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
