package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/plan"
	"github.com/irqpilot/irqpilot/internal/policy"
	"github.com/irqpilot/irqpilot/internal/setting"
)

// options turns the flags into policy options.
func (f planOptions) options() (policy.Options, error) {
	var o policy.Options
	if names := policy.PolicyNames(); !slices.Contains(names, f.policy) {
		msg := fmt.Sprintf("unknown policy %q (known: %s)", f.policy, strings.Join(names, ", "))
		if s := suggest(f.policy, names); len(s) > 0 {
			msg += fmt.Sprintf("; did you mean %s?", strings.Join(s, " or "))
		}
		return o, &flagError{flag: "--policy", err: errors.New(msg)}
	}
	if f.housekeeping != "" {
		s, err := cpuset.Parse(f.housekeeping)
		if err != nil || s.IsEmpty() {
			return o, flagErrorf("--housekeeping", "--housekeeping %q: want a cpulist such as 0 or 0-1", f.housekeeping)
		}
		o.Housekeeping = s
	}
	if f.appCPUs != "" {
		s, err := cpuset.Parse(f.appCPUs)
		if err != nil || s.IsEmpty() {
			return o, flagErrorf("--app-cpus", "--app-cpus %q: want a cpulist such as 1-7", f.appCPUs)
		}
		o.AppCPUs = &s
	}
	if f.app != "" {
		if _, err := plan.ParseAppSelector(f.app); err != nil {
			return o, flagErrorf("--app", "--app: %w", err)
		}
		o.App = f.app
	}
	for _, c := range []struct {
		name string
		bad  bool
	}{{"--irq-cores", f.irqCores < 0}, {"--cpus-per-irq-core", f.cpusPerIRQCore < 1}, {"--sock-flow-entries", f.sockFlowEntries < 0}} {
		if c.bad {
			return o, flagErrorf(c.name, "--irq-cores, --cpus-per-irq-core and --sock-flow-entries must not be negative (and --cpus-per-irq-core at least 1)")
		}
	}
	switch m := plan.IrqbalanceMode(f.irqbalance); m {
	case "", plan.IrqbalanceLeave, plan.IrqbalanceBan, plan.IrqbalanceStop:
		o.Irqbalance = m
	default:
		return o, flagErrorf("--irqbalance", "--irqbalance %q: want leave, ban or stop", f.irqbalance)
	}
	o.Devices = f.devices
	o.MachineWide = f.machineWide
	o.IncludeDefaultRoute = f.withDefaultRt
	if f.withDefaultRt && len(f.devices) > 0 {
		return o, flagErrorf("--include-default-route", "--include-default-route is for plans without --device: name the interface with --device instead")
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
