package kernel

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// IRQDebugDir holds one file per IRQ with the kernel's own view of it,
// including the IRQD_* state bits, when debugfs is mounted and the kernel has
// CONFIG_GENERIC_IRQ_DEBUGFS (kernel/irq/debugfs.c, 4.14 and later). Reading
// it needs root: /sys/kernel/debug is mode 0700.
const IRQDebugDir = "sys/kernel/debug/irq/irqs"

// IRQDebugPath is the debugfs file of an IRQ.
func IRQDebugPath(irq int) string { return fmt.Sprintf("%s/%d", IRQDebugDir, irq) }

// IRQDebug is the part of /sys/kernel/debug/irq/irqs/N irqpilot uses: the
// irq_data state word ("dstate:") and the names of its bits the kernel
// printed under it.
type IRQDebug struct {
	DState      uint32
	DStateFlags []string // "IRQD_ACTIVATED", "IRQD_AFFINITY_MANAGED", …
}

// Has reports whether the kernel listed the named dstate bit.
func (d *IRQDebug) Has(flag string) bool {
	for _, f := range d.DStateFlags {
		if f == flag {
			return true
		}
	}
	return false
}

// AffinityManaged reports whether the kernel manages the IRQ's affinity
// (IRQD_AFFINITY_MANAGED: spread by the driver with
// pci_alloc_irq_vectors_affinity); writes to its smp_affinity fail.
func (d *IRQDebug) AffinityManaged() bool { return d.Has("IRQD_AFFINITY_MANAGED") }

// RefusesAffinity reports whether a write to the IRQ's smp_affinity would be
// refused (EIO, EPERM on newer kernels): irq_can_set_affinity_usr() fails for
// managed IRQs and for those that cannot be balanced, per-CPU
// (IRQD_PER_CPU) or marked IRQD_NO_BALANCING.
func (d *IRQDebug) RefusesAffinity() bool {
	return d.AffinityManaged() || d.Has("IRQD_PER_CPU") || d.Has("IRQD_NO_BALANCING")
}

// parseIRQDebug parses the text of /sys/kernel/debug/irq/irqs/N, as printed
// by irq_debug_show():
//
//	handler:  handle_edge_irq
//	device:   0000:06:00.0
//	status:   0x00004000
//	istate:   0x00004000
//	ddepth:   0
//	wdepth:   0
//	dstate:   0x31608200
//	            IRQD_ACTIVATED
//	            IRQD_AFFINITY_MANAGED
//	node:     0
//	affinity: 0-1
//	…
//
// Bit names follow their state word, indented by 12 spaces; the chip's
// "flags:" further down are IRQCHIP_* bits and not read. Only the dstate word
// is required; name is used in errors.
func parseIRQDebug(name string, data []byte) (*IRQDebug, error) {
	var d IRQDebug
	found := false
	inDState := false
	for i, line := range strings.Split(string(data), "\n") {
		if line == "" {
			continue
		}
		if line[0] == ' ' || line[0] == '\t' {
			if inDState {
				f := strings.TrimSpace(line)
				if strings.ContainsAny(f, " \t:") {
					return nil, &ParseError{File: name, Line: i + 1, Msg: fmt.Sprintf("%q under dstate is not a flag name", f)}
				}
				d.DStateFlags = append(d.DStateFlags, f)
			}
			continue
		}
		inDState = false
		key, val, ok := strings.Cut(line, ":")
		if !ok || key != "dstate" {
			continue
		}
		if found {
			return nil, &ParseError{File: name, Line: i + 1, Msg: "second dstate line"}
		}
		v := strings.TrimSpace(val)
		n, err := strconv.ParseUint(strings.TrimPrefix(v, "0x"), 16, 32)
		if err != nil || !strings.HasPrefix(v, "0x") {
			return nil, &ParseError{File: name, Line: i + 1, Msg: fmt.Sprintf("dstate %q is not a hex word", v)}
		}
		d.DState = uint32(n)
		found, inDState = true, true
	}
	if !found {
		return nil, &ParseError{File: name, Line: 0, Msg: "no dstate line"}
	}
	return &d, nil
}

// StatIRQDebug reports whether IRQDebugDir can be read: nil when it can, an
// error naming the directory (not mounted, not root) when not.
//
// Neither this nor ReadIRQDebug is recorded for a capture: captures refuse
// /sys/kernel/debug (internal/capture), so what is learned from it is saved
// as a synthetic file by the caller instead.
func (f *FS) StatIRQDebug() error {
	_, err := os.Stat(f.Path(IRQDebugDir))
	return f.kernelErr(err)
}

// ReadIRQDebug reads and parses /sys/kernel/debug/irq/irqs/N (unrecorded,
// see StatIRQDebug). It only reads: the file's write side (injecting an
// interrupt) is never used.
func (f *FS) ReadIRQDebug(irq int) (*IRQDebug, error) {
	p := IRQDebugPath(irq)
	b, err := f.readOnDisk(f.Path(p))
	if err != nil {
		return nil, f.kernelErr(err)
	}
	return parseIRQDebug("/"+p, b)
}
