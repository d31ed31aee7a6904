package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/irqpilot/irqpilot/internal/apply"
	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/plan"
)

type persistOptions struct {
	stateDir string
	remove   bool
	root     string
	binary   string
	force    bool
	agent    bool
	planFile string
	// printUnit is a hidden flag for packaging (`make deb`): print the unit
	// (agent, boot) or the udev rule (udev) a package ships, install nothing.
	printUnit string
	// exe is the binary the unit runs: --binary, else this one, absolute.
	exe string
}

func newPersistCmd() *cobra.Command {
	o := &persistOptions{}
	cmd := &cobra.Command{
		Use:   "persist PLAN | --remove",
		Short: "Re-apply a plan at boot and when NICs appear (systemd unit + udev rule)",
		Long: `persist installs the plan as /etc/irqpilot/plan.yaml with a systemd oneshot
unit that applies it at boot and a udev rule that starts the unit again for
every network interface that appears later. It needs root (or
--install-root DIR, for packaging). The unit runs the installed irqpilot
binary: a binary under /tmp or a build tree is refused unless --force.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if o.remove || o.printUnit != "" {
				if len(args) != 0 {
					return fmt.Errorf("persist --remove takes no plan (got %s)\nusage: %s", strings.Join(args, " "), cmd.UseLine())
				}
				return nil
			}
			return exactArgs(1, "a plan file (make one with 'irqpilot plan -o plan.yaml'), or --remove")(cmd, args)
		},
		RunE: runE(o),
	}
	stateDirFlag(cmd, &o.stateDir)
	cmd.Flags().BoolVar(&o.remove, "remove", false, "remove the installed unit, rule and plan")
	cmd.Flags().StringVar(&o.root, "install-root", "", "install below `DIR` instead of / (for packaging and tests)")
	cmd.Flags().StringVar(&o.binary, "binary", "", "irqpilot `PATH` the unit runs (default: this binary)")
	cmd.Flags().BoolVar(&o.agent, "agent", false, "install irqpilot-agent.service (Type=notify with a watchdog: the agent enforces the plan and converges devices as they appear) instead of the oneshot unit and udev rule")
	cmd.Flags().BoolVar(&o.force, "force", false, "write the unit even though the binary is under /tmp or a build tree")
	cmd.Flags().StringVar(&o.printUnit, "print-unit", "", "print the packaged `agent|boot|udev` unit (or udev rule) that runs --binary, install nothing (for packaging)")
	_ = cmd.Flags().MarkHidden("print-unit")
	cmd.MarkFlagsMutuallyExclusive("print-unit", "remove")
	return cmd
}

// printPackagedUnit writes the unit (or udev rule) a distribution package
// ships: the same templates persist installs, for the same binary and state
// directory, with a header saying it is not enabled.
func (o *persistOptions) printPackagedUnit(out io.Writer) error {
	p := &apply.Persistence{Binary: o.binary, StateDir: o.stateDir, Agent: o.printUnit == "agent", Packaged: true}
	files, err := p.Files()
	if err != nil {
		return err
	}
	_, err = out.Write(files[packagedUnits[o.printUnit]])
	return err
}

// packagedUnits are --print-unit's values and the file each prints.
var packagedUnits = map[string]string{
	"agent": apply.PersistAgentUnitPath,
	"boot":  apply.PersistUnitPath,
	"udev":  apply.PersistUdevPath,
}

// complete takes the plan argument and, unless a packaged unit is printed
// for --binary, the binary the unit runs.
func (o *persistOptions) complete(_ *cobra.Command, args []string) error {
	if len(args) == 1 {
		o.planFile = args[0]
	}
	if o.printUnit != "" {
		return nil
	}
	o.exe = o.binary
	if o.exe == "" {
		var err error
		if o.exe, err = os.Executable(); err != nil {
			return err
		}
	}
	o.exe, _ = filepath.Abs(o.exe)
	return nil
}

func (o *persistOptions) validate() error {
	if o.printUnit == "" {
		return nil
	}
	if !filepath.IsAbs(o.binary) {
		return flagErrorf("--binary", "--print-unit needs --binary with the absolute path the package installs irqpilot to (e.g. /usr/bin/irqpilot)")
	}
	if _, ok := packagedUnits[o.printUnit]; !ok {
		return flagErrorf("--print-unit", "--print-unit %q: want agent (irqpilot-agent.service), boot (irqpilot-apply.service) or udev (the rule that re-applies for new NICs)", o.printUnit)
	}
	return nil
}

func (o *persistOptions) run(_ context.Context, out, _ io.Writer) error {
	if o.printUnit != "" {
		return o.printPackagedUnit(out)
	}
	if o.root == "" && os.Geteuid() != 0 {
		return fmt.Errorf("persist writes /etc/systemd and /etc/udev: run it as root (nothing was changed)")
	}
	exe := o.exe
	p := &apply.Persistence{FS: kernel.New("/"), Root: o.root, Binary: exe, StateDir: o.stateDir, Agent: o.agent}
	if o.remove {
		removed, err := p.Remove()
		for _, r := range removed {
			fmt.Fprintln(out, "removed", r)
		}
		if err == nil && len(removed) == 0 {
			fmt.Fprintln(out, "nothing to remove: no persisted plan installed")
		}
		return err
	}
	if !o.force && transientBinary(exe) {
		return fmt.Errorf("the unit would run %s, which looks temporary (under /tmp or a build tree); install irqpilot (e.g. /usr/local/sbin) and run that copy, or pass --binary PATH, or --force", exe)
	}
	// What the unit needs at boot is checked now, not at every boot.
	if fi, err := os.Stat(exe); err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("the unit would run %s, which is not an executable file (%v)", exe, err)
	}
	if o.root == "" {
		if err := apply.SecureStateDir(o.stateDir); err != nil {
			return err
		}
	}
	data, err := plan.ReadFile(o.planFile)
	if err != nil {
		return err
	}
	if _, err := plan.Parse(o.planFile, data); err != nil {
		return err
	}
	written, err := p.Install(data)
	for _, w := range written {
		fmt.Fprintln(out, "wrote", w)
	}
	if err == nil && o.root == "" {
		if o.agent {
			fmt.Fprintln(out, "run 'systemctl daemon-reload && systemctl start irqpilot-agent' to start the agent now; it starts at every boot")
		} else {
			fmt.Fprintln(out, "run 'systemctl daemon-reload && udevadm control --reload' to activate now; the plan is applied at every boot")
		}
	}
	return err
}

// transientBinary: a path that will not be there at the next boot, or is a
// developer's build.
func transientBinary(p string) bool {
	for _, pre := range []string{"/tmp/", "/var/tmp/", "/dev/shm/", os.TempDir() + "/"} {
		if strings.HasPrefix(p, pre) {
			return true
		}
	}
	return strings.Contains(p, "/go-build") || strings.HasSuffix(filepath.Dir(p), "/bin") && fileExists(filepath.Join(filepath.Dir(filepath.Dir(p)), "go.mod"))
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }
