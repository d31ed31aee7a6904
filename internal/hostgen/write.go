package hostgen

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/irqpilot/irqpilot/internal/cpuset"
)

// Generate writes the tree for spec below dir (which may exist): proc/…,
// sys/… and irqpilot/managed.json, the synthetic file in which a capture
// records which IRQs refused an affinity write.
func Generate(dir string, spec Spec) error {
	L, err := Build(spec)
	if err != nil {
		return err
	}
	return L.Write(dir)
}

// SamplePair writes two trees of the same machine whose counters are d apart
// (dirA at spec.Counts.Elapsed, dirB at Elapsed + d).
func SamplePair(dirA, dirB string, spec Spec, d time.Duration) (*Layout, error) {
	L, err := Build(spec)
	if err != nil {
		return nil, err
	}
	if err := L.Write(dirA); err != nil {
		return nil, err
	}
	L2 := *L
	L2.Spec.Counts.Elapsed += d
	if err := L2.Write(dirB); err != nil {
		return nil, err
	}
	return L, nil
}

// writer collects the tree and then creates it with a few goroutines:
// creating ~10 000 small files is dominated by the file system's open/create
// latency, which overlaps well (a sequential write takes several times
// longer on a VM disk).
type writer struct {
	root  string
	dirs  map[string]bool
	files []op
	lacks map[string]bool // file names left out (Spec.Lacks)
}

type op struct {
	rel, content, link string
}

func (w *writer) mkdir(rel string) {
	for d := filepath.Clean(rel); d != "." && d != "/" && !w.dirs[d]; d = filepath.Dir(d) {
		w.dirs[d] = true
	}
}

func (w *writer) file(rel, content string) {
	if w.lacks[filepath.Base(rel)] {
		return
	}
	w.mkdir(filepath.Dir(rel))
	w.files = append(w.files, op{rel: rel, content: content})
}

func (w *writer) link(rel, target string) {
	w.mkdir(filepath.Dir(rel))
	w.files = append(w.files, op{rel: rel, link: target})
}

const workers = 8

// run creates the directories (parents first, level by level) and then the
// files and links.
func (w *writer) run() error {
	byDepth := map[int][]string{}
	maxDepth := 0
	for d := range w.dirs {
		n := strings.Count(d, "/")
		byDepth[n] = append(byDepth[n], d)
		maxDepth = max(maxDepth, n)
	}
	for n := 0; n <= maxDepth; n++ {
		dirs := byDepth[n]
		if err := parallel(len(dirs), func(i int) error {
			err := os.Mkdir(filepath.Join(w.root, dirs[i]), 0o755)
			if err != nil && !errors.Is(err, fs.ErrExist) {
				return err
			}
			return nil
		}); err != nil {
			return err
		}
	}
	return parallel(len(w.files), func(i int) error {
		o := w.files[i]
		p := filepath.Join(w.root, o.rel)
		if o.link != "" {
			os.Remove(p)
			return os.Symlink(o.link, p)
		}
		return os.WriteFile(p, []byte(o.content), 0o644)
	})
}

func parallel(n int, f func(i int) error) error {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	next := make(chan int)
	for k := 0; k < workers; k++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := f(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	return first
}

// ScratchDir makes a fresh directory for a generated tree, on a tmpfs
// (/dev/shm) when there is one: a VM disk under load can take many seconds
// for ~10 000 file creations that tmpfs does in a fraction of one. The
// returned function removes it.
func ScratchDir() (string, func(), error) {
	base := ""
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		base = "/dev/shm"
	}
	dir, err := os.MkdirTemp(base, "hostgen-")
	if err != nil && base != "" {
		dir, err = os.MkdirTemp("", "hostgen-")
	}
	if err != nil {
		return "", nil, err
	}
	return dir, func() { os.RemoveAll(dir) }, nil
}

// Write writes the layout's tree below dir.
func (L *Layout) Write(dir string) error {
	w := &writer{root: dir, dirs: map[string]bool{}, lacks: map[string]bool{}}
	for _, name := range L.Spec.Lacks {
		w.lacks[name] = true
	}
	L.writeProcMisc(w)
	L.writeCPUs(w)
	L.writeNodes(w)
	L.writeIRQs(w)
	L.writeNICs(w)
	L.writeNVMe(w)
	L.writeInterrupts(w)
	L.writeStat(w)
	L.writeSoftirqs(w)
	L.writeSoftnet(w)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("hostgen: %w", err)
	}
	if err := w.run(); err != nil {
		return fmt.Errorf("hostgen: %w", err)
	}
	return nil
}

func (L *Layout) mask(s cpuset.Set) string { return s.Mask(L.Spec.CPUs) }

func (L *Layout) at(base, rate uint64) uint64 { return At(base, rate, L.Spec.Counts.Elapsed) }

