package bench

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/irqpilot/irqpilot/internal/bench/workload"
	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/plan"
	"github.com/irqpilot/irqpilot/internal/policy"
	"github.com/irqpilot/irqpilot/internal/program"
	"github.com/irqpilot/irqpilot/internal/setting"
)

// Setup is one configuration made concrete for a host and an application.
type Setup struct {
	Config string `json:"config"`
	// Changes are the kernel writes (applied with package apply, reverted
	// after the run). Paths below sys/class/net/<AppInfo.Device> go to the
	// testbed namespace's view.
	Changes []setting.Change `json:"changes"`
	// AppCPUs places an application started per run (fio, a command) and,
	// for servers, is already in Changes as thread affinities. Empty: free.
	AppCPUs cpuset.Set `json:"app_cpus"`
	// ClientCPUs places the load generator (empty: free).
	ClientCPUs cpuset.Set `json:"client_cpus"`
	// BusyPoll, when set, is how the udp workload's sink waits in this
	// configuration (NetOptions.BusyPoll otherwise).
	BusyPoll *workload.BusyPoll `json:"busy_poll,omitempty"`
	// Irqbalance: run `irqbalance --oneshot` and measure its placement.
	Irqbalance bool     `json:"irqbalance,omitempty"`
	Notes      []string `json:"notes,omitempty"`
	// Baseline is the measured load the configuration was decided from
	// (auto's evidence), nil for fixed configurations.
	Baseline *policy.MeasuredLoad `json:"-"`
	// Dropped are the changes the configuration wanted outside the devices
	// under test, left out by Scope.Restrict.
	Dropped []string `json:"dropped,omitempty"`
	// Plan is the policy's plan the changes were resolved from (nil for
	// configurations that are not a policy): the predictions campaign
	// (Predictions) predicts it.
	Plan *plan.Plan `json:"-"`
}

// Placement is what the setup says about the workload's own processes,
// which programs start (the machine's: Runner.FS.Programs).
func (s *Setup) Placement(programs program.Runner) workload.Placement {
	return workload.Placement{Config: s.Config, AppCPUs: s.AppCPUs, ClientCPUs: s.ClientCPUs, BusyPoll: s.BusyPoll, Programs: programs}
}

// Configurator turns a configuration name into a Setup for a host.
type Configurator interface {
	Setup(config string, h *host.Host, app workload.AppInfo) (*Setup, error)
}

// Configs is the built-in configurator:
//
//   - "default": no change (the machine as it is).
//   - "irqbalance": irqbalance --oneshot's placement (see Runner).
//   - a policy name of package plan (dedicated-core, per-queue, colocate,
//     rps-spread, auto): the policy's plan for the host, restricted to the
//     testbed's device, with the server processes as the application.
//   - "spec:KEY=VAL,…": an explicit placement, the unit of tune's and the
//     exhaustive search's spaces. Keys: app, client, napi (cpulists), rps
//     (cpulist or "off", on every rx queue of the device), flows
//     (rps_flow_cnt and rps_sock_flow_entries = flows×queues), irq=N:CPUS
//     (repeatable with ";" between).
//   - "napi:KEY=VAL,…": explicit NAPI settings of the device under test
//     (see Knobs).
//   - "A&B": configurations A and B together (Combine): a placement with
//     NAPI settings ("spec:app=1,rps=0&napi:defer=2,flush=20000",
//     "rps-spread&napi:threaded=1"), tune's combined candidates.
type Configs struct {
	// PlanOptions are passed to every policy (housekeeping CPUs …).
	PlanOptions policy.Options
}

// Setup implements Configurator.
func (c Configs) Setup(config string, h *host.Host, app workload.AppInfo) (*Setup, error) {
	if strings.Contains(config, CombineSep) {
		return Combine(c, config, h, app)
	}
	s := &Setup{Config: config}
	switch {
	case config == "default":
		return s, nil
	case config == "irqbalance":
		s.Irqbalance = true
		return s, nil
	case strings.HasPrefix(config, "spec:"):
		return specSetup(config, h, app)
	case strings.HasPrefix(config, "napi:"):
		return knobSetup(config, h, app)
	}
	if _, ok := policy.Policies[config]; !ok {
		return nil, fmt.Errorf("unknown configuration %q (known: default, irqbalance, spec:…, %s)", config, strings.Join(policy.PolicyNames(), ", "))
	}
	o := c.PlanOptions
	if app.Device != "" {
		o.Devices = []string{app.Device}
		// Scope.Restrict decides what a run may change machine-wide (the
		// RFS table when the device is steered).
		o.MachineWide = true
	}
	if len(app.PIDs) > 0 {
		o.App = "pid:" + strconv.Itoa(app.PIDs[0])
	}
	if o.Load == nil {
		o.Load = policy.Measured(app.BaselineLoad)
	}
	p, err := policy.Make(config, h, o)
	if err != nil {
		return nil, err
	}
	sets, err := plan.Resolve(p, h)
	if err != nil {
		return nil, fmt.Errorf("%s: resolve: %w", config, err)
	}
	changes, appCPUs, notes, err := SettingsToChanges(sets, app)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", config, err)
	}
	s.Changes, s.Notes = changes, append([]string{p.Why}, notes...)
	s.Plan = p
	s.AppCPUs = appCPUs
	if s.AppCPUs.IsEmpty() && p.AppCPUs != nil {
		s.AppCPUs = *p.AppCPUs
	}
	return s, nil
}

