package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	"github.com/spf13/cobra"

	"github.com/irqpilot/irqpilot/internal/agent"
	"github.com/irqpilot/irqpilot/internal/apply"
	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/policy"
)

// agentOptions are agent's flags.
type agentOptions struct {
	g             *globalFlags
	stateDir      string
	planFile      string
	policy        string
	interval      time.Duration
	app           string
	devices       []string
	withDefaultRt bool
	machineWide   bool
	deviceGiven   bool // --device given (`--device ""` parses as no device)
	// adaptOnlyGiven: the --adapt-* flags given (they do nothing without --adapt).
	adaptOnlyGiven []string
	listen         string
	socket         string
	adapt          bool
	revertOnExit   bool
	logFormat      string
	logLevel       string
	pingPongLimit  int
	pingPongWindow time.Duration
	keepJournals   int
	adaptOpts      agent.AdaptOptions
	fs             *kernel.FS
}

func newAgentCmd(g *globalFlags) *cobra.Command {
	o := &agentOptions{g: g}
	cmd := &cobra.Command{
		Use:   "agent --plan FILE | --policy NAME",
		Short: "Keep the machine tuned: enforce a plan, repair drift, adapt on evidence, export metrics",
		Long: `agent runs until stopped (a systemd Type=notify service, or a terminal). Every
--interval it re-reads each setting the plan owns and re-applies, through the
journal, whatever something else changed (logged old → drifted → restored);
devices that appear later get their part of the plan within a second; entries
naming an offline CPU wait for it. A setting changed back more than
--pingpong-limit times within --pingpong-window is frozen and reported.
With --adapt it also tries a new plan when a harmful finding persists and keeps
it only if verification shows it helped. SIGHUP reloads the plan file (a bad
one is rejected and the old plan kept); SIGTERM leaves the applied state, or
reverts it with --revert-on-exit. Metrics: --listen; status: 'irqpilot status'.
The plan file, and the status socket's directory, must be root's (or the
agent's user's) and writable by no one else; only a read-only mount's root
directory is excused its mode. Metrics connections are capped (at most 32 at
once, with timeouts) so other local users cannot exhaust the agent's file
descriptors.

Exit status: 0 stopped by a signal, 2 bad input or a failure before anything
was changed (state directory, --listen address, status socket).`,
		Args: cobra.NoArgs,
		RunE: runE(o),
	}
	f := cmd.Flags()
	stateDirFlag(cmd, &o.stateDir)
	f.StringVar(&o.planFile, "plan", "", "enforce the plan `FILE`")
	f.StringVar(&o.policy, "policy", "", "enforce the plan the policy `NAME` makes for this machine")
	f.DurationVar(&o.interval, "interval", agent.DefaultInterval, "enforcement `interval`")
	f.StringVar(&o.listen, "listen", agent.DefaultListen, "serve Prometheus metrics on `ADDR` (/metrics; empty disables)")
	f.StringVar(&o.socket, "socket", "", "status socket `PATH` (default STATE-DIR/"+agent.SocketName+")")
	f.BoolVar(&o.adapt, "adapt", false, "adapt the plan when a harmful finding persists (verified, kept or reverted)")
	f.Var(newNameList(&o.devices), "device", "plan (--policy, --adapt) only for these network interfaces (comma-separated or repeated), veth included (default: every physical NIC and the VLANs on them except the one carrying the default route, and only device queue IRQs)")
	f.BoolVar(&o.withDefaultRt, "include-default-route", false, "without --device, --policy also plans the interface that carries the default route")
	f.BoolVar(&o.machineWide, "machine-wide", false, "--policy also plans machine-wide settings (with --device) or IRQs that serve no device queue (without)")
	f.StringVar(&o.app, "app", "", "the application traffic is for (comm:NAME, pid:N, unit:NAME.service or cgroup:PATH): --adapt may place it beside where steering frees a CPU, and --policy pins it")
	f.BoolVar(&o.revertOnExit, "revert-on-exit", false, "on SIGTERM/SIGINT revert every change this agent made")
	f.StringVar(&o.logFormat, "log-format", "text", "log as `text` or json")
	f.StringVar(&o.logLevel, "log-level", "info", "log `level`: debug, info, warn, error")
	f.IntVar(&o.pingPongLimit, "pingpong-limit", agent.DefaultPingPongLimit, "repairs of one setting within --pingpong-window before it is frozen")
	f.DurationVar(&o.pingPongWindow, "pingpong-window", 0, "ping-pong `window` (default 20 intervals, at least 1m)")
	f.IntVar(&o.keepJournals, "keep-journals", agent.DefaultKeepJournals, "finished (reverted, no-change) journals, superseded drift-repair journals, and journals of devices that are gone or were created anew, to keep of each; no other applied journal is pruned")
	f.IntVar(&o.adaptOpts.Persist, "adapt-persist", 3, "intervals a harmful finding must persist before adapting")
	f.IntVar(&o.adaptOpts.Window, "adapt-window", 5, "intervals over which an adaptation is verified")
	f.DurationVar(&o.adaptOpts.MinDwell, "adapt-dwell", 5*time.Minute, "minimum time between two adaptations")
	f.IntVar(&o.adaptOpts.MaxPerHour, "adapt-budget", 4, "adaptations allowed per hour")
	f.StringVar(&o.adaptOpts.MetricCommand, "adapt-metric-command", "", "shell `COMMAND` printing a number that must not get worse (lower is better)")
	f.StringVar(&o.adaptOpts.MetricQuery, "adapt-metric-query", "", "Prometheus instant query `URL` (…/api/v1/query?query=…) returning one value that must not get worse")
	f.BoolVar(&o.adaptOpts.HigherIsBetter, "adapt-metric-higher-better", false, "the user metric is better when higher (throughput)")
	cmd.MarkFlagsMutuallyExclusive("plan", "policy")
	return cmd
}

