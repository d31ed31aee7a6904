// Package agent keeps a machine tuned: it enforces a plan through the
// converge pipeline on every interval (re-reading each setting the plan owns
// and re-applying drift through the journal), converges devices as they
// appear (rtnetlink link events), never writes a CPU list naming an offline
// CPU, freezes a setting that something else keeps changing back (ping-pong),
// optionally adapts the plan when a finding with evidence of harm persists
// (--adapt), exports metrics and answers `irqpilot status` on a root-only
// unix socket.
package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/irqpilot/irqpilot/internal/agent/metrics"
	"github.com/irqpilot/irqpilot/internal/apply"
	"github.com/irqpilot/irqpilot/internal/diagnose"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/load"
	"github.com/irqpilot/irqpilot/internal/plan"
	"github.com/irqpilot/irqpilot/internal/policy"
	"github.com/irqpilot/irqpilot/internal/setting"
)

// Defaults.
const (
	DefaultInterval       = 10 * time.Second
	DefaultListen         = "127.0.0.1:9477"
	DefaultPingPongLimit  = 3
	DefaultKeepJournals   = 50
	SocketName            = "agent.sock"
	maxRecent             = 50
	linkSettle            = 50 * time.Millisecond
	minPingPongWindowMult = 20
)

// Options configure an agent.
type Options struct {
	FS       *kernel.FS
	StateDir string
	// PlanFile or Policy (exactly one) say what to enforce.
	PlanFile      string
	Policy        string
	PolicyOptions policy.Options
	Interval      time.Duration
	// Listen is the metrics address ("" disables the HTTP listener).
	Listen string
	// Socket is the status socket ("" → StateDir/agent.sock).
	Socket       string
	Adapt        bool
	AdaptOptions AdaptOptions
	// App is the application traffic is for (a plan selector, --app):
	// --adapt measures its threads and may place it; --policy pins it.
	App string
	// Devices restricts --policy's plan and --adapt's plans to these
	// network interfaces (--device; default every physical NIC).
	Devices []string
	// Planner computes adaptations (default: the auto policy with Devices
	// and App).
	Planner      Planner
	RevertOnExit bool
	// PingPongLimit repairs of one setting within PingPongWindow freeze it
	// (defaults 3 and 20 intervals, at least a minute).
	PingPongLimit  int
	PingPongWindow time.Duration
	// KeepJournals bounds the reverted, rolled-back and no-change journals
	// kept in the state directory, and the applied ones that are
	// superseded (drift repairs, devices that are gone); no other applied
	// journal is pruned.
	KeepJournals int
	Log          *slog.Logger
	// Ready is called once, after the first pass (systemd READY=1); Alive
	// after every pass (the watchdog).
	Ready, Alive func()
	// WatchLinks subscribes to link events (on by default; off only where
	// netlink is unavailable).
	NoLinkEvents bool
}

// BadInputError: the plan or policy could not be used; nothing was touched.
type BadInputError struct{ Err error }

func (e *BadInputError) Error() string { return e.Err.Error() }
func (e *BadInputError) Unwrap() error { return e.Err }

