package main

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/load"
	"github.com/irqpilot/irqpilot/internal/plan"
	"github.com/irqpilot/irqpilot/internal/policy"
	"github.com/irqpilot/irqpilot/internal/setting"
)

// planOptions are plan's flags.
type planOptions struct {
	g               *globalFlags
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
	load            *policy.MeasuredLoad // measured with --sample
	netns           string               // a network namespace other than the host's, live only
	all             bool                 // --app comm:NAME may match several processes
	appNote         string               // what --app matched on the live machine
	appPIDs         []int                // the processes --app selected on the live machine
	cost            string               // --cost: how interrupt time is measured
	remedy          string               // --remedy: plan doctor's remedy for this finding
	policyGiven     bool                 // --policy was given
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
		RunE: func(cmd *cobra.Command, args []string) error {
			o.errOut = cmd.ErrOrStderr()
			o.policyGiven = cmd.Flags().Changed("policy")
			return o.run(cmd.OutOrStdout())
		},
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

// run reads the machine (and with --sample its load), then plans.
func (o *planOptions) run(out io.Writer) error {
	fs, cleanup, err := o.g.openFS()
	if err != nil {
		return err
	}
	defer cleanup()
	if o.remedy != "" && o.policyGiven {
		return fmt.Errorf("--remedy plans doctor's remedy for a finding instead of a policy: give one of --remedy and --policy")
	}
	measures := o.policy == "auto" || o.remedy != ""
	if o.sample < 0 {
		o.sample = 0
		if measures && fs.IsLive() && o.after == "" {
			o.sample = defaultAutoSample
		}
	}
	if err := checkCost(o.cost, fs); err != nil {
		return err
	}
	hostFS := fs
	switch {
	case o.sample > 0:
		if !fs.IsLive() {
			return fmt.Errorf("--sample measures the live machine; with --root or --snapshot give a later capture with --after")
		}
		if !o.g.json {
			fmt.Fprintf(o.errOut, "measuring the load for %s (--sample to change, 0 to skip)…\n", o.sample)
		}
		// The consumer's threads are sampled too, for application placement.
		l, note, err := measureLive(fs, o.sample, o.cost, true)
		if err != nil {
			return err
		}
		o.measured(l, note)
	case o.after != "":
		if fs.IsLive() {
			return fmt.Errorf("--after is for captured state (--root/--snapshot); on the live machine plan measures with --sample")
		}
		second, closeSecond, err := openAfter(o.after)
		if err != nil {
			return err
		}
		defer closeSecond()
		m, err := measureCaptured(fs, second, o.cost, true)
		if err != nil {
			return err
		}
		o.measured(m.Load, m.CostNote)
		hostFS = second
	}
	h, err := readHost(hostFS, o.probeManaged)
	if err != nil {
		return err
	}
	if ns, err := fs.CurrentNetNS(); err == nil && !ns.Initial {
		o.netns = ns.String()
	}
	if err := o.checkApp(fs); err != nil {
		return err
	}
	return runPlan(out, h, *o, o.g.json, o.source())
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

// options turns the flags into policy options.
func (f planOptions) options() (policy.Options, error) {
	var o policy.Options
	if names := policy.PolicyNames(); !slices.Contains(names, f.policy) {
		msg := fmt.Sprintf("unknown policy %q (known: %s)", f.policy, strings.Join(names, ", "))
		if s := suggest(f.policy, names); len(s) > 0 {
			msg += fmt.Sprintf("; did you mean %s?", strings.Join(s, " or "))
		}
		return o, errors.New(msg)
	}
	if f.housekeeping != "" {
		s, err := cpuset.Parse(f.housekeeping)
		if err != nil || s.IsEmpty() {
			return o, fmt.Errorf("--housekeeping %q: want a cpulist such as 0 or 0-1", f.housekeeping)
		}
		o.Housekeeping = s
	}
	if f.appCPUs != "" {
		s, err := cpuset.Parse(f.appCPUs)
		if err != nil || s.IsEmpty() {
			return o, fmt.Errorf("--app-cpus %q: want a cpulist such as 1-7", f.appCPUs)
		}
		o.AppCPUs = &s
	}
	if f.app != "" {
		if _, err := plan.ParseAppSelector(f.app); err != nil {
			return o, fmt.Errorf("--app: %w", err)
		}
		o.App = f.app
	}
	if f.irqCores < 0 || f.cpusPerIRQCore < 1 || f.sockFlowEntries < 0 {
		return o, fmt.Errorf("--irq-cores, --cpus-per-irq-core and --sock-flow-entries must not be negative (and --cpus-per-irq-core at least 1)")
	}
	switch m := plan.IrqbalanceMode(f.irqbalance); m {
	case "", plan.IrqbalanceLeave, plan.IrqbalanceBan, plan.IrqbalanceStop:
		o.Irqbalance = m
	default:
		return o, fmt.Errorf("--irqbalance %q: want leave, ban or stop", f.irqbalance)
	}
	o.Devices = f.devices
	o.MachineWide = f.machineWide
	o.IncludeDefaultRoute = f.withDefaultRt
	if f.withDefaultRt && len(f.devices) > 0 {
		return o, fmt.Errorf("--include-default-route is for plans without --device: name the interface with --device instead")
	}
	o.IRQCores = f.irqCores
	o.CPUsPerIRQCore = f.cpusPerIRQCore
	o.SockFlowEntries = f.sockFlowEntries
	o.Load = f.load
	o.AppPIDs = f.appPIDs
	return o, nil
}

// checkApp resolves --app on the live machine: the processes it selects
// now (auto reads their measured threads), and for comm:NAME how many
// there are and in which network namespaces — more than one is refused
// without --all.
func (o *planOptions) checkApp(fs *kernel.FS) error {
	if o.app == "" || !fs.IsLive() {
		return nil
	}
	e, err := plan.ParseAppSelector(o.app)
	if err != nil {
		return nil // options() reports a bad selector
	}
	e.All = o.all
	sel := e.Processes()
	pids, err := setting.SelectProcesses(fs, sel)
	if err != nil {
		return fmt.Errorf("--app %s: %w", o.app, err)
	}
	o.appPIDs = pids
	if e.Comm == "" {
		return nil
	}
	if err := setting.CheckMatches(fs, sel, pids); err != nil {
		return fmt.Errorf("--app: %w", err)
	}
	o.appNote = fmt.Sprintf("--app %s matches %s", o.app, setting.DescribeMatches(fs, pids))
	if len(pids) == 0 {
		o.appNote += " now: apply skips it until one runs"
	}
	return nil
}
