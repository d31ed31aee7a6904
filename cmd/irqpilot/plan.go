package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/irqpilot/irqpilot/internal/load"
	"github.com/irqpilot/irqpilot/internal/policy"
)

// planOptions are plan's flags.
type planOptions struct {
	g *globalFlags
	input
	policy          string
	housekeeping    string
	appCPUs         string
	app             string
	devices         []string
	machineWide     bool
	withDefaultRt   bool
	irqCores        int
	cpusPerIRQCore  int
	sockFlowEntries int
	irqbalance      string
	output          string
	sample          time.Duration
	after           string
	errOut          io.Writer
	probeManaged    bool
	all             bool   // --app comm:NAME may match several processes
	cost            string // --cost: how interrupt time is measured
	remedy          string // --remedy: plan doctor's remedy for this finding
	policyGiven     bool   // --policy was given
	// What run finds, set on its own copy of the options for runPlan.
	load    *policy.MeasuredLoad // measured with --sample
	netns   string               // a network namespace other than the host's, live only
	appNote string               // what --app matched on the live machine
	appPIDs []int                // the processes --app selected on the live machine
}

func newPlanCmd(g *globalFlags) *cobra.Command {
	o := &planOptions{g: g, sample: -1}
	cmd := &cobra.Command{
		Use:   "plan --policy NAME [-o plan.yaml]",
		Short: "Make a placement and steering plan from a policy and show what it would change",
		Long: `plan reads the machine (or --root DIR, or --snapshot FILE), runs a policy and
writes the resulting plan — IRQ affinities, RPS/RFS/XPS steering, application
placement and irqbalance handling, each with a one-line reason — then shows
what it would change against the current state: from what, to what, and why.
Nothing is changed; 'irqpilot apply FILE' applies a plan.

Policies (from the write-ups listed in docs/sources.md):
  dedicated-core  every movable IRQ on the housekeeping CPU(s) (--housekeeping,
                  default CPU 0), RPS over the other CPUs, RFS on (ClustrixDB core-0 write-up)
  per-queue       each queue IRQ on its own NUMA-local core, RPS per queue over
                  a CPU group, the application on the rest (AWS Graviton memcached tuning)
  colocate        each queue's IRQ, RPS/XPS and worker on one core (Intel IRQ+process affinity study)
  rps-spread      RPS/RFS over the NIC's node, IRQs untouched (RPS/RFS on a single-queue NIC)
  auto            measures the load (3 s; --sample, or --after on a capture),
                  and changes only what the measurement shows is hurting:
                  with no evidence of harm the plan is empty and says why
  efficiency      interrupt deferral on every steered NIC (napi_defer_hard_irqs 2,
                  gro_flush_timeout 20 µs); placement untouched
  latency         with --app-cpus: threaded NAPI beside the consumer; without: busy
                  polling (busy_read/busy_poll, machine-wide) and IRQ suspension
                  for applications that opt in; placement untouched

With --remedy REF instead of a policy, plan measures like auto and writes
the remedy doctor shows for that finding: the same plan and prediction,
ready for 'irqpilot apply --verify'.

auto and --remedy measure the way doctor does: interrupt time with the
eBPF collector where it loads (--cost), else estimated from interrupt
counts, and say which. A plan made from a measurement carries its
prediction per CPU (busy and interrupt time, before and predicted after),
printed below the changes.

Without --device a plan leaves out the interface that carries the default
route (the link the machine is managed through; --include-default-route
or --device puts it back) and every IRQ that serves no network or storage
queue (--machine-wide puts them back), and says so.

Without -o the plan is printed (YAML, or JSON with --json) followed by the
changes as YAML comments, so the output can be redirected into a plan file.
With -o FILE the plan is written there (JSON when FILE ends in .json or with
--json) and the changes are printed.`,
		Args: cobra.NoArgs,
		RunE: runE(o),
	}
	f := cmd.Flags()
	f.StringVar(&o.policy, "policy", "auto", "policy `NAME`: "+strings.Join(policy.PolicyNames(), ", "))
	f.StringVar(&o.housekeeping, "housekeeping", "", "dedicated-core: `CPUS` (cpulist) that take every movable IRQ (default: the lowest usable CPU, normally 0)")
	f.StringVar(&o.appCPUs, "app-cpus", "", "give the application these `CPUS` (cpulist) instead of the policy's choice")
	f.StringVar(&o.app, "app", "", "pin this application: comm:NAME, pid:N, unit:NAME.service or cgroup:PATH (default: only advise app_cpus)")
	f.BoolVar(&o.all, "all", false, "with --app comm:NAME, pin every process of that name (without it, a name matching several processes is refused)")
	f.Var(newNameList(&o.devices), "device", "plan only for these network interfaces (comma-separated or repeated): their IRQs, queues and coalescing (default: every physical NIC and the VLANs on them except the one carrying the default route, and only device queue IRQs); the plan lists what it left out")
	f.BoolVar(&o.machineWide, "machine-wide", false, "with --device, also plan machine-wide settings (net.core.rps_sock_flow_entries, irqbalance); without --device, also plan IRQs that serve no device queue (serial, ACPI, a NIC's control vector)")
	f.BoolVar(&o.withDefaultRt, "include-default-route", false, "without --device, also plan the interface that carries the default route (the management link, left out by default)")
	f.IntVar(&o.irqCores, "irq-cores", 0, "per-queue: number of CPUs per NUMA node that take queue IRQs (default: one per --cpus-per-irq-core usable CPUs)")
	f.IntVar(&o.cpusPerIRQCore, "cpus-per-irq-core", 8, "per-queue: usable CPUs per IRQ CPU, and the node size from which RPS spreads over a group")
	f.IntVar(&o.sockFlowEntries, "sock-flow-entries", 0, "RFS table size net.core.rps_sock_flow_entries (default: the policy's; rounded down to a power of two)")
	f.StringVar(&o.irqbalance, "irqbalance", "", "irqbalance handling: leave, ban or stop (default: stop it when the plan pins IRQs and it runs)")
	f.StringVarP(&o.output, "output", "o", "", "write the plan to `FILE` instead of printing it")
	f.Var(autoDuration{&o.sample}, "sample", "measure the load for `DURATION` first (live machine; auto: 3s for --policy auto, 0 for the others; 0 = do not measure)")
	f.StringVar(&o.after, "after", "", "with --root/--snapshot: a later capture (`DIR` or FILE.tar.gz), so auto can judge the load between the two")
	f.StringVar(&o.remedy, "remedy", "", "plan doctor's remedy for the finding `REF` (its ref, e.g. interrupt-bound-cpu:cpu0, or its id when only one has it) from a measurement, instead of a policy")
	addProbeManagedFlag(cmd, &o.probeManaged)
	addCostFlag(cmd, &o.cost)
	return cmd
}

