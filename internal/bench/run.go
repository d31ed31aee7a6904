package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/irqpilot/irqpilot/internal/apply"
	"github.com/irqpilot/irqpilot/internal/bench/testbed"
	"github.com/irqpilot/irqpilot/internal/bench/workload"
	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/load"
	"github.com/irqpilot/irqpilot/internal/policy"
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

// All runs every configuration Rounds times, interleaved, each round in
// its RoundOrder (a Williams design: positions and predecessors balanced).
//
// In a fixed order every configuration always followed the same other one:
// the first of a round always ran after the last configuration's revert,
// and with ratios paired by round (Summarize) the udp A/A twin, always
// second, measured 1.019 (1.005–1.060) of its baseline, a verdict of
// "better" for two identical runs. Rotating the order (session 4) moved
// every configuration through every position but still kept each one's
// predecessor, so whatever one left behind (threads where it pinned them,
// warm or cold caches) biased the same neighbour in every round; the
// Williams order varies both, and that carry-over averages out.
func (r *Runner) All(ctx context.Context) ([]Run, error) {
	var runs []Run
	if err := r.prime(ctx); err != nil {
		return nil, err
	}
	for round := 0; round < r.Rounds; round++ {
		for _, c := range RoundOrder(r.Configs, round) {
			if err := ctx.Err(); err != nil {
				return runs, err
			}
			r.progress("round %d/%d  %-20s", round+1, r.Rounds, c)
			run, err := r.Measure(ctx, c, round)
			if err != nil {
				return runs, err
			}
			runs = append(runs, run)
		}
	}
	return runs, nil
}

// currentApp is the application with its process ids read again: thread
// ids change (nginx may respawn a worker).
func (r *Runner) currentApp() workload.AppInfo {
	app := r.app
	if len(app.PIDs) > 0 {
		app.PIDs = append([]int{app.PIDs[0]}, testbed.Children(r.FS, app.PIDs[0])...)
	}
	return app
}

// netDevPID is a process of the server's network namespace when the
// application runs in one (the testbed's), whose device counts the model
// needs: the server veth is not in this process's namespace. 0 otherwise.
func (r *Runner) netDevPID() int {
	if r.app.NSRoot == "" || len(r.app.PIDs) == 0 {
		return 0
	}
	return r.app.PIDs[0]
}

// measureApp is the application as Measure sets a configuration up for
// it: its current processes and the baseline's measured load.
func (r *Runner) measureApp() workload.AppInfo {
	app := r.currentApp()
	app.BaselineLoad = r.baseline
	return app
}

// prime runs the workload for Prime under the default configuration (the
// scenario's fixed placements applied, then reverted), unmeasured (see
// Runner.Prime).
func (r *Runner) prime(ctx context.Context) (err error) {
	if r.Prime <= 0 {
		return nil
	}
	app := r.currentApp()
	s, err := r.Setup("default", app)
	if err != nil {
		return err
	}
	undo, err := r.applySetup("default (priming)", s, app)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, undo()) }()
	r.progress("priming: %s of unmeasured load", r.Prime)
	if _, err := r.Workload.Run(ctx, r.Prime, s.Placement()); err != nil {
		return fmt.Errorf("priming run: %w", err)
	}
	return nil
}

// RoundOrder is the order of configs in round (from 0): row round of a
// Williams design (see All for why). Over n rounds for n configurations,
// 2n when n is odd (the rows, then the same rows reversed), every
// configuration takes every position equally often and, inside the rounds,
// follows every other one equally often; --rounds a multiple of that
// balances a bench. Row 0 for n = 4 is 0 1 3 2; row i adds i mod n.
func RoundOrder(configs []string, round int) []string {
	n := len(configs)
	if n == 0 {
		return nil
	}
	// The first row interleaves from both ends: 0, 1, n-1, 2, n-2, …
	first := make([]int, n)
	lo, hi := 1, n-1
	for j := 1; j < n; j++ {
		if j%2 == 1 {
			first[j] = lo
			lo++
		} else {
			first[j] = hi
			hi--
		}
	}
	period := n
	if n%2 == 1 {
		period = 2 * n
	}
	k := round % period
	out := make([]string, n)
	for j := range first {
		out[j] = configs[(first[j]+k)%n]
	}
	if k >= n {
		slices.Reverse(out)
	}
	return out
}