// SettingsToChanges turns resolved plan settings into the changes bench
// writes. An app setting pins every thread of every process in app.PIDs
// (the plan selected the first; the others are its workers). Skipped
// settings and kinds bench does not write (irqbalance: bench measures it as
// a configuration of its own; coalescing) become notes.
func SettingsToChanges(sets []setting.Change, app workload.AppInfo) ([]setting.Change, cpuset.Set, []string, error) {
	var out []setting.Change
	var notes []string
	var appCPUs cpuset.Set
	for _, st := range sets {
		switch {
		case st.Status == setting.StatusSkipped:
			notes = append(notes, st.Target+": "+st.Note)
		case st.Kind == setting.KindApp:
			cpus, err := cpuset.Parse(st.Value)
			if err != nil {
				return nil, appCPUs, nil, fmt.Errorf("%s: %w", st.Target, err)
			}
			appCPUs = cpus
			for _, pid := range app.PIDs {
				ch, err := setting.PinProcess(app.FS, pid, "app", cpus, st.Reason)
				if err != nil {
					return nil, appCPUs, nil, err
				}
				out = append(out, ch...)
			}
		case st.Kind == setting.KindIrqbalance || st.Kind == setting.KindCoalesce:
			notes = append(notes, fmt.Sprintf("%s: %s not applied by bench", st.Target, st.Kind))
		default:
			c := st
			c.Old, c.Status, c.Note = "", "", ""
			out = append(out, c)
		}
	}
	return out, appCPUs, notes, nil
}

// Spec is an explicit placement (see Configs).
type Spec struct {
	App, Client, NAPI *cpuset.Set
	RPS               *cpuset.Set // empty set: RPS off
	Flows             int
	IRQs              map[int]cpuset.Set
}

// SpecFields are the KEY=VALUE fields of a spec: configuration, as
// ParseSpec reads them.
var SpecFields = []string{"app", "client", "rps", "napi", "flows", "irq"}

// ParseSpec reads "spec:app=1,client=0,rps=0-1,napi=0,flows=4096,irq=36:1".
func ParseSpec(config string) (*Spec, error) {
	body, ok := strings.CutPrefix(config, "spec:")
	if !ok {
		return nil, fmt.Errorf("%q: not a spec configuration", config)
	}
	s := &Spec{IRQs: map[int]cpuset.Set{}}
	for _, kv := range strings.Split(body, ",") {
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, fmt.Errorf("%q: %q is not KEY=VALUE", config, kv)
		}
		set := func() (*cpuset.Set, error) {
			if v == "off" && k == "rps" {
				e := cpuset.Set{}
				return &e, nil
			}
			cs, err := cpuset.Parse(strings.ReplaceAll(v, "+", ","))
			if err != nil {
				return nil, fmt.Errorf("%q: %s: %w", config, k, err)
			}
			return &cs, nil
		}
		var err error
		switch k {
		case "app":
			s.App, err = set()
		case "client":
			s.Client, err = set()
		case "napi":
			s.NAPI, err = set()
		case "rps":
			s.RPS, err = set()
		case "flows":
			s.Flows, err = strconv.Atoi(v)
		case "irq":
			for _, one := range strings.Split(v, ";") {
				n, cpus, ok := strings.Cut(one, ":")
				irq, e1 := strconv.Atoi(n)
				cs, e2 := cpuset.Parse(strings.ReplaceAll(cpus, "+", ","))
				if !ok || e1 != nil || e2 != nil {
					return nil, fmt.Errorf("%q: irq=%s: want irq=N:CPUS", config, one)
				}
				s.IRQs[irq] = cs
			}
		default:
			return nil, fmt.Errorf("%q: unknown key %q (app, client, napi, rps, flows, irq)", config, k)
		}
		if err != nil {
			return nil, err
		}
	}
	return s, nil
}

// String renders a spec in canonical order.
func (s *Spec) String() string {
	var parts []string
	cl := func(c *cpuset.Set) string {
		if c.IsEmpty() {
			return "off"
		}
		return strings.ReplaceAll(c.String(), ",", "+")
	}
	if s.App != nil {
		parts = append(parts, "app="+cl(s.App))
	}
	if s.Client != nil {
		parts = append(parts, "client="+cl(s.Client))
	}
	if s.NAPI != nil {
		parts = append(parts, "napi="+cl(s.NAPI))
	}
	if s.RPS != nil {
		parts = append(parts, "rps="+cl(s.RPS))
	}
	if s.Flows > 0 {
		parts = append(parts, "flows="+strconv.Itoa(s.Flows))
	}
	var is []string
	for _, n := range slices.Sorted(maps.Keys(s.IRQs)) {
		c := s.IRQs[n]
		is = append(is, fmt.Sprintf("%d:%s", n, cl(&c)))
	}
	if len(is) > 0 {
		parts = append(parts, "irq="+strings.Join(is, ";"))
	}
	return "spec:" + strings.Join(parts, ",")
}

