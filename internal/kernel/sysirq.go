package kernel

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// SysIRQ is what /sys/kernel/irq/N/ says about one interrupt (kernels with
// CONFIG_SPARSE_IRQ, 4.17 and later). Unlike /proc/interrupts it is one
// value per file, so names with spaces or commas cannot be misread, and it
// covers every possible CPU, offline ones included.
type SysIRQ struct {
	IRQ int
	// PerCPUCount is per_cpu_count: one count per possible CPU, in the order
	// of cpu_possible_mask (for_each_possible_cpu), so index i is the i-th
	// possible CPU, which is CPU i when the possible CPUs are 0..n-1.
	PerCPUCount []uint64
	ChipName    string   // chip_name: "IR-PCI-MSIX-0000:3e:00.0", "GICv3"
	HWIRQ       string   // hwirq: "39" ("" when the kernel prints none)
	Name        string   // name: the flow handler ("edge", "fasteoi"), often ""
	Type        string   // type: "edge" or "level"
	Actions     []string // actions: handler names, comma-separated in the file
	// Missing lists the files of the directory that could not be read, with why.
	Missing map[string]error
}

// sysIRQDir is the sysfs directory of per-IRQ attributes.
const sysIRQDir = "sys/kernel/irq"

// SysIRQDir is /sys/kernel/irq, relative to the root, for messages that
// name it (HasSysIRQ tells whether it exists).
const SysIRQDir = sysIRQDir

// SysIRQPath is the directory of one IRQ's attributes
// ("sys/kernel/irq/36"), which ReadSysIRQ reads.
func SysIRQPath(irq int) string { return fmt.Sprintf("%s/%d", sysIRQDir, irq) }

// HasSysIRQ reports whether /sys/kernel/irq exists below the root.
func (f *FS) HasSysIRQ() bool { return f.Exists(sysIRQDir) }

// SysIRQNumbers lists the IRQ numbers under /sys/kernel/irq, ascending.
func (f *FS) SysIRQNumbers() ([]int, error) {
	names, err := f.readDir(sysIRQDir)
	if err != nil {
		return nil, err
	}
	var out []int
	for _, n := range names {
		if v, err := strconv.Atoi(n); err == nil && v >= 0 {
			out = append(out, v)
		}
	}
	sort.Ints(out)
	return out, nil
}

// ReadSysIRQ reads /sys/kernel/irq/<irq>/. It fails only when the directory
// does not exist or per_cpu_count is garbled; other unreadable files are
// listed in Missing and left empty.
func (f *FS) ReadSysIRQ(irq int) (*SysIRQ, error) {
	dir := fmt.Sprintf("%s/%d", sysIRQDir, irq)
	if !f.Exists(dir) {
		return nil, fmt.Errorf("/%s: no such directory", dir)
	}
	s := &SysIRQ{IRQ: irq}
	read := func(name string) string {
		v, err := f.readString(dir + "/" + name)
		if err != nil {
			if s.Missing == nil {
				s.Missing = map[string]error{}
			}
			s.Missing[name] = err
		}
		return v
	}
	s.ChipName = read("chip_name")
	s.HWIRQ = read("hwirq")
	s.Name = read("name")
	s.Type = read("type")
	s.Actions = parseSysIRQActions(read("actions"))
	if pc := read("per_cpu_count"); pc != "" {
		counts, err := parsePerCPUCount(pc)
		if err != nil {
			return nil, fmt.Errorf("/%s/per_cpu_count: %w", dir, err)
		}
		s.PerCPUCount = counts
	}
	return s, nil
}

// parsePerCPUCount parses per_cpu_count ("0,41924").
func parsePerCPUCount(s string) ([]uint64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, fmt.Errorf("empty per_cpu_count")
	}
	n := strings.Count(s, ",") + 1
	if n > maxInterruptColumns {
		return nil, fmt.Errorf("%d counts, over the limit of %d (one per possible CPU; NR_CPUS is at most 8192)", n, maxInterruptColumns)
	}
	out := make([]uint64, 0, n)
	for i, f := range strings.Split(s, ",") {
		v, ok := parseDec([]byte(f), ^uint64(0))
		if !ok {
			return nil, fmt.Errorf("count %d (%q) is not a number", i, f)
		}
		out = append(out, v)
	}
	return out, nil
}

// parseSysIRQActions splits the actions file ("eth0-TxRx-0" or
// "PCIe PME,pciehp"; the kernel joins names with a bare comma).
func parseSysIRQActions(s string) []string {
	var out []string
	for _, a := range strings.Split(s, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// Trigger is the flow-handler name as /proc/interrupts prints it after the
// hwirq ("edge", "fasteoi"), falling back to the trigger type.
func (s *SysIRQ) Trigger() string {
	if s.Name != "" {
		return s.Name
	}
	return s.Type
}

// CrossCheck compares this with the same IRQ's /proc/interrupts row and
// describes each disagreement in chip or actions (nil when they agree).
// /proc/interrupts joins actions with ", " and sysfs with ",", so a name
// containing a comma can be split differently; chip names are compared as
// printed.
func (s *SysIRQ) CrossCheck(l *InterruptLine) []string {
	var out []string
	if s.ChipName != "" && l.Chip != "" && s.ChipName != l.Chip {
		out = append(out, fmt.Sprintf("chip: /sys/kernel/irq says %q, /proc/interrupts %q", s.ChipName, l.Chip))
	}
	if _, ok := s.Missing["actions"]; !ok && strings.Join(s.Actions, ",") != strings.Join(l.Actions, ",") {
		out = append(out, fmt.Sprintf("actions: /sys/kernel/irq says %q, /proc/interrupts %q", s.Actions, l.Actions))
	}
	return out
}