// Agent is one running agent.
type Agent struct {
	o   Options
	log *slog.Logger
	ap  *apply.Applier
	m   *metrics.Agent
	// files is o.FS holding the files it reads open: the applier's reads
	// (every setting, every pass) and the online CPUs are re-read with one
	// pread each. Released when the host is re-read (on link events, among
	// others), on every pass when there are no link events, and when Run
	// ends.
	files *kernel.FS
	// diffMemo: the last pass's validation and verdicts (apply.DiffMemo).
	diffMemo apply.DiffMemo

	hostModel atomic.Pointer[host.Host]
	// lastStatus is the status as the last pass (or status query) left
	// it: what a query gets while a pass holds mu (Status).
	lastStatus atomic.Pointer[Status]
	trigger    chan string
	reloadReq  chan chan error

	mu       sync.Mutex
	pl       *plan.Plan
	planHash string
	prevPlan *plan.Plan // the plan an adaptation replaced
	changes  []setting.Change
	skipped  []setting.Change
	// established: keys written or found in force since they last
	// appeared; a pending established key is drift.
	established map[string]bool
	// keyDev: the device of each key resolved in this run; heldForCPU:
	// established keys out of the plan while their device stayed (true:
	// still out, waiting for a CPU; false: back, the next repair is the
	// kernel's doing and counts no ping-pong).
	keyDev      map[string]string
	heldForCPU  map[string]bool
	repairTimes map[string][]time.Time
	// writeFails counts, per setting, the passes in a row whose write of
	// it failed (noteWrites parks it at PingPongLimit).
	writeFails  map[string]int
	frozen      map[string]*Frozen
	waiting     []string
	repairs     []Repair
	adaptations []Adaptation
	findings    []diagnose.Finding
	journals    []string // journals this agent wrote, oldest first
	// firstWriter: per setting key, the first journal of this run that
	// wrote it; repairJournals: the journals holding only drift repairs,
	// oldest first (pruneRepairs).
	firstWriter    map[string]string
	repairJournals []repairJournal
	devs           devTrack // device incarnations, their journals (refresh.go, journals.go)
	needResolve    bool
	linkEvents     bool // WatchLinks is delivering link events
	// appearedLinks: links that appeared since the last link-triggered
	// pass (onLink adds, under mu); passLinks: those of the pass running,
	// so its log names, for each setting applied, the link it belongs to.
	appearedLinks map[string]bool
	passLinks     map[string]bool
	online        string
	started       time.Time
	lastPass      time.Time
	passes        int
	lastErr       string
	lastReload    *ReloadResult

	lastResolve time.Time
	lastLoad    *load.Load

	sampler *load.Sampler
	prev    *load.Sample
	adapt   *adaptState
}

