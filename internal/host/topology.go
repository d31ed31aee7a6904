package host

import (
	"errors"
	"fmt"
	iofs "io/fs"
	"strings"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/kernel"
)

// cpuDir and nodeDir are kernel's, named here in what is reported
// unavailable: every file below them is read through a kernel.FS method.
const (
	cpuDir  = kernel.CPUDir
	nodeDir = kernel.NodeDir
)

// readTopology fills h.Topology from sysfs (and /proc/cmdline, /proc/stat,
// /proc/interrupts when sysfs is incomplete, as in many captures). It never
// fails: what it cannot read is recorded in h.Unavailable and left unknown
// (-1 ids, empty sets), never guessed.
func readTopology(fs *kernel.FS, h *Host) {
	t := &h.Topology
	dirs := cpuDirs(fs) // cpuN directory ids (nil when the directory is missing)

	// Online CPUs: the kernel's list, else the cpuN directories (with their
	// per-CPU "online" files), else /proc/stat, else the /proc/interrupts header.
	online, onlineErr := fs.CPUList(kernel.CPUsOnline)
	offline, offlineErr := fs.CPUList(kernel.CPUsOffline)
	if onlineErr != nil {
		src := ""
		switch {
		case len(dirs) > 0:
			online, offline = onlineFromDirs(fs, dirs, offline, offlineErr == nil)
			src = "cpuN directories"
		default:
			if s, err := onlineFromStat(fs); err == nil {
				online, src = s, "/"+kernel.StatPath
			} else if s, err := onlineFromInterrupts(fs); err == nil {
				online, src = s, "/proc/interrupts header"
			}
		}
		if src != "" {
			h.unavailable("cpu online list (derived from "+src+")", "/"+kernel.CPUsOnline.Path(), relErr(fs, onlineErr))
		} else {
			h.unavailable("cpu online list", "/"+kernel.CPUsOnline.Path(), relErr(fs, onlineErr))
		}
	}
	possible, possErr := fs.CPUList(kernel.CPUsPossible)
	present, presErr := fs.CPUList(kernel.CPUsPresent)
	if possErr != nil {
		possible = online.Union(offline).Union(cpuset.Of(dirs...))
		if presErr == nil {
			possible = possible.Union(present)
		}
		if !isNotExist(possErr) {
			h.unavailable("cpu possible list", "/"+kernel.CPUsPossible.Path(), relErr(fs, possErr))
		}
	}
	if presErr != nil {
		present = possible
		if !isNotExist(presErr) {
			h.unavailable("cpu present list", "/"+kernel.CPUsPresent.Path(), relErr(fs, presErr))
		}
	}
	if offlineErr != nil && onlineErr == nil {
		offline = possible.Difference(online)
	}
	t.Online, t.Possible, t.Offline = online, possible, offline

	readIsolation(fs, h)

	// The CPUs we describe: every online CPU and every present offline one.
	// (The kernel's "offline" also names possible-but-absent CPUs, up to
	// hundreds on VMs with hot-plug slots; those are not listed as CPUs.)
	ids := online.Union(offline.Intersect(present))
	if presErr != nil && possErr != nil {
		ids = online.Union(offline)
	}
	nodeOf := readNodes(fs, h)

	var noTopo, badTopo []int
	var badFiles []string
	var issues fileIssues
	pkgMasks := map[int]cpuset.Set{} // CPU id → CPUs of its package (from the mask files)
	t.CPUs = make([]CPU, 0, ids.Len())
	for _, id := range ids.CPUs() {
		c := CPU{ID: id, Online: online.Contains(id), Core: -1, Die: -1, Package: -1, Node: -1}
		missing, bad := readCPUTopology(fs, &c, &issues, pkgMasks)
		if missing && c.Online {
			noTopo = append(noTopo, id)
		}
		if bad != nil {
			badTopo = append(badTopo, id)
			if len(badFiles) < 3 {
				badFiles = append(badFiles, relErr(fs, bad).Error())
			}
		}
		if n, ok := nodeOf[id]; ok {
			c.Node = n
		} else {
			c.Node = nodeFromCPUDir(fs, id)
		}
		c.Isolated = t.Isolated.Contains(id)
		c.NohzFull = t.NohzFull.Contains(id)
		t.CPUs = append(t.CPUs, c)
	}
	if len(noTopo) > 0 {
		h.unavailable("cpu topology", "/"+cpuDir+"/cpu*/topology",
			fmt.Errorf("missing for online CPUs %s", cpuset.Of(noTopo...)))
	}
	if len(badTopo) > 0 {
		h.unavailable("cpu topology", "/"+cpuDir+"/cpu*/{topology,cache}",
			fmt.Errorf("unreadable for CPUs %s: %s", cpuset.Of(badTopo...), strings.Join(badFiles, "; ")))
	}
	packagesFromMasks(h, pkgMasks, &issues)
	issues.report(fs, h)
	if t.Nodes == nil {
		t.Nodes = []Node{}
	}
}

func isNotExist(err error) bool { return errors.Is(err, iofs.ErrNotExist) }

// relErr rewrites file errors to name the kernel path ("/sys/…") instead
// of the path on disk, so that a live read and a read of its
// snapshot report the same reasons.
func relErr(fs *kernel.FS, err error) error {
	var pe *iofs.PathError
	if errors.As(err, &pe) {
		rel := strings.TrimPrefix(pe.Path, fs.Root())
		return &iofs.PathError{Op: pe.Op, Path: "/" + strings.TrimPrefix(rel, "/"), Err: pe.Err}
	}
	return err
}

// cpuDirs lists the ids of the cpuN directories, ascending (nil when the
// directory is missing).
func cpuDirs(fs *kernel.FS) []int {
	ids, err := fs.CPUDirs()
	if err != nil {
		return nil
	}
	return ids
}

// onlineFromDirs derives the online set from the cpuN directories: a CPU is
// offline when its "online" file says 0 or the kernel's offline list names
// it; cpu0 usually has no "online" file (it cannot be unplugged).
func onlineFromDirs(fs *kernel.FS, dirs []int, offline cpuset.Set, haveOffline bool) (cpuset.Set, cpuset.Set) {
	var on, off []int
	for _, id := range dirs {
		up, err := fs.CPUOnline(id)
		switch {
		case err == nil && !up:
			off = append(off, id)
		case offline.Contains(id):
			off = append(off, id)
		default:
			on = append(on, id)
		}
	}
	if haveOffline {
		return cpuset.Of(on...), offline.Union(cpuset.Of(off...))
	}
	return cpuset.Of(on...), cpuset.Of(off...)
}

// onlineFromStat reads the cpuN lines of /proc/stat (the kernel prints one per
// online CPU).
func onlineFromStat(fs *kernel.FS) (cpuset.Set, error) {
	st, err := fs.StatCPUs()
	if err != nil {
		return cpuset.Set{}, err
	}
	var ids []int
	for _, c := range st {
		ids = append(ids, c.CPU)
	}
	if len(ids) == 0 {
		return cpuset.Set{}, errors.New("/proc/stat: no cpuN lines")
	}
	return cpuset.Of(ids...), nil
}

// onlineFromInterrupts reads the CPU columns of the /proc/interrupts header.
func onlineFromInterrupts(fs *kernel.FS) (cpuset.Set, error) {
	in, err := fs.Interrupts()
	if err != nil {
		return cpuset.Set{}, err
	}
	return cpuset.Of(in.CPUs...), nil
}