// defaultAutoSample is how long `plan --policy auto` measures the live
// machine when --sample is not given: auto decides from evidence.
const defaultAutoSample = 3 * time.Second

// complete opens the machine, notes whether --policy was given and
// settles --sample's default: auto and --remedy measure the live machine.
func (o *planOptions) complete(cmd *cobra.Command, _ []string) error {
	o.errOut = cmd.ErrOrStderr()
	o.policyGiven = cmd.Flags().Changed("policy")
	if err := o.open(o.g); err != nil {
		return err
	}
	if o.sample < 0 {
		o.sample = 0
		if (o.policy == "auto" || o.remedy != "") && o.fs.IsLive() && o.after == "" {
			o.sample = defaultAutoSample
		}
	}
	return nil
}

func (o *planOptions) validate() error {
	if o.remedy != "" && o.policyGiven {
		return flagErrorf("--remedy", "--remedy plans doctor's remedy for a finding instead of a policy: give one of --remedy and --policy")
	}
	if err := validCost(o.cost, o.fs.IsLive()); err != nil {
		return err
	}
	switch {
	case o.sample > 0 && !o.fs.IsLive():
		return flagErrorf("--sample", "--sample measures the live machine; with --root or --snapshot give a later capture with --after")
	case o.sample == 0 && o.after != "" && o.fs.IsLive():
		return flagErrorf("--after", "--after is for captured state (--root/--snapshot); on the live machine plan measures with --sample")
	}
	_, err := o.options()
	return err
}

// run reads the machine (and with --sample or --after its load), then
// plans. What it finds goes into a copy of the options for runPlan.
func (o *planOptions) run(_ context.Context, out, _ io.Writer) error {
	f := *o
	fs := f.fs
	hostFS := fs
	switch {
	case f.sample > 0:
		if !f.g.json {
			fmt.Fprintf(f.errOut, "measuring the load for %s (--sample to change, 0 to skip)…\n", f.sample)
		}
		// The consumer's threads are sampled too, for application placement.
		l, note, err := measureLive(fs, f.sample, f.cost, true)
		if err != nil {
			return err
		}
		f.measured(l, note)
	case f.after != "":
		second, closeSecond, err := openAfter(f.after)
		if err != nil {
			return err
		}
		defer closeSecond()
		m, err := measureCaptured(fs, second, f.cost, true)
		if err != nil {
			return err
		}
		f.measured(m.Load, m.CostNote)
		hostFS = second
	}
	h, err := readHost(hostFS, f.probeManaged)
	if err != nil {
		return err
	}
	if ns, err := fs.CurrentNetNS(); err == nil && !ns.Initial {
		f.netns = ns.String()
	}
	if err := f.checkApp(fs); err != nil {
		return err
	}
	return runPlan(out, h, f, f.g.json, f.source())
}

// measured keeps a measurement for the policy, and says on stderr how
// interrupt time was known (auto's prediction rests on it).
func (o *planOptions) measured(l *load.Load, costNote string) {
	o.load = policy.Measured(l)
	if !o.g.json && costNote != "" {
		fmt.Fprintln(o.errOut, costNote)
	}
}

// source names the machine planned for in the text output.
func (o *planOptions) source() string {
	if s := o.g.sourceName(); s != "live" {
		return s
	}
	return "this machine"
}
