package main

import (
	"io"

	"github.com/spf13/cobra"
)

// inventoryOptions are inventory's flags.
type inventoryOptions struct {
	g            *globalFlags
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
		RunE: func(cmd *cobra.Command, args []string) error { return o.run(cmd.OutOrStdout()) },
	}
	addProbeManagedFlag(cmd, &o.probeManaged)
	return cmd
}

func (o *inventoryOptions) run(out io.Writer) error {
	fs, cleanup, err := o.g.openFS()
	if err != nil {
		return err
	}
	defer cleanup()
	h, err := readHost(fs, o.probeManaged)
	if err != nil {
		return err
	}
	if o.g.json {
		return writeJSON(out, h)
	}
	writeInventory(out, h, o.g.sourceName())
	return nil
}
