package main

import (
	"context"
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
	dev         sim.Device // --device's preset
}

// simCoalesceResult is what `sim coalesce` measured and the charts it wrote.
type simCoalesceResult struct {
	results []sim.Result
	files   []string
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
		RunE: runE(fl),
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

// complete looks up --device's preset.
func (fl *simCoalesceOptions) complete(*cobra.Command, []string) error {
	dev, err := sim.Preset(fl.preset)
	if err != nil {
		return err
	}
	fl.dev = dev
	return nil
}

func (fl *simCoalesceOptions) validate() error {
	if fl.bursty && fl.openRate <= 0 {
		return flagErrorf("--bursty", "--bursty needs --rate (open loop)")
	}
	if fl.cifThresh < 1 {
		return flagErrorf("--vic-cif-threshold", "--vic-cif-threshold must be ≥ 1 (at 0 a completion held at CIF 0 would never be released)")
	}
	if fl.out != "" && fl.openRate > 0 {
		return flagErrorf("-o", "-o: charts are per CIF; run without --rate to chart")
	}
	return nil
}

func (fl *simCoalesceOptions) run(_ context.Context, w, _ io.Writer) error {
	res, err := fl.simulate()
	if err != nil {
		return err
	}
	return fl.render(w, res)
}

// simulate runs the sweep and writes the charts (-o).
func (fl *simCoalesceOptions) simulate() (*simCoalesceResult, error) {
	cfg := sim.Config{
		Seed: fl.seed, Device: fl.dev, OpenRate: fl.openRate, Bursty: fl.bursty,
		IntrCostNs: int64(fl.intrCost), ComplCostNs: int64(fl.complCost),
		IPICostNs: int64(fl.ipiCost), IPIThresholdNs: int64(fl.ipiThresh),
		EpochNs: int64(fl.epoch), Warmup: fl.warmup, Completions: fl.completions,
	}
	pp := sim.DefaultPolicyParams()
	pp.MCC, pp.MCCBackstop, pp.MIDLNs = fl.mcc, int64(fl.mccBackstop), int64(fl.midl)
	pp.VIC.CIFThreshold, pp.VIC.TrickleIOPS = fl.cifThresh, fl.trickle
	pp.AdaptiveThr, pp.AdaptiveGap = fl.adaptThr, int64(fl.adaptDelta)
	rs, err := sim.Sweep(cfg, pp, fl.policies, fl.cifs)
	if err != nil {
		return nil, err
	}
	res := &simCoalesceResult{results: rs}
	if fl.out != "" {
		if err := os.MkdirAll(fl.out, 0o755); err != nil {
			return nil, fmt.Errorf("-o %s: %w", fl.out, err)
		}
		if res.files, err = report.SimCharts(rs, fl.policies, fl.out, fl.formats); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// render prints the results as a table (or JSON) and names the charts.
func (fl *simCoalesceOptions) render(w io.Writer, res *simCoalesceResult) error {
	if fl.g.json {
		return writeJSON(w, simCoalesceJSON{Results: nonNil(res.results)})
	}
	dev := fl.dev
	fmt.Fprintf(w, "device %s (%d channels, service %v + exp %v), intr %v, completion %v, seed %d\n",
		dev.Name, dev.Parallel, time.Duration(dev.MinNs), time.Duration(dev.ExpMeanNs), fl.intrCost, fl.complCost, fl.seed)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "policy\tcif\tiops\tcpu_util\tiops_per_cpu\tinterrupts/s\tp50_us\tp99_us\t")
	for _, r := range res.results {
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.2f\t%.0f\t%.0f\t%.1f\t%.1f\t\n", r.Policy, r.CIF, r.IOPS, r.CPUUtil, r.IOPSPerCPU, r.InterruptsPerSec, r.LatencyP50Us, r.LatencyP99Us)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(res.files) > 0 {
		fmt.Fprintf(w, "charts: %s\n", strings.Join(res.files, " "))
	}
	return nil
}
