package host

import (
	"errors"
	"fmt"
	iofs "io/fs"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/kernel"
)

const (
	cpuDir  = "sys/devices/system/cpu"
	nodeDir = "sys/devices/system/node"
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
	online, onlineErr := readSet(fs, cpuDir+"/online")
	offline, offlineErr := readSet(fs, cpuDir+"/offline")
	if onlineErr != nil {
		src := ""
		switch {
		case len(dirs) > 0:
			online, offline = onlineFromDirs(fs, dirs, offline, offlineErr == nil)
			src = "cpuN directories"
		default:
			if s, err := onlineFromStat(fs); err == nil {
				online, src = s, "/proc/stat"
			} else if s, err := onlineFromInterrupts(fs); err == nil {
				online, src = s, "/proc/interrupts header"
			}
		}
		if src != "" {
			h.unavailable("cpu online list (derived from "+src+")", "/"+cpuDir+"/online", relErr(fs, onlineErr))
		} else {
			h.unavailable("cpu online list", "/"+cpuDir+"/online", relErr(fs, onlineErr))
		}
	}
	possible, possErr := readSet(fs, cpuDir+"/possible")
	present, presErr := readSet(fs, cpuDir+"/present")
	if possErr != nil {
		possible = online.Union(offline).Union(cpuset.Of(dirs...))
		if presErr == nil {
			possible = possible.Union(present)
		}
		if !isNotExist(possErr) {
			h.unavailable("cpu possible list", "/"+cpuDir+"/possible", relErr(fs, possErr))
		}
	}
	if presErr != nil {
		present = possible
		if !isNotExist(presErr) {
			h.unavailable("cpu present list", "/"+cpuDir+"/present", relErr(fs, presErr))
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
		base := fmt.Sprintf("%s/cpu%d", cpuDir, id)
		missing, bad := readCPUTopology(fs, base, &c, &issues, pkgMasks)
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
			c.Node = nodeFromCPUDir(fs, base)
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

// trimValue trims what surrounds a sysfs value: white space and NUL bytes
// (the topology files of 128-CPU aarch64 hosts on 5.15 kernels read
// "0\n\x00").
func trimValue(s string) string {
	return strings.TrimFunc(s, func(r rune) bool { return r == 0 || unicode.IsSpace(r) })
}

// readValue reads a one-value sysfs or proc file, trimmed by trimValue.
func readValue(fs *kernel.FS, rel string) (string, error) {
	s, err := fs.ReadString(rel)
	return trimValue(s), err
}

// readInt reads a file holding one decimal integer.
func readInt(fs *kernel.FS, rel string) (int, error) {
	s, err := readValue(fs, rel)
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("/%s: %q is not an integer", strings.TrimPrefix(rel, "/"), s)
	}
	return n, nil
}

// readSet reads a cpulist file. The kernel prints "(null)" (sometimes
// indented) for an unset nohz_full mask; that is the empty set.
func readSet(fs *kernel.FS, rel string) (cpuset.Set, error) {
	s, err := readValue(fs, rel)
	if err != nil {
		return cpuset.Set{}, err
	}
	if s == "(null)" {
		return cpuset.Set{}, nil
	}
	set, err := cpuset.Parse(s)
	if err != nil {
		return cpuset.Set{}, fmt.Errorf("/%s: %w", strings.TrimPrefix(rel, "/"), err)
	}
	return set, nil
}

// readMaskFile reads a hex mask file (thread_siblings, cpumap).
func readMaskFile(fs *kernel.FS, rel string) (cpuset.Set, error) {
	s, err := readValue(fs, rel)
	if err != nil {
		return cpuset.Set{}, err
	}
	set, err := cpuset.ParseMask(s)
	if err != nil {
		return cpuset.Set{}, fmt.Errorf("/%s: %w", strings.TrimPrefix(rel, "/"), err)
	}
	return set, nil
}

// cpuDirs lists the ids of the cpuN directories, ascending.
func cpuDirs(fs *kernel.FS) []int {
	names, err := fs.ReadDir(cpuDir)
	if err != nil {
		return nil
	}
	var ids []int
	for _, n := range names {
		if id, ok := numberedName(n, "cpu"); ok {
			ids = append(ids, id)
		}
	}
	sort.Ints(ids)
	return ids
}

// numberedName parses names such as "cpu12" or "node3".
func numberedName(name, prefix string) (int, bool) {
	rest, ok := strings.CutPrefix(name, prefix)
	if !ok || rest == "" {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	if err != nil || n < 0 || n > cpuset.MaxCPU || strconv.Itoa(n) != rest {
		return 0, false
	}
	return n, true
}

// onlineFromDirs derives the online set from the cpuN directories: a CPU is
// offline when its "online" file says 0 or the kernel's offline list names
// it; cpu0 usually has no "online" file (it cannot be unplugged).
func onlineFromDirs(fs *kernel.FS, dirs []int, offline cpuset.Set, haveOffline bool) (cpuset.Set, cpuset.Set) {
	var on, off []int
	for _, id := range dirs {
		v, err := readValue(fs, fmt.Sprintf("%s/cpu%d/online", cpuDir, id))
		switch {
		case err == nil && v == "0":
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

// readIsolation fills Isolated, NohzFull and ManagedIRQIsolated from sysfs,
// falling back to the kernel command line.
func readIsolation(fs *kernel.FS, h *Host) {
	t := &h.Topology
	cl, clErr := fs.Cmdline()
	var cmd bootIsolation
	if clErr == nil {
		var errs []error
		last := t.Possible.Max() // "N" in a boot cpulist: the last CPU id
		if last < 0 {
			last = t.Online.Union(t.Offline).Max()
		}
		cmd, errs = parseCmdlineIsolation(cl, last)
		for _, e := range errs {
			h.unavailable("kernel command line", "/proc/cmdline", e)
		}
	}
	t.ManagedIRQIsolated = cmd.managedIRQ

	var err error
	if t.Isolated, err = readSet(fs, cpuDir+"/isolated"); err != nil {
		if clErr == nil {
			t.Isolated = cmd.domain
		}
		if clErr != nil || !isNotExist(err) {
			h.unavailable("isolated cpus", "/"+cpuDir+"/isolated", relErr(fs, err))
		}
	}
	// nohz_full is absent on kernels without CONFIG_NO_HZ_FULL, where the
	// command line is also ineffective; we still report its intent.
	if t.NohzFull, err = readSet(fs, cpuDir+"/nohz_full"); err != nil {
		if clErr == nil {
			t.NohzFull = cmd.nohzFull
		}
		if clErr != nil || !isNotExist(err) {
			h.unavailable("nohz_full cpus", "/"+cpuDir+"/nohz_full", relErr(fs, err))
		}
	}
}

// bootIsolation is what the kernel command line asks for.
type bootIsolation struct {
	domain, managedIRQ, nohzFull cpuset.Set
}

// parseCmdlineIsolation reads isolcpus= and nohz_full= the way the kernel's
// housekeeping_isolcpus_setup does: leading flags "nohz,", "domain,",
// "managed_irq," select what is isolated; no flag means "domain". Arguments
// after "--" belong to init and are ignored; a later parameter overrides an
// earlier one of the same name. last is the highest CPU id, for "N".
func parseCmdlineIsolation(cmdline []kernel.CmdlineParam, last int) (bootIsolation, []error) {
	var b bootIsolation
	var errs []error
	for _, p := range cmdline {
		if !p.HasValue {
			continue
		}
		val := p.Value
		switch p.Name {
		case "isolcpus":
			var domain, managed, nohz bool
			rest := val
			for {
				flag, after, found := strings.Cut(rest, ",")
				if !found || flag == "" || !isAlpha(flag) {
					break
				}
				switch flag {
				case "domain":
					domain = true
				case "managed_irq":
					managed = true
				case "nohz":
					nohz = true
				default:
					errs = append(errs, fmt.Errorf("isolcpus=%s: unknown flag %q", val, flag))
				}
				rest = after
			}
			set, err := cpuset.ParseWithLast(rest, last)
			if err != nil {
				errs = append(errs, fmt.Errorf("isolcpus=%s: %w", val, err))
				continue
			}
			if !domain && !managed && !nohz {
				domain = true
			}
			b.domain, b.managedIRQ = cpuset.Set{}, cpuset.Set{}
			if domain {
				b.domain = set
			}
			if managed {
				b.managedIRQ = set
			}
			if nohz {
				b.nohzFull = b.nohzFull.Union(set)
			}
		case "nohz_full":
			set, err := cpuset.ParseWithLast(val, last)
			if err != nil {
				errs = append(errs, fmt.Errorf("nohz_full=%s: %w", val, err))
				continue
			}
			b.nohzFull = b.nohzFull.Union(set)
		}
	}
	return b, errs
}

func isAlpha(s string) bool {
	for _, r := range s {
		if (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') && r != '_' {
			return false
		}
	}
	return true
}

// readNodes fills h.Topology.Nodes from nodeN/cpulist (or cpumap) and
// returns the CPU → node map. Nodes without CPUs are kept with an empty set.
func readNodes(fs *kernel.FS, h *Host) map[int]int {
	t := &h.Topology
	nodeOf := map[int]int{}
	names, err := fs.ReadDir(nodeDir)
	if err != nil {
		h.unavailable("numa nodes", "/"+nodeDir, relErr(fs, err))
		return nodeOf
	}
	var ids []int
	for _, n := range names {
		if id, ok := numberedName(n, "node"); ok {
			ids = append(ids, id)
		}
	}
	sort.Ints(ids)
	for _, id := range ids {
		base := fmt.Sprintf("%s/node%d", nodeDir, id)
		set, err := readSet(fs, base+"/cpulist")
		if err != nil {
			var merr error
			if set, merr = readMaskFile(fs, base+"/cpumap"); merr != nil {
				h.unavailable(fmt.Sprintf("numa node %d cpus", id), "/"+base+"/cpulist", relErr(fs, err))
				set = cpuset.Set{}
			}
		}
		t.Nodes = append(t.Nodes, Node{ID: id, CPUs: set})
		for _, c := range set.CPUs() {
			if _, dup := nodeOf[c]; !dup {
				nodeOf[c] = id
			}
		}
	}
	return nodeOf
}

// nodeFromCPUDir finds the nodeN link inside a CPU's directory (present
// for offline CPUs too, whose ids the nodes' cpulists leave out).
func nodeFromCPUDir(fs *kernel.FS, base string) int {
	names, err := fs.ReadDir(base)
	if err != nil {
		return -1
	}
	for _, n := range names {
		if id, ok := numberedName(n, "node"); ok {
			return id
		}
	}
	return -1
}

// readCPUTopology reads one CPU's topology and cache files. missing reports
// that the topology directory is absent (normal for offline CPUs); bad is
// the first garbled or unreadable id or cache file. Sibling and package-mask
// files are read from the first of the kernel's files that parses, and
// what could not be read of them goes to issues; the package mask, when one
// is readable, is stored in pkgMasks.
func readCPUTopology(fs *kernel.FS, base string, c *CPU, issues *fileIssues, pkgMasks map[int]cpuset.Set) (missing bool, bad error) {
	note := func(err error) {
		if err != nil && bad == nil {
			bad = err
		}
	}
	readID := func(name string) int {
		n, err := readInt(fs, base+"/topology/"+name)
		if err != nil {
			if !isNotExist(err) {
				note(relErr(fs, err))
			}
			return -1
		}
		return n
	}
	topo := base + "/topology"
	if _, err := fs.ReadDir(topo); err != nil {
		missing = true
	} else {
		c.Core = readID("core_id")
		c.Die = readID("die_id")
		c.Package = readID("physical_package_id")

		sib, from, fails := readFirstSet(fs, topo, siblingFiles)
		for _, f := range fails {
			issues.add(siblingsWhat(from), f.file, c.ID, relErr(fs, f.err))
		}
		if from == "" && len(fails) == 0 && c.Online {
			issues.add("cpu siblings", anyOf(siblingFiles), c.ID, errors.New("no sibling file, or all empty"))
		}
		c.Siblings = sib

		pkg, from, fails := readFirstSet(fs, topo, packageFiles)
		for _, f := range fails {
			issues.add(packageWhat(from), f.file, c.ID, relErr(fs, f.err))
		}
		if from != "" {
			pkgMasks[c.ID] = pkg
		}
	}
	l2, l3, err := readCaches(fs, base+"/cache")
	note(err)
	c.L2, c.L3 = l2, l3
	return missing, bad
}

// setFile is a per-CPU topology file holding a set of CPUs, as a cpulist or
// as a hex mask.
type setFile struct {
	name string
	mask bool
}

// siblingFiles are the files naming a CPU's SMT siblings, in the order they
// are tried: the cpulists first, then the masks; core_cpus* are the names
// since Linux 5.7, thread_siblings* the older ones (still provided).
var siblingFiles = []setFile{
	{"thread_siblings_list", false}, {"core_cpus_list", false},
	{"thread_siblings", true}, {"core_cpus", true},
}

// packageFiles name the CPUs of a CPU's package (package_cpus* since 5.7,
// core_siblings* before).
var packageFiles = []setFile{
	{"package_cpus_list", false}, {"core_siblings_list", false},
	{"package_cpus", true}, {"core_siblings", true},
}

// anyOf names the files as one path element: "{a,b,c}".
func anyOf(files []setFile) string {
	names := make([]string, len(files))
	for i, f := range files {
		names[i] = f.name
	}
	return "{" + strings.Join(names, ",") + "}"
}

func siblingsWhat(from string) string {
	if from == "" {
		return "cpu siblings"
	}
	return "cpu siblings (read from " + from + " instead)"
}

func packageWhat(from string) string {
	if from == "" {
		return "cpu package mask"
	}
	return "cpu package mask (read from " + from + " instead)"
}

// fileFailure is a file that exists but could not be read or parsed.
type fileFailure struct {
	file string
	err  error
}

// readFirstSet reads the first of files (in dir) that exists and holds a
// set. It returns the set, the name of the file it came from ("" when none
// did) and the files that exist but could not be read or parsed, in order.
// An empty file is skipped silently: the kernel never prints an empty
// sibling or package set (a CPU belongs to its own), but snapshots hold
// files that were not read as empty placeholders.
func readFirstSet(fs *kernel.FS, dir string, files []setFile) (cpuset.Set, string, []fileFailure) {
	var fails []fileFailure
	for _, f := range files {
		rel := dir + "/" + f.name
		v, err := readValue(fs, rel)
		if isNotExist(err) || (err == nil && v == "") {
			continue
		}
		var set cpuset.Set
		if err == nil {
			if f.mask {
				set, err = cpuset.ParseMask(v)
			} else {
				set, err = cpuset.Parse(v)
			}
			if err == nil && set.IsEmpty() {
				err = errors.New("no CPU set (a CPU always belongs to its own set)")
			}
			if err != nil {
				err = fmt.Errorf("/%s: %w", strings.TrimPrefix(rel, "/"), err)
			}
		}
		if err == nil {
			return set, f.name, fails
		}
		fails = append(fails, fileFailure{f.name, err})
	}
	return cpuset.Set{}, "", fails
}

// fileIssues gathers, per topology file and outcome, the CPUs whose copy of
// the file could not be read, so that a host with hundreds of CPUs gets one
// Unavailable entry per file, not one per CPU.
type fileIssues struct {
	order []string
	byKey map[string]*fileIssue
}

type fileIssue struct {
	what, file string
	cpus       []int
	first      error
}

func (fi *fileIssues) add(what, file string, cpu int, err error) {
	key := what + "\x00" + file
	if fi.byKey == nil {
		fi.byKey = map[string]*fileIssue{}
	}
	is, ok := fi.byKey[key]
	if !ok {
		is = &fileIssue{what: what, file: file, first: err}
		fi.byKey[key] = is
		fi.order = append(fi.order, key)
	}
	is.cpus = append(is.cpus, cpu)
}

// report adds one Unavailable entry per file and outcome: the file's path
// when one CPU is concerned, else a cpu* pattern with the CPUs listed and
// the first CPU's error (which names its file).
func (fi *fileIssues) report(fs *kernel.FS, h *Host) {
	for _, key := range fi.order {
		is := fi.byKey[key]
		if len(is.cpus) == 1 {
			h.unavailable(is.what, fmt.Sprintf("/%s/cpu%d/topology/%s", cpuDir, is.cpus[0], is.file), is.first)
			continue
		}
		h.unavailable(is.what, "/"+cpuDir+"/cpu*/topology/"+is.file,
			fmt.Errorf("CPUs %s: %w", cpuset.Of(is.cpus...), is.first))
	}
}

// packagesFromMasks replaces the package ids by ids derived from the
// package masks when physical_package_id cannot tell packages apart: it is
// -1 on s390 and on POWER guests, and old ia64 kernels report one id for
// CPUs of different packages. Each distinct mask then gets its lowest CPU
// as id, stable across reads; a CPU without a readable mask gets -1. When
// the ids are usable they are kept as the kernel gave them.
func packagesFromMasks(h *Host, masks map[int]cpuset.Set, issues *fileIssues) {
	cpus := h.Topology.CPUs
	var unknown []int              // online CPUs with physical_package_id -1 and a mask
	maskOf := map[int]cpuset.Set{} // package id → the first mask seen for it
	var clash string
	for _, c := range cpus {
		m, ok := masks[c.ID]
		if !ok || !c.Online {
			continue
		}
		if c.Package < 0 {
			unknown = append(unknown, c.ID)
			continue
		}
		if prev, seen := maskOf[c.Package]; !seen {
			maskOf[c.Package] = m
		} else if !prev.Equal(m) && clash == "" {
			clash = fmt.Sprintf("package id %d is reported for CPUs of different packages (%s and %s)", c.Package, prev, m)
		}
	}
	if len(unknown) == 0 && clash == "" {
		return
	}
	var noMask []int
	for i := range cpus {
		c := &cpus[i]
		if m, ok := masks[c.ID]; ok {
			c.Package = m.Min()
			continue
		}
		if c.Online {
			noMask = append(noMask, c.ID)
		}
		c.Package = -1
	}
	reason := clash
	if reason == "" {
		reason = fmt.Sprintf("physical_package_id is -1 for CPUs %s", cpuset.Of(unknown...))
	}
	h.unavailable("cpu package ids (derived from package masks: lowest CPU of each)",
		"/"+cpuDir+"/cpu*/topology/physical_package_id", errors.New(reason))
	for _, id := range noMask {
		issues.add("cpu package", anyOf(packageFiles), id, errors.New("no readable package mask: package unknown"))
	}
}

// readCaches returns the CPUs sharing the CPU's level-2 and level-3 data or
// unified caches (instruction caches are ignored).
func readCaches(fs *kernel.FS, dir string) (l2, l3 cpuset.Set, bad error) {
	names, err := fs.ReadDir(dir)
	if err != nil {
		return l2, l3, nil // no cache directory: unknown, not an error
	}
	for _, n := range names {
		if _, ok := numberedName(n, "index"); !ok {
			continue
		}
		idx := dir + "/" + n
		level, err := readInt(fs, idx+"/level")
		if err != nil {
			if bad == nil && !isNotExist(err) {
				bad = err
			}
			continue
		}
		if level != 2 && level != 3 {
			continue
		}
		if typ, err := readValue(fs, idx+"/type"); err == nil && typ == "Instruction" {
			continue
		}
		set, err := readSet(fs, idx+"/shared_cpu_list")
		if isNotExist(err) {
			set, err = readMaskFile(fs, idx+"/shared_cpu_map")
		}
		if err != nil {
			if bad == nil {
				bad = err
			}
			continue
		}
		if level == 2 {
			l2 = l2.Union(set)
		} else {
			l3 = l3.Union(set)
		}
	}
	return l2, l3, bad
}
