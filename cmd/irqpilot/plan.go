package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/load"
	"github.com/irqpilot/irqpilot/internal/plan"
	"github.com/irqpilot/irqpilot/internal/setting"
)

// planFlags are the options of `irqpilot plan`.
type planFlags struct {
	policy          string
	housekeeping    string
	appCPUs         string
	app             string
	devices         []string
	irqCores        int
	cpusPerIRQCore  int
	sockFlowEntries int
	irqbalance      string
	output          string
	sample          time.Duration
	load            *plan.CPULoad // measured with --sample
}

var planOpts planFlags

var planCmd = &cobra.Command{
	Use:   "plan --policy NAME [-o plan.yaml]",
	Short: "Make a placement and steering plan from a policy and show what it would change",
	Long: `plan reads the machine (or --root DIR, or --snapshot FILE), runs a policy and
writes the resulting plan — IRQ affinities, RPS/RFS/XPS steering, application
placement and irqbalance handling, each with a one-line reason — then shows
what it would change against the current state: from what, to what, and why.
Nothing is changed; 'irqpilot apply FILE' applies a plan.

Policies (from the seed documents):
  dedicated-core  every movable IRQ on the housekeeping CPU(s) (--housekeeping,
                  default CPU 0), RPS over the other CPUs, RFS on (seed 000)
  per-queue       each queue IRQ on its own NUMA-local core, RPS per queue over
                  a CPU group, the application on the rest (seed 002)
  colocate        each queue's IRQ, RPS/XPS and worker on one core (seed 001)
  rps-spread      RPS/RFS over the NIC's node, IRQs untouched (seed 004)
  auto            chooses one of the above for this machine and says why

Without -o the plan is printed (YAML, or JSON with --json) followed by the
changes as YAML comments, so the output can be redirected into a plan file.
With -o FILE the plan is written there (JSON when FILE ends in .json or with
--json) and the changes are printed.`,
	Args: cobra.NoArgs,
	RunE: func(cmd *cobra.Command, args []string) error {
		fs, cleanup, err := openFS()
		if err != nil {
			return err
		}
		defer cleanup()
		var sampler *load.Sampler
		var first *load.Sample
		if planOpts.sample > 0 {
			if !fs.IsLive() {
				return fmt.Errorf("--sample measures the live machine; it cannot be used with --root or --snapshot")
			}
			sampler = load.NewSampler(fs)
			if first, err = sampler.Sample(); err != nil {
				return err
			}
		}
		h, err := readHost(fs)
		if err != nil {
			return err
		}
		if sampler != nil {
			time.Sleep(planOpts.sample)
			second, err := sampler.Sample()
			if err != nil {
				return err
			}
			l, err := load.Rates(first, second)
			if err != nil {
				return err
			}
			share := map[int]float64{}
			for _, c := range l.CPUs {
				share[c.ID] = (c.IRQ + c.SoftIRQ) / 100
			}
			planOpts.load = &plan.CPULoad{IRQShare: share}
		}
		return runPlan(cmd.OutOrStdout(), h, planOpts, global.json, planSource())
	},
}

func init() {
	f := planCmd.Flags()
	f.StringVar(&planOpts.policy, "policy", "auto", "policy `NAME`: "+strings.Join(plan.PolicyNames(), ", "))
	f.StringVar(&planOpts.housekeeping, "housekeeping", "", "dedicated-core: `CPUS` (cpulist) that take every movable IRQ (default: the lowest usable CPU, normally 0)")
	f.StringVar(&planOpts.appCPUs, "app-cpus", "", "give the application these `CPUS` (cpulist) instead of the policy's choice")
	f.StringVar(&planOpts.app, "app", "", "pin this application: comm:NAME, pid:N, unit:NAME.service or cgroup:PATH (default: only advise app_cpus)")
	f.StringSliceVar(&planOpts.devices, "device", nil, "steer only these network interfaces (default: every physical NIC and the VLANs on them)")
	f.IntVar(&planOpts.irqCores, "irq-cores", 0, "per-queue: number of CPUs per NUMA node that take queue IRQs (default: one per --cpus-per-irq-core usable CPUs)")
	f.IntVar(&planOpts.cpusPerIRQCore, "cpus-per-irq-core", 8, "per-queue: usable CPUs per IRQ CPU, and the node size from which RPS spreads over a group")
	f.IntVar(&planOpts.sockFlowEntries, "sock-flow-entries", 0, "RFS table size net.core.rps_sock_flow_entries (default: the policy's; rounded down to a power of two)")
	f.StringVar(&planOpts.irqbalance, "irqbalance", "", "irqbalance handling: leave, ban or stop (default: stop it when the plan pins IRQs and it runs)")
	f.StringVarP(&planOpts.output, "output", "o", "", "write the plan to `FILE` instead of printing it")
	f.DurationVar(&planOpts.sample, "sample", 0, "measure per-CPU interrupt load for `DURATION` first, so auto can weigh the current load (live machine only)")
	addProbeManagedFlag(planCmd)
	rootCmd.AddCommand(planCmd)
}

