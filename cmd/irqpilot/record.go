package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/load"
	"github.com/irqpilot/irqpilot/internal/outfile"
	"github.com/irqpilot/irqpilot/internal/record"
)

// recordOptions are record's flags.
type recordOptions struct {
	g *globalFlags
	input
	interval time.Duration
	duration time.Duration
	output   string
	hostname string
	verbose  bool
	cost     string
	// showProgress forces the progress line when stderr is not a terminal.
	showProgress bool
}

func newRecordCmd(g *globalFlags) *cobra.Command {
	o := &recordOptions{g: g}
	cmd := &cobra.Command{
		Use:   "record -o run.jsonl",
		Short: "Record per-CPU and per-IRQ counters for a later report",
		Long: `record samples the raw counters (/proc/stat, /proc/interrupts,
/proc/softirqs, /proc/net/softnet_stat) every --interval for --duration and
writes them as JSON Lines: first a header (host name, start time, interval and
the host inventory), then one line per sample. 'irqpilot report' turns one or
more recordings into charts.

Each line is written with a single write, so a recording whose recorder was
killed is still readable up to its last complete sample. SIGINT/SIGTERM stop
the recording cleanly. At the end record prints on stderr how much CPU time
it used itself (getrusage), as a percentage of one CPU.`,
		Args: cobra.NoArgs,
		RunE: runE(o),
	}
	f := cmd.Flags()
	f.DurationVar(&o.interval, "interval", time.Second, "sampling interval")
	f.DurationVar(&o.duration, "duration", 5*time.Minute, "how long to record (0: until interrupted)")
	f.StringVarP(&o.output, "output", "o", "", "recording `FILE` (.jsonl; - for stdout)")
	f.StringVar(&o.hostname, "hostname", "", "host name to put in the header (default: the machine's)")
	f.BoolVarP(&o.verbose, "verbose", "v", false, "report every sample and the CPU time split on stderr")
	addCostFlag(cmd, &o.cost)
	f.BoolVar(&o.showProgress, "progress", false, "show progress on stderr even when it is not a terminal")
	_ = cmd.MarkFlagRequired("output")
	return cmd
}

// cpuTime is this process's user+system CPU time so far.
func cpuTime() (user, sys time.Duration) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0, 0
	}
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
}

// complete opens the machine to record.
func (o *recordOptions) complete(*cobra.Command, []string) error { return o.open(o.g) }

func (o *recordOptions) validate() error {
	if o.interval <= 0 {
		return flagErrorf("--interval", "--interval %v: must be positive", o.interval)
	}
	if o.duration < 0 {
		return flagErrorf("--duration", "--duration %v: must not be negative", o.duration)
	}
	return validCost(o.cost, o.fs.IsLive())
}

// run records to --output ("-": stdout); progress and the cost go to
// errOut.
func (o *recordOptions) run(ctx context.Context, stdout, errOut io.Writer) (err error) {
	fs := o.fs

	// The inventory is read once, here, never per sample. No managed-IRQ
	// probe: recording writes nothing to the kernel.
	inv, err := host.Read(fs, host.Options{})
	if err != nil {
		return fmt.Errorf("host inventory: %w", err)
	}
	name := o.hostname
	if name == "" {
		name = inv.Hostname
	}
	if name == "" {
		name, _ = os.Hostname()
	}
	reader, stopCost, costNote, err := startCost(o.cost, fs)
	if err != nil {
		return err
	}
	defer stopCost()
	fmt.Fprintf(errOut, "irqpilot record: %s\n", costNote)
	sampler := load.NewSampler(fs)
	sampler.Cost = reader
	first, err := sampler.Sample()
	if err != nil {
		return err
	}
	// The file is opened once the inventory and the first sample are in
	// hand: a recording that cannot start leaves an earlier one whole.
	out := stdout
	if o.output != "-" {
		f, err := outfile.OpenStream(o.output)
		if err != nil {
			return err
		}
		defer func() {
			if cerr := f.Close(); err == nil && cerr != nil {
				err = fmt.Errorf("%s: %w", o.output, cerr)
			}
		}()
		out = f
	}
	w, err := record.NewWriter(out, record.Header{Host: name, Start: first.Time, Interval: int64(o.interval), Inventory: inv})
	if err != nil {
		return fmt.Errorf("%s: %w", o.output, err)
	}
	if err := w.Write(first); err != nil {
		return fmt.Errorf("%s: %w", o.output, err)
	}

	// Steady-state cost is measured from here: the one-off start (inventory,
	// process start-up) is reported separately.
	u0, s0 := cpuTime()
	t0 := time.Now()

	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if o.duration > 0 {
		var cancel context.CancelFunc
		// A little slack so that the last tick at exactly --duration is taken.
		ctx, cancel = context.WithTimeout(ctx, o.duration+o.interval/2)
		defer cancel()
	}
	ticker := time.NewTicker(o.interval)
	defer ticker.Stop()
	pr := newProgress(errOut, o.showProgress)
	if o.verbose {
		pr = nil // every sample is reported already
	}
	defer pr.done()
	want := -1
	if o.duration > 0 {
		want = int(o.duration/o.interval) + 1
	}
	var sampleErr error
loop:
	for w.Samples() != want {
		select {
		case <-ctx.Done():
			break loop
		case <-ticker.C:
		}
		s, err := sampler.Sample()
		if err != nil {
			// A transient read error loses one sample, not the recording.
			sampleErr = err
			fmt.Fprintf(errOut, "irqpilot record: sample %d: %v\n", w.Samples()+1, err)
			continue
		}
		if err := w.Write(s); err != nil {
			return fmt.Errorf("%s: %w", o.output, err)
		}
		if o.verbose {
			fmt.Fprintf(errOut, "irqpilot record: sample %d at %s\n", w.Samples(), s.Time.Format("15:04:05.000"))
		}
		if want > 0 {
			pr.show("record: %d of %d samples to %s, %s left", w.Samples(), want, o.output, (time.Duration(want-w.Samples()) * o.interval).Round(time.Second))
		} else {
			pr.show("record: %d samples to %s (until interrupted)", w.Samples(), o.output)
		}
	}
	pr.done()
	elapsed := time.Since(t0)
	u1, s1 := cpuTime()
	steady := (u1 - u0) + (s1 - s0)
	fmt.Fprintf(errOut, "irqpilot record: %d samples over %s to %s; own CPU time while sampling %s = %.3f%% of one CPU (total incl. start-up %s)\n",
		w.Samples(), elapsed.Round(time.Millisecond), o.output, steady.Round(time.Microsecond),
		100*steady.Seconds()/max(elapsed.Seconds(), 1e-9), (u1 + s1).Round(time.Microsecond))
	if o.verbose {
		fmt.Fprintf(errOut, "irqpilot record: user %s, system %s while sampling; %.1f µs per sample\n",
			(u1 - u0).Round(time.Microsecond), (s1 - s0).Round(time.Microsecond),
			float64(steady.Microseconds())/float64(max(w.Samples()-1, 1)))
	}
	if w.Samples() < 2 && sampleErr != nil {
		return sampleErr
	}
	return nil
}