// New checks the options and the plan (or policy) without touching the
// machine: a bad plan file, an unknown policy or a plan that cannot resolve
// on this host is a *BadInputError.
func New(o Options) (*Agent, error) {
	if err := o.check(); err != nil {
		return nil, &BadInputError{fmt.Errorf("%w; nothing was changed", err)}
	}
	if o.FS == nil {
		// The machine comes from the caller (cmd builds the live one), so
		// that an agent can be pointed at a test tree.
		return nil, &BadInputError{errors.New("no machine to keep (Options.FS is nil); nothing was changed")}
	}
	if o.StateDir == "" {
		o.StateDir = apply.DefaultStateDir
	}
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.Socket == "" {
		o.Socket = filepath.Join(o.StateDir, SocketName)
	}
	if o.PingPongLimit <= 0 {
		o.PingPongLimit = DefaultPingPongLimit
	}
	if o.PingPongWindow <= 0 {
		o.PingPongWindow = max(minPingPongWindowMult*o.Interval, time.Minute)
	}
	if o.KeepJournals <= 0 {
		o.KeepJournals = DefaultKeepJournals
	}
	if o.Log == nil {
		o.Log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	var resolveApp func() ([]int, error)
	if o.App != "" {
		r, err := appResolver(o.FS, o.App)
		if err != nil {
			return nil, &BadInputError{fmt.Errorf("--app: %w; nothing was changed", err)}
		}
		resolveApp = r
		o.PolicyOptions.App = o.App
	}
	if len(o.Devices) > 0 {
		o.PolicyOptions.Devices = o.Devices
	}
	if o.Planner == nil {
		o.Planner = autoPlanner(o.PolicyOptions, o.Devices, o.App, resolveApp)
	}
	o.AdaptOptions.defaults()
	if (o.PlanFile == "") == (o.Policy == "") {
		return nil, &BadInputError{errors.New("give exactly one of --plan FILE or --policy NAME")}
	}
	if o.Policy != "" {
		if _, ok := policy.Policies[o.Policy]; !ok {
			return nil, &BadInputError{fmt.Errorf("unknown policy %q (known: %s); nothing was changed", o.Policy, strings.Join(policy.PolicyNames(), ", "))}
		}
	}
	files := o.FS.Held(0)
	ag := &Agent{o: o, log: o.Log, ap: apply.New(files, o.StateDir), files: files,
		trigger: make(chan string, 16), reloadReq: make(chan chan error),
		established: map[string]bool{}, keyDev: map[string]string{}, heldForCPU: map[string]bool{}, repairTimes: map[string][]time.Time{}, writeFails: map[string]int{}, frozen: map[string]*Frozen{}, firstWriter: map[string]string{},
		sampler: load.NewSampler(o.FS), adapt: newAdaptState(o.AdaptOptions)}
	if resolveApp != nil && o.Adapt {
		// The application's threads only (not every thread on the host):
		// auto places it from their measured CPU use.
		ag.sampler.TaskPIDs = func() []int { pids, _ := resolveApp(); return pids }
	}
	h, err := ag.readHost()
	if err != nil {
		return nil, &BadInputError{fmt.Errorf("read the host: %w; nothing was changed", err)}
	}
	p, hash, err := ag.loadPlan(h)
	if err != nil {
		return nil, &BadInputError{fmt.Errorf("%w; nothing was changed", err)}
	}
	if _, _, _, err := resolve(o.FS, h, p); err != nil {
		return nil, &BadInputError{fmt.Errorf("plan %s does not resolve on this host: %w; nothing was changed", ag.source(), err)}
	}
	ag.pl, ag.planHash = p, hash
	return ag, nil
}

func (ag *Agent) source() string {
	if ag.o.PlanFile != "" {
		return ag.o.PlanFile
	}
	return "policy " + ag.o.Policy
}

func (ag *Agent) readHost() (*host.Host, error) {
	h, err := host.Read(ag.o.FS, host.Options{StateDir: ag.o.StateDir})
	if err == nil {
		ag.hostModel.Store(h)
	}
	return h, err
}

// loadPlan reads and validates the plan file, or makes the policy's plan.
func (ag *Agent) loadPlan(h *host.Host) (*plan.Plan, string, error) {
	if ag.o.PlanFile != "" {
		real, err := checkTrusted("plan file", ag.o.PlanFile)
		if err != nil {
			return nil, "", err
		}
		fh, err := openTrusted("plan file", ag.o.PlanFile, real)
		if err != nil {
			return nil, "", err
		}
		// plan.ReadOpen: a regular file only (a FIFO would block the
		// agent) and at most plan.MaxPlanBytes.
		data, err := plan.ReadOpen(fh, real)
		fh.Close()
		if err != nil {
			return nil, "", fmt.Errorf("plan file: %w", err)
		}
		p, err := plan.Parse(ag.o.PlanFile, data)
		if err != nil {
			return nil, "", notAPlan(ag.o.PlanFile, data, err)
		}
		sum := sha256.Sum256(data)
		return p, hex.EncodeToString(sum[:]), nil
	}
	p, err := policy.Make(ag.o.Policy, h, ag.o.PolicyOptions)
	if err != nil {
		return nil, "", err
	}
	return p, "policy:" + ag.o.Policy, nil
}

// notAPlanEcho is how much of a file that is no plan at all an error shows:
// enough to tell a password file or a key, not its content.
const notAPlanEcho = 4

// notAPlan is the parse error err of the plan file, unless the file is not
// meant as a plan at all (plan.LooksLikePlan): then the error says so and
// shows only the file's first bytes, for the parse errors quote the values
// they refuse, and the log and status would show a file root can read and
// the plan's author perhaps not.
func notAPlan(file string, data []byte, err error) error {
	if plan.LooksLikePlan(data) {
		return err
	}
	return fmt.Errorf("plan file %s is not a plan (no version: at its top; it begins %q); refused", file, data[:min(len(data), notAPlanEcho)])
}

// resolve drops the entries that cannot be written now (devices not
// present, CPUs offline, queues or IRQs a device does not have now) and
// resolves and expands the rest (resolveEach); an entry that does not
// resolve for another reason is the plan's mistake, an error.
func resolve(fs *kernel.FS, h *host.Host, p *plan.Plan) (changes, skipped []setting.Change, waiting []string, err error) {
	changes, skipped, waiting, bad, err := resolveEach(fs, h, p)
	if err != nil {
		return nil, nil, waiting, err
	}
	var mistakes plan.Errors
	for _, u := range bad {
		if !u.Shape {
			mistakes = append(mistakes, u.Err)
		}
	}
	if len(mistakes) > 0 {
		return nil, nil, waiting, mistakes
	}
	return changes, skipped, waiting, nil
}

// Run enforces the plan until ctx ends. It returns an error before touching
// anything when the state directory, the metrics address or the status
// socket cannot be used.
func (ag *Agent) Run(ctx context.Context) error {
	o := ag.o
	if err := apply.SecureStateDir(o.StateDir); err != nil {
		return err
	}
	limit, metricsCap, statusCap := fdLimits()
	var srv *http.Server
	if o.Listen != "" {
		ln, err := net.Listen("tcp", o.Listen)
		if err != nil {
			return fmt.Errorf("metrics listener --listen %s: %w (nothing was changed)", o.Listen, err)
		}
		reg, m, err := metrics.New(&metrics.Source{FS: o.FS, Host: ag.hostModel.Load})
		if err != nil {
			ln.Close()
			return err
		}
		ag.m = m
		mux := http.NewServeMux()
		mux.Handle("/metrics", metrics.Handler(reg))
		var sl net.Listener
		srv, sl = metricsServer(mux, ln, metricsCap, ag.log)
		go srv.Serve(sl)
		defer srv.Close()
		ag.log.Info("metrics", "listen", ln.Addr().String(), "max_connections", metricsCap)
	} else {
		_, m, err := metrics.New(&metrics.Source{FS: o.FS, Host: ag.hostModel.Load})
		if err != nil {
			return err
		}
		ag.m = m
	}
	for _, id := range findingIDs {
		ag.m.FindingActive.WithLabelValues(id).Set(0)
	}
	stopStatus, err := ag.serveStatus(statusCap)
	if err != nil {
		return err
	}
	ag.log.Debug("descriptors", "limit", limit, "metrics_connections", metricsCap, "status_connections", statusCap)
	defer stopStatus()
	defer ag.files.Release()

	ag.recover()
	if !o.NoLinkEvents {
		if err := kernel.WatchLinks(ctx, ag.onLink); err != nil {
			ag.log.Warn("no link events: devices that appear are converged at the next interval", "error", err)
		} else {
			ag.mu.Lock()
			ag.linkEvents = true
			ag.mu.Unlock()
		}
	}
	ag.started = time.Now()
	ag.log.Info("agent started", "plan", ag.source(), "interval", o.Interval, "adapt", o.Adapt, "state_dir", o.StateDir)
	ag.mu.Lock()
	ag.needResolve = true
	ag.mu.Unlock()
	ag.pass("start")
	if o.Ready != nil {
		o.Ready()
	}
	tick := time.NewTicker(o.Interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			ag.stop()
			return nil
		case <-tick.C:
			ag.pass("interval")
		case why := <-ag.trigger:
			// Let a burst of link events settle, then converge once.
			time.Sleep(linkSettle)
			for len(ag.trigger) > 0 {
				<-ag.trigger
			}
			ag.mu.Lock()
			ag.passLinks, ag.appearedLinks = ag.appearedLinks, nil
			ag.mu.Unlock()
			if len(ag.passLinks) > 1 || (len(ag.passLinks) == 1 && !ag.passLinks[strings.TrimSuffix(strings.TrimPrefix(why, "link "), " appeared")]) {
				// A burst: the first event's words would name one link
				// for all.
				why = "links appeared: " + strings.Join(linkNames(ag.passLinks), ", ")
			}
			ag.pass(why)
			ag.passLinks = nil
		case done := <-ag.reloadReq:
			done <- ag.reload()
		}
	}
}

func (ag *Agent) onLink(e kernel.LinkEvent) {
	ag.mu.Lock()
	ag.needResolve = true
	if !e.Resync && !e.Removed && e.Name != "" {
		if ag.appearedLinks == nil {
			ag.appearedLinks = map[string]bool{}
		}
		ag.appearedLinks[e.Name] = true
	}
	ag.mu.Unlock()
	why := "link " + e.Name + " appeared"
	switch {
	case e.Resync:
		why = "link events resubscribed"
	case e.Removed:
		why = "link " + e.Name + " removed"
	}
	select {
	case ag.trigger <- why:
	default:
	}
}

// entryWhy is why a setting was applied, as its log line says: in a pass
// that links appearing started, the setting's own link when it is one of
// them ("link au4-v0 appeared"), never another link of the burst.
func (ag *Agent) entryWhy(why string, e *setting.Change) string {
	if len(ag.passLinks) == 0 {
		return why
	}
	if e.Device != "" && ag.passLinks[e.Device] {
		return "link " + e.Device + " appeared"
	}
	return "links appeared: " + strings.Join(linkNames(ag.passLinks), ", ")
}

// linkNames lists a set of link names in order.
func linkNames(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
