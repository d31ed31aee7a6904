package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/irqpilot/irqpilot/internal/coalesce"
	"github.com/irqpilot/irqpilot/internal/host"
)

var coalesceCmd = &cobra.Command{
	Use:   "coalesce",
	Short: "Show NIC interrupt coalescing; drive NVMe coalescing with vIC",
}

var coalesceShowCmd = &cobra.Command{
	Use:   "show",
	Short: "List every NIC's interrupt coalescing settings (ethtool -c)",
	Args:  cobra.NoArgs,
	RunE:  runCoalesceShow,
}

var nvmeFlags struct {
	dryRun   bool
	epoch    time.Duration
	count    int
	thresh   int
	trickle  int
	aggTime  int
	devicDir string
}

var coalesceNVMeCmd = &cobra.Command{
	Use:   "nvme",
	Short: "Set NVMe interrupt coalescing from commands in flight (vIC table)",
	Long: `Every epoch, reads each NVMe controller's commands in flight
(/sys/block/nvmeXnY/inflight, summed over namespaces) and completion rate
(/sys/block/nvmeXnY/stat), picks the aggregation threshold from the vIC
table (off at low CIF or low IOPS) and sends Set Features 08h (Interrupt
Coalescing) when the choice changes. --dry-run (default) only prints the
decisions and the encoded command. With --dry-run=false the last setting
sent stays on the controller after irqpilot exits; it is not journaled or
restored (set it back with --dry-run=false at low load, which turns
coalescing off, or with nvme-cli).`,
	Args: cobra.NoArgs,
	RunE: runCoalesceNVMe,
}

func init() {
	f := coalesceNVMeCmd.Flags()
	f.BoolVar(&nvmeFlags.dryRun, "dry-run", true, "print decisions without sending commands (--dry-run=false to apply, needs root)")
	f.DurationVar(&nvmeFlags.epoch, "epoch", time.Second, "measurement epoch")
	f.IntVar(&nvmeFlags.count, "count", 5, "epochs to measure after the first sample (0: until interrupted)")
	f.IntVar(&nvmeFlags.thresh, "cif-threshold", 4, "coalescing off at or below this many commands in flight")
	f.IntVar(&nvmeFlags.trickle, "trickle-iops", 2000, "coalescing off below this many completions per second")
	f.IntVar(&nvmeFlags.aggTime, "aggregation-time", 1, "aggregation time when on, in 100 µs units (1-255)")
	f.StringVar(&nvmeFlags.devicDir, "dev", "/dev", "directory holding the controllers' character devices")
	coalesceCmd.AddCommand(coalesceShowCmd, coalesceNVMeCmd)
	rootCmd.AddCommand(coalesceCmd)
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

var coalesceShowPerQueue bool

func init() {
	coalesceShowCmd.Flags().BoolVar(&coalesceShowPerQueue, "per-queue", false, "also read each queue's coalescing (ETHTOOL_PERQUEUE; live machine, root, drivers that support it)")
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

func runCoalesceShow(cmd *cobra.Command, _ []string) error {
	fs, done, err := openFS()
	if err != nil {
		return err
	}
	defer done()
	h, err := host.Read(fs, host.Options{})
	if err != nil {
		return err
	}
	nics := make([]coalesceShowNIC, 0, len(h.NICs))
	for _, n := range h.NICs {
		e := coalesceShowNIC{Name: n.Name, Driver: n.Driver, Coalesce: n.Coalesce, Channels: n.Channels}
		if n.Coalesce == nil {
			e.CoalesceUnavailable = coalesceUnavailable(h, n.Name)
		}
		if coalesceShowPerQueue {
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
				if e.Queues, err = coalesce.PerQueueCoalesce(n.Name, qs); err != nil {
					e.QueuesUnavailable = err.Error()
				}
			}
		}
		nics = append(nics, e)
	}
	w := cmd.OutOrStdout()
	if global.json {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			NICs []coalesceShowNIC `json:"nics"`
		}{nics})
	}
	if len(nics) == 0 {
		fmt.Fprintln(w, "no network interfaces found")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	header := false
	head := "NIC\tDRIVER\tRX-USECS\tRX-FRAMES\tTX-USECS\tTX-FRAMES\tADAPTIVE-RX\tADAPTIVE-TX\tQUEUES"
	row := func(name, driver string, c *host.Coalesce, q string) {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%s\t%s\t%s\n", name, driver, c.RxUsecs, c.RxFrames, c.TxUsecs, c.TxFrames, coalesceOnOff(c.AdaptiveRx), coalesceOnOff(c.AdaptiveTx), q)
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
	if !coalesceShowPerQueue {
		fmt.Fprintln(w, "settings are per device; --per-queue also reads each queue")
	}
	return nil
}

func coalesceOnOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

func runCoalesceNVMe(cmd *cobra.Command, _ []string) error {
	fl := &nvmeFlags
	if fl.aggTime < 1 || fl.aggTime > 255 {
		return fmt.Errorf("--aggregation-time %d: want 1-255 (units of 100 µs)", fl.aggTime)
	}
	if fl.thresh < 1 || fl.epoch <= 0 || fl.count < 0 {
		return fmt.Errorf("--cif-threshold must be ≥ 1, --epoch > 0 and --count ≥ 0")
	}
	fs, done, err := openFS()
	if err != nil {
		return err
	}
	defer done()
	if _, err := coalesce.ReadNVMe(fs); err != nil {
		if errors.Is(err, coalesce.ErrNoNVMe) {
			return &exitError{code: 1, err: err}
		}
		return err
	}
	ctl, err := coalesce.NewNVMeController(coalesce.NVMeControllerConfig{CIFThreshold: fl.thresh, TrickleIOPS: fl.trickle, AggTime: uint8(fl.aggTime)})
	if err != nil {
		return err
	}
	if !fl.dryRun && !fs.IsLive() {
		return fmt.Errorf("--dry-run=false only works on the live machine, not on --root/--snapshot")
	}
	w := cmd.OutOrStdout()
	enc := json.NewEncoder(w)
	last := time.Now()
	for i := 0; fl.count == 0 || i <= fl.count; i++ {
		if i > 0 {
			time.Sleep(fl.epoch)
		}
		samples, err := coalesce.ReadNVMe(fs)
		if err != nil {
			return err
		}
		now := time.Now()
		ds := ctl.Step(samples, now.Sub(last).Nanoseconds())
		last = now
		for _, d := range ds {
			applied := ""
			if d.Changed && !fl.dryRun {
				dev := fl.devicDir + "/" + d.Controller
				if _, err := coalesce.SendAdmin(dev, coalesce.SetCoalescingCmd(d.Setting)); err != nil {
					return err
				}
				applied = "sent"
			}
			if global.json {
				if err := enc.Encode(d); err != nil {
					return err
				}
				continue
			}
			action := "keep"
			if d.Changed {
				action = fmt.Sprintf("set features 08h cdw11=%#06x", d.CDW11)
				if fl.dryRun {
					action += " (dry run)"
				} else {
					action += " " + applied
				}
			}
			fmt.Fprintf(w, "%s %s: %s — %s; %s\n", now.Format("15:04:05"), d.Controller, d.Setting, d.Reason, action)
		}
	}
	return nil
}
