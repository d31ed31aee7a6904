package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/irqpilot/irqpilot/internal/coalesce"
)

// coalesceNVMeOptions are `coalesce nvme`'s flags.
type coalesceNVMeOptions struct {
	g *globalFlags
	input
	dryRun    bool
	epoch     time.Duration
	count     int
	thresh    int
	trickle   int
	aggTime   int
	deviceDir string
}

func newCoalesceNVMeCmd(g *globalFlags) *cobra.Command {
	o := &coalesceNVMeOptions{g: g}
	cmd := &cobra.Command{
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
		RunE: runE(o),
	}
	f := cmd.Flags()
	f.BoolVar(&o.dryRun, "dry-run", true, "print decisions without sending commands (--dry-run=false to apply, needs root)")
	f.DurationVar(&o.epoch, "epoch", time.Second, "measurement epoch")
	f.IntVar(&o.count, "count", 5, "epochs to measure after the first sample (0: until interrupted)")
	f.IntVar(&o.thresh, "cif-threshold", 4, "coalescing off at or below this many commands in flight")
	f.IntVar(&o.trickle, "trickle-iops", 2000, "coalescing off below this many completions per second")
	f.IntVar(&o.aggTime, "aggregation-time", 1, "aggregation time when on, in 100 µs units (1-255)")
	f.StringVar(&o.deviceDir, "dev", "/dev", "directory holding the controllers' character devices")
	return cmd
}

// complete opens the machine whose controllers are driven.
func (o *coalesceNVMeOptions) complete(*cobra.Command, []string) error { return o.open(o.g) }

func (o *coalesceNVMeOptions) validate() error {
	if o.aggTime < 1 || o.aggTime > 255 {
		return flagErrorf("--aggregation-time", "--aggregation-time %d: want 1-255 (units of 100 µs)", o.aggTime)
	}
	for _, f := range []struct {
		name string
		bad  bool
	}{{"--cif-threshold", o.thresh < 1}, {"--epoch", o.epoch <= 0}, {"--count", o.count < 0}} {
		if f.bad {
			return flagErrorf(f.name, "--cif-threshold must be ≥ 1, --epoch > 0 and --count ≥ 0")
		}
	}
	return nil
}

func (o *coalesceNVMeOptions) run(_ context.Context, w, _ io.Writer) error {
	fs := o.fs
	if _, err := coalesce.ReadNVMe(fs); err != nil {
		if errors.Is(err, coalesce.ErrNoNVMe) {
			return &exitError{code: 1, err: err}
		}
		return err
	}
	ctl, err := coalesce.NewNVMeController(coalesce.NVMeControllerConfig{CIFThreshold: o.thresh, TrickleIOPS: o.trickle, AggTime: uint8(o.aggTime)})
	if err != nil {
		return err
	}
	// Checked after the controllers were read: a --root or --snapshot
	// without NVMe says so, with its own exit status, whatever --dry-run.
	if !o.dryRun && !fs.IsLive() {
		return fmt.Errorf("--dry-run=false only works on the live machine, not on --root/--snapshot")
	}
	enc := json.NewEncoder(w)
	last := time.Now()
	for i := 0; o.count == 0 || i <= o.count; i++ {
		if i > 0 {
			time.Sleep(o.epoch)
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
			if d.Changed && !o.dryRun {
				dev := o.deviceDir + "/" + d.Controller
				if _, err := coalesce.SendAdmin(dev, coalesce.SetCoalescingCmd(d.Setting)); err != nil {
					return err
				}
				applied = "sent"
			}
			if o.g.json {
				if err := enc.Encode(d); err != nil {
					return err
				}
				continue
			}
			action := "keep"
			if d.Changed {
				action = fmt.Sprintf("set features 08h cdw11=%#06x", d.CDW11)
				if o.dryRun {
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
