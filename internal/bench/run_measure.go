package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/irqpilot/irqpilot/internal/bench/testbed"
	"github.com/irqpilot/irqpilot/internal/bench/workload"
	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/load"
	"github.com/irqpilot/irqpilot/internal/policy"
)

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
	if _, err := r.Workload.Run(ctx, r.Prime, s.Placement(r.FS.Programs())); err != nil {
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
		if _, werr := r.Workload.Run(ctx, r.Warmup, s.Placement(r.FS.Programs())); werr != nil {
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
		res, werr = wl.RunWindow(ctx, r.Duration, s.Placement(r.FS.Programs()), workload.Window{
			On:  func() { on, _ = sampler.Sample() },
			Off: func() { off, _ = sampler.Sample() },
		})
	} else {
		res, werr = r.Workload.Run(ctx, r.Duration, s.Placement(r.FS.Programs()))
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