func (o *agentOptions) logger(w io.Writer) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(o.logLevel)); err != nil {
		return nil, flagErrorf("--log-level", "--log-level %q: %v", o.logLevel, err)
	}
	ho := &slog.HandlerOptions{Level: lvl}
	switch o.logFormat {
	case "text":
		return slog.New(slog.NewTextHandler(w, ho)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, ho)), nil
	}
	return nil, flagErrorf("--log-format", "--log-format %q: use text or json", o.logFormat)
}

// complete notes which of --device and the --adapt-* flags were given,
// and takes the machine (--root) to enforce.
func (o *agentOptions) complete(cmd *cobra.Command, _ []string) error {
	o.deviceGiven = cmd.Flags().Changed("device")
	o.adaptOnlyGiven = nil
	for _, name := range adaptOnlyFlags {
		if cmd.Flags().Changed(name) {
			o.adaptOnlyGiven = append(o.adaptOnlyGiven, "--"+name)
		}
	}
	o.fs = kernel.New(o.g.root)
	return nil
}

// validate refuses what the agent cannot run with (exit status 2).
func (o *agentOptions) validate() error {
	if o.g.snapshot != "" {
		return flagErrorf("--snapshot", "agent writes kernel settings; it cannot run on a --snapshot")
	}
	if err := o.check(); err != nil {
		return err
	}
	if _, err := o.logger(io.Discard); err != nil {
		return err
	}
	if o.interval < 10*time.Millisecond {
		return flagErrorf("--interval", "--interval %s is too short (at least 10ms)", o.interval)
	}
	return nil
}

func (o *agentOptions) run(_ context.Context, _, errOut io.Writer) error {
	bad := func(err error) error { return &exitError{code: 2, err: err} }
	log, err := o.logger(errOut)
	if err != nil {
		return bad(err)
	}
	fs := o.fs
	if fs.IsLive() && os.Geteuid() != 0 {
		return bad(errors.New("agent must run as root to write /proc/irq and /sys/class/net (nothing was changed)"))
	}
	ag, err := agent.New(agent.Options{
		App: o.app, Devices: o.devices,
		PolicyOptions: policy.Options{IncludeDefaultRoute: o.withDefaultRt, MachineWide: o.machineWide},
		FS:            fs, StateDir: o.stateDir, PlanFile: o.planFile, Policy: o.policy, Interval: o.interval,
		Listen: o.listen, Socket: o.socket, Adapt: o.adapt, AdaptOptions: o.adaptOpts, RevertOnExit: o.revertOnExit,
		PingPongLimit: o.pingPongLimit, PingPongWindow: o.pingPongWindow, KeepJournals: o.keepJournals, Log: log,
		Ready: func() { daemon.SdNotify(false, daemon.SdNotifyReady) },
	})
	if err != nil {
		return bad(err)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				log.Info("SIGHUP: reloading the plan")
				ag.Reload()
			}
		}
	}()
	// The watchdog is fed at half of WATCHDOG_USEC while passes keep
	// running; a stuck pass stops feeding it and systemd restarts the agent.
	if wd, err := daemon.SdWatchdogEnabled(false); err == nil && wd > 0 {
		go func() {
			t := time.NewTicker(wd / 2)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					if time.Since(ag.LastPass()) < wd+o.interval {
						daemon.SdNotify(false, daemon.SdNotifyWatchdog)
					}
				}
			}
		}()
	}
	if err := ag.Run(ctx); err != nil {
		daemon.SdNotify(false, daemon.SdNotifyStopping)
		return bad(err)
	}
	daemon.SdNotify(false, daemon.SdNotifyStopping)
	return nil
}