// Measure applies config, drives the workload for Duration while sampling
// per-CPU load, and reverts. A workload failure is recorded in the run; a
// failure to apply or revert is returned.
func (r *Runner) Measure(ctx context.Context, config string, round int) (run Run, err error) {
	run = Run{Config: config, Round: round, Start: time.Now().UTC()}
	app := r.measureApp()
	s, err := r.Setup(config, app)
	if err != nil {
		return run, err
	}
	if r.Setups == nil {
		r.Setups = map[string]*Setup{}
	}
	if _, seen := r.Setups[config]; !seen {
		s.Baseline = policy.Measured(app.BaselineLoad)
		r.Setups[config] = s
	}
	run.AppCPUs, run.ClientCPUs = r.placement(s)
	undo, err := r.applySetup(config, s, app)
	if err != nil {
		return run, err
	}
	defer func() {
		if uerr := undo(); uerr != nil {
			err = errors.Join(err, uerr)
		}
	}()
	if s.Irqbalance {
		iu, ierr := r.irqbalance()
		if ierr != nil {
			return run, ierr
		}
		prev := undo
		undo = func() error { return errors.Join(iu(), prev()) }
	}
	sampler := load.NewSampler(r.FS)
	sampler.Tasks = BaseConfig(config) == "default" // auto places the consumer from its measured threads
	sampler.NetDevPID = r.netDevPID()
	// Warm-up: the workload runs, unmeasured, so caches, connection pools
	// and the scheduler settle into the configuration before it counts.
	if r.Warmup > 0 {
		if _, werr := r.Workload.Run(ctx, r.Warmup, s.Placement()); werr != nil {
			run.Error = "warm-up: " + werr.Error()
			return run, nil
		}
	}
	s0, err := sampler.Sample()
	if err != nil {
		return run, err
	}
	// A workload that marks its traffic's window is sampled inside it; a
	// failed sample at a mark keeps the outer one.
	var on, off *load.Sample
	var res workload.Result
	var werr error
	if wl, ok := r.Workload.(workload.Windowed); ok {
		res, werr = wl.RunWindow(ctx, r.Duration, s.Placement(), workload.Window{
			On:  func() { on, _ = sampler.Sample() },
			Off: func() { off, _ = sampler.Sample() },
		})
	} else {
		res, werr = r.Workload.Run(ctx, r.Duration, s.Placement())
	}
	s1, err := sampler.Sample()
	if err != nil {
		return run, err
	}
	if on != nil && off != nil {
		s0, s1 = on, off
	}
	l, err := load.Rates(s0, s1)
	if err != nil {
		return run, err
	}
	if BaseConfig(config) == "default" && werr == nil {
		r.baseline = l
	}
	for _, c := range l.CPUs {
		run.CPUs = append(run.CPUs, CPU(c))
	}
	if werr != nil {
		run.Error = werr.Error()
	} else {
		run.Result = res
		for _, c := range l.CPUs {
			run.BusyCPUs += c.Busy() / 100
		}
		work := res.Throughput
		if res.LowerIsBetter { // a latency: the work is the messages exchanged
			work = res.Rate
		}
		if run.BusyCPUs > 0 {
			run.PerCPUSecond = work / run.BusyCPUs
		}
	}
	return run, nil
}

// placement is where a setup lets the application and the load generator
// run, a free one on every online CPU; no load generator for a workload
// that is its own load (storage's fio, a command).
func (r *Runner) placement(s *Setup) (app, client string) {
	var online cpuset.Set
	if r.h != nil {
		online = r.h.Topology.Online
	}
	pick := func(set cpuset.Set) string {
		if set.IsEmpty() {
			set = online
		}
		return set.String()
	}
	app = pick(s.AppCPUs)
	switch r.Workload.(type) {
	case *workload.NetWorkload, *workload.DBWorkload, *workload.SockperfWorkload:
		client = pick(s.ClientCPUs)
	}
	return app, client
}
