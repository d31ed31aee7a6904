package bench

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/irqpilot/irqpilot/internal/apply"
	"github.com/irqpilot/irqpilot/internal/bench/workload"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/load"
	"github.com/irqpilot/irqpilot/internal/setting"
)

// CPU is one CPU's utilisation over a run: load.Rates's row for the run's
// interval (its time split in percent, NET_RX softirqs and numbered IRQs
// per second), or a configuration's per-CPU medians over its runs.
//
// Its JSON is a bench report's cpus[] entry (docs/json.md), which keeps
// only what a run needs and its own names: "cpu", the split, and
// "net_rx_per_s" and "irqs_per_s" for NetRx and Interrupts. Reports are
// read back, so the names stay as written.
type CPU load.CPULoad

// cpuJSON is CPU's JSON form. Usr, Sys and Soft are read only: reports
// written before a CPU held the whole split recorded "usr" (user and
// nice), "sys", "soft" and "idle" (idle and iowait), read into User,
// System, SoftIRQ and Idle.
type cpuJSON struct {
	ID int `json:"cpu"`
	load.CPUTime
	NetRx      float64 `json:"net_rx_per_s"`
	Interrupts float64 `json:"irqs_per_s"`

	Usr  *float64 `json:"usr,omitempty"`
	Sys  *float64 `json:"sys,omitempty"`
	Soft *float64 `json:"soft,omitempty"`
}

// MarshalJSON writes c as a bench report's cpus[] entry.
func (c CPU) MarshalJSON() ([]byte, error) {
	return json.Marshal(cpuJSON{ID: c.ID, CPUTime: c.CPUTime, NetRx: c.NetRx, Interrupts: c.Interrupts})
}

// UnmarshalJSON reads a bench report's cpus[] entry, also as earlier
// versions wrote it (cpuJSON).
func (c *CPU) UnmarshalJSON(b []byte) error {
	var v cpuJSON
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*c = CPU{ID: v.ID, CPUTime: v.CPUTime, NetRx: v.NetRx, Interrupts: v.Interrupts}
	for _, old := range []struct{ from, to *float64 }{{v.Usr, &c.User}, {v.Sys, &c.System}, {v.Soft, &c.SoftIRQ}} {
		if old.from != nil {
			*old.to = *old.from
		}
	}
	return nil
}

// Run is one measurement of one configuration.
type Run struct {
	Config string    `json:"config"`
	Round  int       `json:"round"`
	Start  time.Time `json:"start"`
	workload.Result
	CPUs []CPU `json:"cpus"`
	// BusyCPUs is how many CPUs' worth of time the machine was busy during
	// the run (sum of busy shares), and PerCPUSecond the work done per
	// busy CPU-second: a configuration that does the same work with less
	// CPU is better even at equal throughput.
	BusyCPUs     float64 `json:"busy_cpus,omitempty"`
	PerCPUSecond float64 `json:"per_cpu_second,omitempty"`
	// AppCPUs are the CPUs the server (the application) could run on during
	// the run, ClientCPUs those of the load generator ("" when the workload
	// has none apart from the application: storage, command); a free one
	// counts as every online CPU. Warnings reads them.
	AppCPUs    string `json:"app_cpus,omitempty"`
	ClientCPUs string `json:"client_cpus,omitempty"`
	Error      string `json:"error,omitempty"`
}

// BaseConfig is the configuration a label names: "default#aa" → "default".
func BaseConfig(label string) string {
	base, _, _ := strings.Cut(label, "#")
	return base
}

// Runner runs configurations against a workload, interleaved.
type Runner struct {
	Workload workload.Workload
	Configs  []string
	Rounds   int
	Duration time.Duration
	// Warmup runs the workload unmeasured before each measurement.
	Warmup time.Duration
	// Prime runs the workload once, unmeasured, before the first round:
	// a fresh server, page cache and guest memory are slower for their
	// first seconds than ever after, which would land on round one's
	// configurations alone.
	Prime        time.Duration
	Configurator Configurator
	// StateDir keeps the apply journals (DefaultStateDir/bench when empty).
	StateDir string
	// Progress, when set, is told what is happening.
	Progress func(format string, args ...any)
	// FS is the machine measured and changed, the live one (the caller's
	// kernel.New("/")); the testbed's view of its network namespace is a
	// directory of it (FS.Sub).
	FS *kernel.FS

	// Setups keeps, per configuration, what its first measured run set up
	// (auto's plan is decided from the latest default run's load).
	Setups map[string]*Setup

	// Dropped lists, per configuration, the changes Scope.Restrict left out
	// (filled as configurations are first measured).
	Dropped map[string][]string
	// MachineWide lists, per configuration, the machine-wide settings it
	// kept (Report.MachineWide).
	MachineWide map[string][]string

	app   workload.AppInfo
	scope Scope
	// baseline is the load of the latest "default" run (see AppInfo.BaselineLoad).
	baseline *load.Load
	h        *host.Host
	live     *apply.Applier
	ns       *apply.Applier
	started  bool
}

