package host

import "github.com/irqpilot/irqpilot/internal/kernel"

// TEMPORARY placeholders, replaced by irqs.go, devices.go, irqbalance.go.
func readIRQs(fs *kernel.FS, h *Host, opts Options) error { return nil }
func readNICs(fs *kernel.FS, h *Host)                     {}
func readBlock(fs *kernel.FS, h *Host)                    {}
func classifyIRQs(h *Host)                                {}
func readIrqbalance(fs *kernel.FS, h *Host)               {}
