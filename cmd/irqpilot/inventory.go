package main

import (
	"context"
	"io"

	"github.com/spf13/cobra"
)

// inventoryOptions are inventory's flags.
type inventoryOptions struct {
	g *globalFlags
	input
	probeManaged bool
}

func newInventoryCmd(g *globalFlags) *cobra.Command {
	o := &inventoryOptions{g: g}
	cmd := &cobra.Command{
		Use:   "inventory",
		Short: "Show CPUs, NICs, block devices and every IRQ with where it may and does run",
		Long: `inventory reads the machine (or --root DIR, or --snapshot FILE) and prints
its interrupt topology: CPUs by NUMA node, package and core with their SMT
siblings; each NIC with its queues, their IRQs, where each IRQ is allowed to
run (smp_affinity_list), where it actually lands (effective_affinity_list and
counts) and the RPS/XPS steering of each queue; block devices with their
hardware queues; the other IRQs by class; irqbalance; and what could not be
read. Nothing is written: whether the kernel manages an IRQ comes from
debugfs (/sys/kernel/debug/irq/irqs) or apply's record, else it is unknown;
--probe-managed finds out by writing each IRQ's current affinity back.

--json prints the full model (per-CPU counts included) with stable field
names, documented in docs/json.md.`,
		Args: cobra.NoArgs,
		RunE: runE(o),
	}
	addProbeManagedFlag(cmd, &o.probeManaged)
	return cmd
}

// complete opens the machine inventory reads.
func (o *inventoryOptions) complete(*cobra.Command, []string) error { return o.open(o.g) }

func (o *inventoryOptions) run(_ context.Context, out, _ io.Writer) error {
	h, err := readHost(o.fs, o.probeManaged)
	if err != nil {
		return err
	}
	if o.g.json {
		return writeJSON(out, h)
	}
	writeInventory(out, h, o.g.sourceName())
	return nil
}
