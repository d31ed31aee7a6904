package host

import (
	"testing"

	"github.com/irqpilot/irqpilot/internal/kernel"
)

// irqTable fills h.IRQs with number, actions and chip from the tree's
// proc/interrupts, the part of readIRQs the device code depends on, so these
// tests do not depend on the rest of the IRQ reader.
func irqTable(t *testing.T, kfs *kernel.FS) *Host {
	t.Helper()
	in, err := kfs.Interrupts()
	if err != nil {
		t.Fatal(err)
	}
	h := &Host{}
	for _, l := range in.Lines {
		if l.IRQ < 0 {
			continue
		}
		h.IRQs = append(h.IRQs, IRQ{Number: l.IRQ, Actions: l.Actions, Chip: l.Chip, HWIRQ: l.HWIRQ, Trigger: l.Trigger})
	}
	return h
}

// readDevices runs the device part of Read in Read's order.
func readDevices(kfs *kernel.FS, h *Host) {
	readNICs(kfs, h)
	readBlock(kfs, h)
	classifyIRQs(h)
	readIrqbalance(kfs, h)
}