// Start prepares the workload and reads the host (with the testbed's device).
func (r *Runner) Start() error {
	if r.FS == nil {
		return errors.New("bench: no machine to measure (Runner.FS)")
	}
	if r.Configurator == nil {
		r.Configurator = Configs{}
	}
	if r.StateDir == "" {
		r.StateDir = filepath.Join(apply.DefaultStateDir, "bench")
	}
	if err := secureStateDir(r.StateDir); err != nil {
		return err
	}
	app, err := r.Workload.Prepare()
	if err != nil {
		return err
	}
	app.FS = r.FS
	r.app = app
	r.started = true
	h, err := host.Read(r.FS, host.Options{ProbeManaged: true})
	if err != nil {
		return err
	}
	if app.NSRoot != "" {
		nh, err := host.Read(r.FS.Sub(app.NSRoot), host.Options{})
		if err != nil {
			return fmt.Errorf("testbed view %s: %w", app.NSRoot, err)
		}
		if nic := nh.NIC(app.Device); nic != nil {
			h.NICs = append(h.NICs, *nic)
		} else {
			return fmt.Errorf("testbed device %s not visible below %s", app.Device, app.NSRoot)
		}
		r.ns = apply.New(r.FS.Sub(app.NSRoot), filepath.Join(r.StateDir, "testbed"))
		if app.NetNS != "" {
			// Per-NAPI settings go through netlink in the testbed's
			// namespace, and the policies see its NAPI instances.
			r.ns.Env.NAPI = nsNAPI{Path: app.NetNS}
			napis, err := testbedNAPI(r.FS, r.ns.Env.FS, app.NetNS, app.Device)
			if err != nil {
				r.progress("testbed device %s: NAPI instances not read (%v); no per-NAPI settings", app.Device, err)
			}
			h.NAPI = append(h.NAPI, napis...)
		}
	}
	r.h = h
	r.scope = NewScope(h, app)
	r.live = apply.New(r.FS, r.StateDir)
	return nil
}

// Scope is what the runner's configurations may change.
func (r *Runner) Scope() Scope { return r.scope }

// Setup makes config concrete for the runner's host and app and restricts
// it to the devices under test (see Scope). Every measured configuration
// goes through here.
//
// "NAME#TAG" is configuration NAME measured and summarised under its own
// label: `--configs default,default#aa` is an A/A comparison, the noise
// floor every other ratio is read against. "NAME/KEY=VAL/…" is NAME with
// run options (see CutRunOptions): `latency/busypoll=50` is the latency
// policy's settings measured with the udp sink busy polling.
func (r *Runner) Setup(config string, app workload.AppInfo) (*Setup, error) {
	name, opts, err := CutRunOptions(BaseConfig(config))
	if err != nil {
		return nil, err
	}
	s, err := r.Configurator.Setup(name, r.h, app)
	if err != nil {
		return nil, err
	}
	s.Config = config
	if opts.BusyPoll != nil {
		if bp, ok := r.Workload.(interface{ BusyPolls() bool }); !opts.BusyPoll.IsZero() && (!ok || !bp.BusyPolls()) {
			return nil, fmt.Errorf("configuration %q: busy polling is an option of the udp workload's sink, not of %s", config, r.Workload.Name())
		}
		s.BusyPoll = opts.BusyPoll
	}
	sc := r.scope
	sc.PIDs = app.PIDs
	var dropped []string
	s.Changes, dropped = sc.Restrict(s.Changes)
	s.Dropped = append(s.Dropped, dropped...)
	for i := range s.Changes {
		if c := &s.Changes[i]; setting.ScopeOf(c).MachineWide {
			if r.MachineWide == nil {
				r.MachineWide = map[string][]string{}
			}
			if _, ok := r.MachineWide[config]; !ok {
				r.MachineWide[config] = nil
			}
			what := fmt.Sprintf("%s = %s", c.Target, c.Value)
			if c.Kind == setting.KindSysctl {
				what = fmt.Sprintf("net.core.%s = %s", c.Name(), c.Value)
			}
			if !slices.Contains(r.MachineWide[config], what) {
				r.MachineWide[config] = append(r.MachineWide[config], what)
			}
		}
	}
	if len(s.Dropped) > 0 {
		if r.Dropped == nil {
			r.Dropped = map[string][]string{}
		}
		if _, ok := r.Dropped[config]; !ok {
			r.Dropped[config] = s.Dropped
			r.progress("%s: %d changes outside the devices under test dropped", config, len(s.Dropped))
		}
	}
	return s, nil
}

// Host is the host model the configurations are made for.
func (r *Runner) Host() *host.Host { return r.h }

// App is what the workload lets configurations place.
func (r *Runner) App() workload.AppInfo { return r.app }

// Close stops the workload.
func (r *Runner) Close() error {
	if !r.started {
		return nil
	}
	r.started = false
	return r.Workload.Close()
}

func (r *Runner) progress(format string, args ...any) {
	if r.Progress != nil {
		r.Progress(format, args...)
	}
}
