package kernel

import (
	"fmt"
	"sort"
	"strconv"

	"github.com/irqpilot/irqpilot/internal/cpuset"
)

// IRQAffinityListPath is the writable cpulist of an IRQ's allowed CPUs.
func IRQAffinityListPath(irq int) string { return fmt.Sprintf("proc/irq/%d/smp_affinity_list", irq) }

// IRQEffectiveAffinityListPath is the cpulist of the CPUs an IRQ is actually
// delivered to (read-only; 4.15 and later).
func IRQEffectiveAffinityListPath(irq int) string {
	return fmt.Sprintf("proc/irq/%d/effective_affinity_list", irq)
}

// IRQNodePath is the NUMA node of an IRQ's descriptor.
func IRQNodePath(irq int) string { return fmt.Sprintf("proc/irq/%d/node", irq) }

// ReadIRQAffinity reads /proc/irq/N/smp_affinity_list, falling back to the
// hex mask smp_affinity (kernels before 2.6.36 have no _list file).
func (f *FS) ReadIRQAffinity(irq int) (cpuset.Set, error) {
	return f.readCPUList(IRQAffinityListPath(irq), fmt.Sprintf("proc/irq/%d/smp_affinity", irq))
}

// ReadIRQEffectiveAffinity reads /proc/irq/N/effective_affinity_list,
// falling back to effective_affinity.
func (f *FS) ReadIRQEffectiveAffinity(irq int) (cpuset.Set, error) {
	return f.readCPUList(IRQEffectiveAffinityListPath(irq), fmt.Sprintf("proc/irq/%d/effective_affinity", irq))
}

// ReadIRQNode reads /proc/irq/N/node (-1 is NUMA_NO_NODE).
func (f *FS) ReadIRQNode(irq int) (int, error) {
	p := IRQNodePath(irq)
	s, err := f.readString(p)
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < -1 {
		return 0, fmt.Errorf("/%s: %q is not a node number", p, s)
	}
	return n, nil
}

func (f *FS) readCPUList(list, mask string) (cpuset.Set, error) {
	s, err := f.readString(list)
	if err == nil {
		set, perr := cpuset.Parse(s)
		if perr != nil {
			return cpuset.Set{}, fmt.Errorf("/%s: %w", list, perr)
		}
		return set, nil
	}
	m, merr := f.readString(mask)
	if merr != nil {
		return cpuset.Set{}, err // report the _list file
	}
	set, perr := cpuset.ParseMask(m)
	if perr != nil {
		return cpuset.Set{}, fmt.Errorf("/%s: %w", mask, perr)
	}
	return set, nil
}

// ProcIRQDir is /proc/irq, relative to the root: the directory of the
// IRQs' placement files (IRQAffinityListPath and the others).
const ProcIRQDir = "proc/irq"

// HasProcIRQ reports whether /proc/irq exists below the root (a capture of
// the topology alone has none).
func (f *FS) HasProcIRQ() bool { return f.Exists(ProcIRQDir) }

// ProcIRQs lists the IRQ numbers that have a /proc/irq/N directory,
// ascending.
func (f *FS) ProcIRQs() ([]int, error) {
	names, err := f.readDir("proc/irq")
	if err != nil {
		return nil, err
	}
	var out []int
	for _, n := range names {
		if irq, err := strconv.Atoi(n); err == nil {
			out = append(out, irq)
		}
	}
	sort.Ints(out)
	return out, nil
}

// BootID identifies the running boot (/proc/sys/kernel/random/boot_id);
// "" when it cannot be read (a tree without it).
func (f *FS) BootID() string {
	b, err := f.readUnrecorded("proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return string(trimSpaceBytes(b))
}

func trimSpaceBytes(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == ' ' || b[len(b)-1] == 0) {
		b = b[:len(b)-1]
	}
	return b
}