func planSource() string {
	if s := sourceName(); s != "live" {
		return s
	}
	return "this machine"
}

// options turns the flags into policy options.
func (f planFlags) options() (plan.Options, error) {
	var o plan.Options
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
	o.IRQCores = f.irqCores
	o.CPUsPerIRQCore = f.cpusPerIRQCore
	o.SockFlowEntries = f.sockFlowEntries
	o.Load = f.load
	return o, nil
}

// planDiff is the JSON form of the changes.
type planDiff struct {
	File     string         `json:"file,omitempty"`
	Policy   string         `json:"policy"`
	Why      string         `json:"why,omitempty"`
	Plan     *plan.Plan     `json:"plan,omitempty"`
	Notes    []string       `json:"notes,omitempty"`
	Counts   map[string]int `json:"counts"`
	Settings []planSetting  `json:"settings"`
}

// planSetting is one resolved setting with its status against the host
// (setting.Status: pending = would change, unchanged, skipped, unknown).
type planSetting = setting.Change

// runPlan makes the plan for h, writes or prints it, and prints the changes.
func runPlan(w io.Writer, h *host.Host, f planFlags, asJSON bool, source string) error {
	o, err := f.options()
	if err != nil {
		return err
	}
	p, err := plan.Make(f.policy, h, o)
	if err != nil {
		return err
	}
	settings, err := plan.Resolve(p, h)
	if err != nil {
		return fmt.Errorf("the %s plan does not fit this host (a bug): %w", f.policy, err)
	}
	d := planDiff{Policy: p.Policy, Why: p.Why, Notes: p.Notes, Counts: map[string]int{}, Settings: []planSetting{}}
	for _, s := range settings {
		s.Status = setting.StatusFor(&s)
		d.Counts[string(s.Status)]++
		d.Settings = append(d.Settings, s)
	}

	if f.output != "" {
		fileJSON := asJSON || strings.EqualFold(filepath.Ext(f.output), ".json")
		var data []byte
		if fileJSON {
			data, err = p.MarshalJSONFile()
		} else {
			data, err = p.MarshalFile()
		}
		if err != nil {
			return err
		}
		if err := os.WriteFile(f.output, data, 0o644); err != nil {
			return err
		}
		d.File = f.output
		if asJSON {
			return json.NewEncoder(w).Encode(d)
		}
		fmt.Fprintf(w, "wrote %s (policy %s)\n", f.output, p.Policy)
		writePlanChanges(w, d, source, "")
		return nil
	}
	if asJSON {
		d.Plan = p
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(d)
	}
	data, err := p.MarshalFile()
	if err != nil {
		return err
	}
	if _, err := w.Write(data); err != nil {
		return err
	}
	fmt.Fprintln(w)
	writePlanChanges(w, d, source, "# ")
	return nil
}

// writePlanChanges prints the diff for people: each change (from → to, why),
// then skipped settings with their reason; unchanged ones are counted.
// prefix is prepended to every line ("# " keeps a printed plan valid YAML).
func writePlanChanges(w io.Writer, d planDiff, source, prefix string) {
	fmt.Fprintf(w, "%sAgainst %s: %d to change, %d unchanged, %d skipped, %d with unknown current value.\n",
		prefix, source, d.Counts[string(setting.StatusPending)], d.Counts[string(setting.StatusUnchanged)], d.Counts[string(setting.StatusSkipped)], d.Counts[string(setting.StatusUnknown)])
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	section := func(title string, want ...setting.Status) {
		first := true
		for _, s := range d.Settings {
			if !slices.Contains(want, s.Status) {
				continue
			}
			if first {
				fmt.Fprintf(tw, "%s\n%s%s\n", strings.TrimSpace(prefix), prefix, title)
				first = false
			}
			from := s.Old
			if from == "" {
				from = "?"
			}
			to := s.Value
			why := s.Reason
			if s.Status == setting.StatusSkipped {
				to, why = "(skipped)", s.Note
			}
			fmt.Fprintf(tw, "%s  %s\t%s\t%s → %s\t%s\n", prefix, s.Target, s.Name(), from, to, why)
		}
		tw.Flush()
	}
	section("Changes (target, setting, from → to, why):", setting.StatusPending, setting.StatusUnknown)
	section("Skipped:", setting.StatusSkipped)
	if len(d.Notes) > 0 {
		fmt.Fprintf(w, "%s\n%sLeft alone:\n", strings.TrimSpace(prefix), prefix)
		for _, n := range d.Notes {
			fmt.Fprintf(w, "%s  %s\n", prefix, n)
		}
	}
}
