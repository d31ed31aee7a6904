package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/gdamore/tcell/v2"
	"github.com/spf13/cobra"

	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/load"
	"github.com/irqpilot/irqpilot/internal/tui"
)

// topOptions are top's flags.
type topOptions struct {
	g *globalFlags
	input
	once     bool
	interval time.Duration
	irqs     int
	cost     string
}

func newTopCmd(g *globalFlags) *cobra.Command {
	o := &topOptions{g: g}
	cmd := &cobra.Command{
		Use:   "top",
		Short: "Live per-CPU interrupt and softirq load",
		Long: `top shows, refreshed every --interval, each CPU's time split into
user/system/irq/softirq/idle (as a stacked bar and numbers), its NET_RX, NET_TX
and BLOCK softirqs per second and softnet drops and time squeezes per second,
and the busiest IRQs with their device, queue, rate and the CPUs they fired on.

Keys: s cycles the CPU sort order (irq+soft, busy, net_rx, cpu); / filters the
IRQ list by name, device, class or number (Enter applies, Esc clears); q, Esc
or Ctrl-C quits. When not all CPUs fit, the busiest are listed and the rest
summarised in one line.

--once samples twice, --interval apart, and prints the result as text;
--json does the same as JSON (top-level "cpus" and "irqs"; see docs/json.md).`,
		Args: cobra.NoArgs,
		RunE: runE(o),
	}
	f := cmd.Flags()
	f.BoolVar(&o.once, "once", false, "print one interval as text and exit")
	f.DurationVar(&o.interval, "interval", time.Second, "sampling interval")
	f.IntVar(&o.irqs, "irqs", 20, "with --once: how many of the busiest IRQs to print")
	addCostFlag(cmd, &o.cost)
	return cmd
}

// topSession samples one machine and turns pairs of samples into frames.
type topSession struct {
	hostname string
	inv      *host.Host
	sampler  *load.Sampler
	prev     *load.Sample
}

func newTopSession(fs *kernel.FS, errOut io.Writer) (*topSession, error) {
	s := &topSession{sampler: load.NewSampler(fs)}
	// The host model names each IRQ's device and queue; read it once.
	inv, err := host.Read(fs, host.Options{})
	if err != nil {
		fmt.Fprintf(errOut, "irqpilot top: host model unavailable, IRQs shown without devices: %v\n", err)
	} else {
		s.inv, s.hostname = inv, inv.Hostname
	}
	if s.hostname == "" {
		s.hostname, _ = os.Hostname()
	}
	return s, nil
}

// next takes a sample and returns the frame since the previous one.
func (s *topSession) next() (*tui.Frame, error) {
	cur, err := s.sampler.Sample()
	if err != nil {
		return nil, err
	}
	prev := s.prev
	s.prev = cur
	if prev == nil {
		return nil, nil
	}
	l, err := load.Rates(prev, cur)
	if err != nil {
		return nil, err
	}
	return tui.NewFrame(s.hostname, s.inv, l), nil
}

// complete opens the machine top samples.
func (o *topOptions) complete(*cobra.Command, []string) error { return o.open(o.g) }

func (o *topOptions) validate() error {
	if o.interval <= 0 {
		return flagErrorf("--interval", "--interval %v: must be positive", o.interval)
	}
	return validCost(o.cost, o.fs.IsLive())
}

func (o *topOptions) run(_ context.Context, out, errOut io.Writer) error {
	fs := o.fs
	s, err := newTopSession(fs, errOut)
	if err != nil {
		return err
	}
	reader, stopCost, costNote, err := startCost(o.cost, fs)
	if err != nil {
		return err
	}
	defer stopCost()
	s.sampler.Cost = reader
	if reader == nil {
		fmt.Fprintf(errOut, "irqpilot top: %s\n", costNote)
	}
	if _, err := s.next(); err != nil {
		return err
	}
	if o.once || o.g.json {
		time.Sleep(o.interval)
		f, err := s.next()
		if err != nil {
			return fmt.Errorf("%w (a --root or --snapshot tree does not change between samples; top needs a live machine)", err)
		}
		return printFrame(out, f, o.g.json, o.irqs)
	}

	scr, err := tcell.NewScreen()
	if err != nil {
		return fmt.Errorf("top needs a terminal (use --once or --json otherwise): %w", err)
	}
	if err := scr.Init(); err != nil {
		return fmt.Errorf("top needs a terminal (use --once or --json otherwise): %w", err)
	}
	defer scr.Fini()
	ticker := time.NewTicker(o.interval)
	defer ticker.Stop()
	return tui.Run(scr, func() (*tui.Frame, error) {
		<-ticker.C
		return s.next()
	})
}

func printFrame(w io.Writer, f *tui.Frame, asJSON bool, irqs int) error {
	if asJSON {
		return writeJSON(w, f)
	}
	_, err := fmt.Fprintln(w, strings.Join(tui.FormatText(f, 100, irqs), "\n"))
	return err
}
