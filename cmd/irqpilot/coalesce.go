package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/irqpilot/irqpilot/internal/coalesce"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/kernel"
)

func newCoalesceCmd(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "coalesce",
		Short: "Show NIC interrupt coalescing; drive NVMe coalescing with vIC",
		Args:  subcommandArgs,
		RunE:  runGroup,
	}
	cmd.AddCommand(newCoalesceShowCmd(g), newCoalesceNVMeCmd(g))
	return cmd
}

// coalesceShowOptions are `coalesce show`'s flags.
type coalesceShowOptions struct {
	g *globalFlags
	input
	perQueue bool
}

// coalesceShowNIC is one NIC in `coalesce show --json` (field names are
// documented in docs/coalescing.md).
type coalesceShowNIC struct {
	Name     string         `json:"name"`
	Driver   string         `json:"driver"`
	Coalesce *host.Coalesce `json:"coalesce"`
	// CoalesceUnavailable says why Coalesce is null: the driver refused
	// ("operation not supported") or the snapshot holds no ethtool data.
	CoalesceUnavailable string         `json:"coalesce_unavailable,omitempty"`
	Channels            *host.Channels `json:"channels"`
	// Queues is per-queue coalescing (--per-queue, live only).
	Queues            []coalesce.QueueCoalesce `json:"queues,omitempty"`
	QueuesUnavailable string                   `json:"queues_unavailable,omitempty"`
}

// coalesceShowListJSON is `coalesce show --json`.
type coalesceShowListJSON struct {
	NICs []coalesceShowNIC `json:"nics"`
}

func newCoalesceShowCmd(g *globalFlags) *cobra.Command {
	o := &coalesceShowOptions{g: g}
	cmd := &cobra.Command{
		Use:   "show",
		Short: "List every NIC's interrupt coalescing settings (ethtool -c)",
		Args:  cobra.NoArgs,
		RunE:  runE(o),
	}
	cmd.Flags().BoolVar(&o.perQueue, "per-queue", false, "also read each queue's coalescing (ETHTOOL_PERQUEUE; live machine, root, drivers that support it)")
	return cmd
}

// complete opens the machine whose NICs are shown.
func (o *coalesceShowOptions) complete(*cobra.Command, []string) error { return o.open(o.g) }

func (o *coalesceShowOptions) run(_ context.Context, w, _ io.Writer) error {
	h, err := host.Read(o.fs, host.Options{})
	if err != nil {
		return err
	}
	nics := coalesceShow(o.fs, h, o.perQueue)
	if o.g.json {
		return writeJSON(w, coalesceShowListJSON{nics})
	}
	return writeCoalesceShow(w, nics, o.perQueue)
}

// coalesceShow lists each NIC's coalescing, and with perQueue each queue's.
func coalesceShow(fs *kernel.FS, h *host.Host, perQueue bool) []coalesceShowNIC {
	nics := make([]coalesceShowNIC, 0, len(h.NICs))
	for _, n := range h.NICs {
		e := coalesceShowNIC{Name: n.Name, Driver: n.Driver, Coalesce: n.Coalesce, Channels: n.Channels}
		if n.Coalesce == nil {
			e.CoalesceUnavailable = coalesceUnavailable(h, n.Name)
		}
		if perQueue {
			switch nq := max(len(n.RxQueues), len(n.TxQueues)); {
			case !fs.IsLive():
				e.QueuesUnavailable = "per-queue coalescing is read live only (not captured in snapshots)"
			case nq == 0:
				e.QueuesUnavailable = "no queues in sysfs"
			default:
				qs := make([]int, min(nq, coalesce.MaxQueues))
				for i := range qs {
					qs[i] = i
				}
				var err error
				if e.Queues, err = coalesce.PerQueueCoalesce(n.Name, qs); err != nil {
					e.QueuesUnavailable = err.Error()
				}
			}
		}
		nics = append(nics, e)
	}
	return nics
}

// coalesceUnavailable finds why host.Read has no coalescing for NIC name.
func coalesceUnavailable(h *host.Host, name string) string {
	for _, u := range h.Unavailable {
		switch u.What {
		case "nic " + name + " coalesce", "nic " + name + " channels and coalescing", "nic channels and coalescing":
			return fmt.Sprintf("%s (%s)", u.Reason, u.Path)
		}
	}
	return "not read"
}

// writeCoalesceShow prints the NICs as a table, then why any lack values.
func writeCoalesceShow(w io.Writer, nics []coalesceShowNIC, perQueue bool) error {
	if len(nics) == 0 {
		fmt.Fprintln(w, "no network interfaces found")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	header := false
	head := "NIC\tDRIVER\tRX-USECS\tRX-FRAMES\tTX-USECS\tTX-FRAMES\tADAPTIVE-RX\tADAPTIVE-TX\tQUEUES"
	row := func(name, driver string, c *host.Coalesce, q string) {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%s\t%s\t%s\n", name, driver, c.RxUsecs, c.RxFrames, c.TxUsecs, c.TxFrames, onOff(c.AdaptiveRx), onOff(c.AdaptiveTx), q)
	}
	var missing []coalesceShowNIC
	for _, n := range nics {
		if n.Coalesce == nil {
			missing = append(missing, n)
			continue
		}
		if !header {
			fmt.Fprintln(tw, head)
			header = true
		}
		q := "-"
		if c := n.Channels; c != nil {
			q = fmt.Sprintf("rx %d tx %d combined %d", c.Rx, c.Tx, c.Combined)
		}
		row(n.Name, n.Driver, n.Coalesce, q)
		for _, qc := range n.Queues {
			c := qc.Coalesce
			row(fmt.Sprintf("  queue %d", qc.Queue), "", &c, "")
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, n := range missing {
		fmt.Fprintf(w, "%s: coalescing unavailable: %s\n", n.Name, n.CoalesceUnavailable)
	}
	for _, n := range nics {
		if n.Coalesce != nil && n.QueuesUnavailable != "" {
			fmt.Fprintf(w, "%s: per-queue coalescing unavailable: %s\n", n.Name, n.QueuesUnavailable)
		}
	}
	if !perQueue {
		fmt.Fprintln(w, "settings are per device; --per-queue also reads each queue")
	}
	return nil
}
