package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/irqpilot/irqpilot/internal/report"
	"github.com/irqpilot/irqpilot/internal/sim"
)

func newSimCmd(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sim",
		Short: "Simulate what this machine cannot show (interrupt coalescing)",
		Args:  subcommandArgs,
		RunE:  runGroup,
	}
	cmd.AddCommand(newSimCoalesceCmd(g))
	return cmd
}

// simCoalesceOptions are `sim coalesce`'s flags.
type simCoalesceOptions struct {
	g           *globalFlags
	seed        uint64
	preset      string
	cifs        []int
	policies    []string
	openRate    float64
	bursty      bool
	intrCost    time.Duration
	complCost   time.Duration
	ipiCost     time.Duration
	ipiThresh   time.Duration
	epoch       time.Duration
	warmup      int
	completions int
	mcc         int
	mccBackstop time.Duration
	midl        time.Duration
	cifThresh   int
	trickle     int
	adaptThr    int
	adaptDelta  time.Duration
	out         string
	formats     []string
}

// simCoalesceJSON is `sim coalesce --json`.
type simCoalesceJSON struct {
	Results []sim.Result `json:"results"`
}

func newSimCoalesceCmd(g *globalFlags) *cobra.Command {
	fl := &simCoalesceOptions{g: g}
	cmd := &cobra.Command{
		Use:   "coalesce",
		Short: "Compare coalescing policies on a simulated VM virtual disk",
		Long: `Runs a deterministic discrete-event simulation of a VM's virtual disk for
each policy (none, mcc, midl, mcc+midl, vic, dim, adaptive) and each number of
commands in flight, and prints IOPS, vCPU utilisation, IOPS per CPU,
interrupts per second and latency p50/p99. -o DIR also writes charts.
Every parameter and its default is explained in docs/coalescing.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return fl.run(cmd.OutOrStdout()) },
	}
	d := sim.DefaultConfig()
	pp := sim.DefaultPolicyParams()
	f := cmd.Flags()
	f.Uint64Var(&fl.seed, "seed", d.Seed, "random seed (same seed, same output)")
	f.StringVar(&fl.preset, "device", "ssd", "device preset: ssd or array")
	f.IntSliceVar(&fl.cifs, "cif", sim.DefaultCIFs, "closed-loop commands in flight to sweep")
	f.StringSliceVar(&fl.policies, "policies", sim.Policies, "policies to run")
	f.Float64Var(&fl.openRate, "rate", 0, "open loop: mean I/Os per second (replaces the CIF sweep)")
	f.BoolVar(&fl.bursty, "bursty", false, "open loop: on/off bursts (1 ms on at 4x rate, 3 ms off)")
	f.DurationVar(&fl.intrCost, "intr-cost", time.Duration(d.IntrCostNs), "vCPU time per delivered interrupt")
	f.DurationVar(&fl.complCost, "completion-cost", time.Duration(d.ComplCostNs), "vCPU time per completion processed")
	f.DurationVar(&fl.ipiCost, "ipi-cost", 0, "vCPU time per IPI to wake it (0: completion on the vCPU's own CPU)")
	f.DurationVar(&fl.ipiThresh, "ipi-coalesce", 0, "skip the IPI when the vCPU was interrupted less than this ago (vIC uses 100µs; 0: off)")
	f.DurationVar(&fl.epoch, "epoch", time.Duration(d.EpochNs), "vIC trickle measurement epoch")
	f.IntVar(&fl.warmup, "warmup", d.Warmup, "completions before measuring")
	f.IntVar(&fl.completions, "completions", d.Completions, "completions measured per run")
	f.IntVar(&fl.mcc, "mcc", pp.MCC, "mcc, mcc+midl: completions per interrupt")
	f.DurationVar(&fl.mccBackstop, "mcc-backstop", time.Duration(pp.MCCBackstop), "mcc alone: timeout bounding a held completion")
	f.DurationVar(&fl.midl, "midl", time.Duration(pp.MIDLNs), "midl, mcc+midl: maximum interrupt delay")
	f.IntVar(&fl.cifThresh, "vic-cif-threshold", 4, "vic: coalescing off at or below this CIF")
	f.IntVar(&fl.trickle, "vic-trickle-iops", 2000, "vic: coalescing off after an epoch below this rate")
	f.IntVar(&fl.adaptThr, "adaptive-thr", pp.AdaptiveThr, "adaptive: count threshold")
	f.DurationVar(&fl.adaptDelta, "adaptive-delta", time.Duration(pp.AdaptiveGap), "adaptive: quiet period Δ")
	f.StringVarP(&fl.out, "output", "o", "", "write charts to `DIR`")
	f.StringSliceVar(&fl.formats, "format", []string{"png", "svg"}, "chart formats (png, svg)")
	return cmd
}

func (fl *simCoalesceOptions) run(w io.Writer) error {
	dev, err := sim.Preset(fl.preset)
	if err != nil {
		return err
	}
	cfg := sim.Config{
		Seed: fl.seed, Device: dev, OpenRate: fl.openRate, Bursty: fl.bursty,
		IntrCostNs: int64(fl.intrCost), ComplCostNs: int64(fl.complCost),
		IPICostNs: int64(fl.ipiCost), IPIThresholdNs: int64(fl.ipiThresh),
		EpochNs: int64(fl.epoch), Warmup: fl.warmup, Completions: fl.completions,
	}
	if fl.bursty && fl.openRate <= 0 {
		return fmt.Errorf("--bursty needs --rate (open loop)")
	}
	pp := sim.DefaultPolicyParams()
	pp.MCC, pp.MCCBackstop, pp.MIDLNs = fl.mcc, int64(fl.mccBackstop), int64(fl.midl)
	pp.VIC.CIFThreshold, pp.VIC.TrickleIOPS = fl.cifThresh, fl.trickle
	pp.AdaptiveThr, pp.AdaptiveGap = fl.adaptThr, int64(fl.adaptDelta)
	if fl.cifThresh < 1 {
		return fmt.Errorf("--vic-cif-threshold must be ≥ 1 (at 0 a completion held at CIF 0 would never be released)")
	}
	rs, err := sim.Sweep(cfg, pp, fl.policies, fl.cifs)
	if err != nil {
		return err
	}
	var files []string
	if fl.out != "" {
		if err := os.MkdirAll(fl.out, 0o755); err != nil {
			return fmt.Errorf("-o %s: %w", fl.out, err)
		}
		if fl.openRate > 0 {
			return fmt.Errorf("-o: charts are per CIF; run without --rate to chart")
		}
		files, err = report.SimCharts(rs, fl.policies, fl.out, fl.formats)
		if err != nil {
			return err
		}
	}
	if fl.g.json {
		return writeJSON(w, simCoalesceJSON{Results: nonNil(rs)})
	}
	fmt.Fprintf(w, "device %s (%d channels, service %v + exp %v), intr %v, completion %v, seed %d\n",
		dev.Name, dev.Parallel, time.Duration(dev.MinNs), time.Duration(dev.ExpMeanNs), fl.intrCost, fl.complCost, fl.seed)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "policy\tcif\tiops\tcpu_util\tiops_per_cpu\tinterrupts/s\tp50_us\tp99_us\t")
	for _, r := range rs {
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.2f\t%.0f\t%.0f\t%.1f\t%.1f\t\n", r.Policy, r.CIF, r.IOPS, r.CPUUtil, r.IOPSPerCPU, r.InterruptsPerSec, r.LatencyP50Us, r.LatencyP99Us)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(files) > 0 {
		fmt.Fprintf(w, "charts: %s\n", strings.Join(files, " "))
	}
	return nil
}
