package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/kernel/bpfcost"
	"github.com/irqpilot/irqpilot/internal/load"
)

// Values of --cost (top, doctor, record, plan).
const (
	costAuto   = "auto"
	costBPF    = "bpf"
	costCounts = "counts"
)

// costMeasuredNote is startCost's line when the collector runs.
const costMeasuredNote = "interrupt cost: measured with eBPF"

// addCostFlag adds --cost, bound to dst.
func addCostFlag(c *cobra.Command, dst *string) {
	c.Flags().StringVar(dst, "cost", costAuto,
		"how interrupt time is known: bpf (measure with eBPF, root; fail if it cannot), counts (estimate from /proc counts), auto (bpf when possible, else counts with a note why)")
}

// startCost starts the eBPF collector as --cost asks. It returns the reader
// to give the sampler (nil: counts), a function that unloads the collector,
// and one line saying what is used and, on a fallback, why.
func startCost(mode string, fs *kernel.FS) (load.CostReader, func(), string, error) {
	none := func() {}
	if err := validCost(mode, fs.IsLive()); err != nil {
		return nil, nil, "", err
	}
	switch {
	case mode == costCounts:
		return nil, none, "interrupt cost: estimated from counts (--cost=counts)", nil
	case !fs.IsLive():
		return nil, none, "interrupt cost: estimated from counts (captured state has no eBPF measurements)", nil
	}
	c, err := bpfcost.Open()
	if err != nil {
		if mode == costBPF {
			return nil, nil, "", fmt.Errorf("--cost=bpf: eBPF collector unavailable: %w (run as root, or use --cost=counts)", err)
		}
		return nil, none, "interrupt cost: estimated from counts, eBPF unavailable: " + err.Error(), nil
	}
	return c, func() { _ = c.Close() }, costMeasuredNote, nil
}

// validCost refuses a --cost that cannot be used on the live machine
// (live) or on captured state, without starting the collector (startCost
// starts it when a measurement begins).
func validCost(mode string, live bool) error {
	switch mode {
	case costAuto, costBPF, costCounts:
	default:
		return flagErrorf("--cost", "--cost %q: want bpf, counts or auto", mode)
	}
	if !live && mode == costBPF {
		return flagErrorf("--cost", "--cost=bpf measures the live machine; captured state (--root/--snapshot) has only counts: use --cost=counts or auto")
	}
	return nil
}