// adaptOnlyFlags do something only with --adapt.
var adaptOnlyFlags = []string{"adapt-persist", "adapt-window", "adapt-dwell", "adapt-budget",
	"adapt-metric-command", "adapt-metric-query", "adapt-metric-higher-better"}

// check refuses flag values the agent would otherwise quietly replace with
// a default or misuse: counts below one, negative durations, an empty
// --state-dir (it would fall back to the default directory), an empty or
// impossible --device, a --adapt-metric-query that is not http(s).
func (o *agentOptions) check() error {
	var errs []error
	if strings.TrimSpace(o.stateDir) == "" {
		errs = append(errs, flagErrorf("--state-dir", "--state-dir is empty; give the state directory (default %s)", apply.DefaultStateDir))
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"--keep-journals", o.keepJournals}, {"--pingpong-limit", o.pingPongLimit}, {"--adapt-persist", o.adaptOpts.Persist},
		{"--adapt-window", o.adaptOpts.Window}, {"--adapt-budget", o.adaptOpts.MaxPerHour}} {
		if f.v < 1 {
			errs = append(errs, flagErrorf(f.name, "%s %d: must be at least 1", f.name, f.v))
		}
	}
	for _, f := range []struct {
		name string
		v    time.Duration
	}{{"--pingpong-window", o.pingPongWindow}, {"--adapt-dwell", o.adaptOpts.MinDwell}} {
		if f.v < 0 {
			errs = append(errs, flagErrorf(f.name, "%s %s: must not be negative", f.name, f.v))
		}
	}
	if o.withDefaultRt && len(o.devices) > 0 {
		errs = append(errs, flagErrorf("--include-default-route", "--include-default-route goes without --device: a --device list already says which NICs are in scope"))
	}
	if o.planFile != "" && !o.adapt && (o.withDefaultRt || o.machineWide) {
		name := "--machine-wide"
		if o.withDefaultRt {
			name = "--include-default-route"
		}
		errs = append(errs, flagErrorf(name, "--include-default-route and --machine-wide shape the plans --policy and --adapt make; with --plan FILE and no --adapt the file alone says what is in scope"))
	}
	if o.planFile != "" && !o.adapt {
		if o.deviceGiven && len(o.devices) > 0 {
			errs = append(errs, flagErrorf("--device", "--device shapes the plans --policy and --adapt make; with --plan FILE and no --adapt it would be ignored (the file alone says what is in scope)"))
		}
		if o.app != "" {
			errs = append(errs, flagErrorf("--app", "--app shapes the plans --policy and --adapt make; with --plan FILE and no --adapt it would be ignored (pin the application in the plan's apps)"))
		}
	}
	if !o.adapt {
		for _, name := range o.adaptOnlyGiven {
			errs = append(errs, flagErrorf(name, "%s is used only with --adapt; without it it would be ignored", name))
		}
	}
	if o.deviceGiven && len(o.devices) == 0 {
		errs = append(errs, &flagError{flag: "--device", err: agent.CheckDeviceName("")})
	}
	for _, d := range o.devices {
		if err := agent.CheckDeviceName(d); err != nil {
			errs = append(errs, &flagError{flag: "--device", err: err})
		}
	}
	if q := o.adaptOpts.MetricQuery; q != "" {
		if err := agent.CheckMetricQuery(q); err != nil {
			errs = append(errs, &flagError{flag: "--adapt-metric-query", err: err})
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w (nothing was changed)", err)
	}
	return nil
}