func (L *Layout) writeProcMisc(w *writer) {
	s := L.Spec
	w.file("proc/sys/kernel/hostname", s.Hostname+"\n")
	w.file("proc/sys/kernel/osrelease", s.Kernel+"\n")
	w.file("proc/sys/net/core/rps_sock_flow_entries", strconv.Itoa(s.RPSSockFlowEntries)+"\n")
	w.file("proc/sys/net/core/busy_read", "0\n")
	w.file("proc/sys/net/core/busy_poll", "0\n")
	cmd := "BOOT_IMAGE=/boot/vmlinuz-" + s.Kernel + " root=UUID=0b7c9a44-6f1d-4c2e-9e55-1d0f3c2a7b10 ro quiet"
	if !s.Isolated.IsEmpty() {
		if s.ManagedIRQ {
			cmd += " isolcpus=managed_irq,domain," + s.Isolated.String()
		} else {
			cmd += " isolcpus=" + s.Isolated.String()
		}
	}
	if !s.NohzFull.IsEmpty() {
		cmd += " nohz_full=" + s.NohzFull.String()
	}
	w.file("proc/cmdline", cmd+"\n")
	w.file("proc/irq/default_smp_affinity", L.mask(L.Possible)+"\n")

	var managed, movable []int
	for _, q := range L.IRQs {
		if q.Managed {
			managed = append(managed, q.Number)
		} else {
			movable = append(movable, q.Number)
		}
	}
	b, _ := json.Marshal(struct {
		Managed []int `json:"managed"`
		Movable []int `json:"movable"`
	}{managed, movable})
	w.file("irqpilot/managed.json", string(b)+"\n")
	// Every file the modelled kernel has is written: a feature probe may
	// take a missing file for a missing feature (Spec.Lacks).
	w.file("irqpilot/whole-tree", "")
}

const sysCPU = "sys/devices/system/cpu"

func (L *Layout) writeCPUs(w *writer) {
	s := L.Spec
	w.file(sysCPU+"/possible", L.Possible.String()+"\n")
	w.file(sysCPU+"/present", L.Possible.String()+"\n")
	w.file(sysCPU+"/online", L.Online.String()+"\n")
	w.file(sysCPU+"/offline", L.Offline.String()+"\n")
	w.file(sysCPU+"/isolated", s.Isolated.String()+"\n")
	w.file(sysCPU+"/nohz_full", s.NohzFull.String()+"\n")
	w.file(sysCPU+"/kernel_max", "8191\n")
	smt := "notsupported"
	if s.ThreadsPerCore > 1 {
		smt = "on"
	}
	w.file(sysCPU+"/smt/control", smt+"\n")
	for _, c := range L.CPUs {
		d := fmt.Sprintf("%s/cpu%d", sysCPU, c.ID)
		w.link(fmt.Sprintf("%s/node%d", d, c.Node), fmt.Sprintf("../../node/node%d", c.Node))
		if c.ID != 0 { // cpu0 cannot be unplugged and has no "online" file
			on := "0"
			if c.Online {
				on = "1"
			}
			w.file(d+"/online", on+"\n")
		}
		if !c.Online {
			continue // the kernel removes topology/ and cache/ of offline CPUs
		}
		t := d + "/topology/"
		w.file(t+"core_id", strconv.Itoa(c.Core)+"\n")
		w.file(t+"die_id", "0\n")
		w.file(t+"physical_package_id", strconv.Itoa(c.Package)+"\n")
		w.file(t+"thread_siblings_list", c.Siblings.String()+"\n")
		w.file(t+"core_cpus_list", c.Siblings.String()+"\n")
		// The files irqpilot reads, not every attribute sysfs has: each
		// file costs a create, and the tree has ~10 000 of them.
		caches := []struct {
			level  int
			typ    string
			shared cpuset.Set
		}{
			{1, "Data", c.Siblings}, {1, "Instruction", c.Siblings},
			{2, "Unified", c.Siblings}, {3, "Unified", c.L3},
		}
		for i, ca := range caches {
			x := fmt.Sprintf("%s/cache/index%d/", d, i)
			w.file(x+"level", strconv.Itoa(ca.level)+"\n")
			w.file(x+"type", ca.typ+"\n")
			w.file(x+"shared_cpu_list", ca.shared.String()+"\n")
		}
	}
}

func (L *Layout) writeNodes(w *writer) {
	const nd = "sys/devices/system/node"
	all := cpuset.Range(0, len(L.Nodes)-1).String()
	w.file(nd+"/possible", all+"\n")
	w.file(nd+"/online", all+"\n")
	var withCPU []int
	for n, cpus := range L.Nodes {
		if !cpus.IsEmpty() {
			withCPU = append(withCPU, n)
		}
		d := fmt.Sprintf("%s/node%d", nd, n)
		w.file(d+"/cpulist", cpus.String()+"\n")
		w.file(d+"/cpumap", L.mask(cpus)+"\n")
		var dist []string
		for m := range L.Nodes {
			v := 21
			if m == n {
				v = 10
			} else if L.nodePackage(m) == L.nodePackage(n) {
				v = 12
			}
			dist = append(dist, strconv.Itoa(v))
		}
		w.file(d+"/distance", strings.Join(dist, " ")+"\n")
	}
	for _, c := range L.CPUs {
		w.link(fmt.Sprintf("%s/node%d/cpu%d", nd, c.Node, c.ID), fmt.Sprintf("../../cpu/cpu%d", c.ID))
	}
	w.file(nd+"/has_cpu", cpuset.Of(withCPU...).String()+"\n")
}

func (L *Layout) nodePackage(n int) int { return n / (L.Spec.Nodes / L.Spec.Packages) }