func specSetup(config string, h *host.Host, app workload.AppInfo) (*Setup, error) {
	sp, err := ParseSpec(config)
	if err != nil {
		return nil, err
	}
	s := &Setup{Config: config}
	nr := nrCPUs(h)
	if sp.Client != nil {
		s.ClientCPUs = *sp.Client
	}
	if sp.App != nil {
		s.AppCPUs = *sp.App
		for _, pid := range app.PIDs {
			ch, err := setting.PinProcess(app.FS, pid, "app", *sp.App, config)
			if err != nil {
				return nil, err
			}
			s.Changes = append(s.Changes, ch...)
		}
	}
	if sp.NAPI != nil {
		if len(app.NAPIThreads) == 0 && app.Device != "" {
			s.Notes = append(s.Notes, "napi= given but the testbed has no threaded NAPI")
		}
		for _, tid := range app.NAPIThreads {
			start, _ := app.FS.TaskStart(tid)
			s.Changes = append(s.Changes, setting.ThreadAffinity(tid, start, fmt.Sprintf("napi thread %d", tid), *sp.NAPI, config))
		}
	}
	for n, cpus := range sp.IRQs {
		q := h.IRQ(n)
		if q == nil {
			return nil, fmt.Errorf("%q: no IRQ %d on this machine", config, n)
		}
		if !q.Movable() {
			why := "kernel-managed"
			if q.Class == host.ClassTimer || q.PerCPU() {
				why = "a per-CPU timer or event"
			}
			s.Notes = append(s.Notes, fmt.Sprintf("irq %d is %s; left alone", n, why))
			continue
		}
		s.Changes = append(s.Changes, setting.IRQAffinity(n, fmt.Sprintf("irq %d", n), cpus, config))
	}
	if (sp.RPS != nil || sp.Flows > 0) && app.Device != "" {
		nic := h.NIC(app.Device)
		if nic == nil {
			return nil, fmt.Errorf("%q: device %s not in the host model", config, app.Device)
		}
		for _, rq := range nic.RxQueues {
			if sp.RPS != nil {
				s.Changes = append(s.Changes, setting.RPSCPUs(nic.Name, rq.Index, *sp.RPS, nr, config))
			}
			if sp.Flows > 0 {
				s.Changes = append(s.Changes, setting.RPSFlowCnt(nic.Name, rq.Index, sp.Flows, config))
			}
		}
		if sp.Flows > 0 {
			s.Changes = append(s.Changes, setting.SockFlowEntries(sp.Flows*len(nic.RxQueues), config))
		}
	}
	return s, nil
}

func nrCPUs(h *host.Host) int {
	n := 0
	for _, c := range h.CPUs {
		if c.ID+1 > n {
			n = c.ID + 1
		}
	}
	if n == 0 {
		n = 1
	}
	return n
}

// RunOptions are what a configuration label may add after "/": how the
// application behaves in that configuration, beside the kernel settings
// its name stands for.
type RunOptions struct {
	// BusyPoll: "busypoll=US" (the udp sink's socket busy polling) and
	// "epollbusy=US" (its epoll busy polling, which IRQ suspension needs).
	BusyPoll *workload.BusyPoll
}

// CutRunOptions splits "NAME/KEY=VAL/…" into NAME and its options
// ("latency/busypoll=50", "default/epollbusy=50"; "/" and not "," between
// options, as configurations are listed with commas); a label without "/"
// has none.
func CutRunOptions(config string) (string, RunOptions, error) {
	var o RunOptions
	name, rest, ok := strings.Cut(config, "/")
	if !ok {
		return config, o, nil
	}
	if name == "" {
		return "", o, fmt.Errorf("configuration %q: no name before \"/\"", config)
	}
	for _, kv := range strings.Split(rest, "/") {
		k, v, ok := strings.Cut(kv, "=")
		us, err := strconv.Atoi(v)
		if !ok || err != nil {
			return "", o, fmt.Errorf("configuration %q: %q is not KEY=MICROSECONDS (busypoll, epollbusy)", config, kv)
		}
		if o.BusyPoll == nil {
			o.BusyPoll = &workload.BusyPoll{}
		}
		switch k {
		case "busypoll":
			o.BusyPoll.SocketUsecs = us
		case "epollbusy":
			o.BusyPoll.EpollUsecs = us
		default:
			return "", o, fmt.Errorf("configuration %q: unknown option %q (busypoll, epollbusy)", config, k)
		}
	}
	if o.BusyPoll != nil {
		if err := o.BusyPoll.Check(); err != nil {
			return "", o, fmt.Errorf("configuration %q: %w", config, err)
		}
	}
	return name, o, nil
}
