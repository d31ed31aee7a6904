package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/irqpilot/irqpilot/internal/bench/workload"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/load"
	"github.com/irqpilot/irqpilot/internal/plan"
	"github.com/irqpilot/irqpilot/internal/policy"
	"github.com/irqpilot/irqpilot/internal/setting"
	"github.com/irqpilot/irqpilot/internal/verify"
)

// PredictionOptions shape the predictions campaign (Predictions).
type PredictionOptions struct {
	// Window is each measurement, before and after the change (as
	// apply --verify's window).
	Window time.Duration
	// Warmup is how long the workload runs before the first window.
	Warmup time.Duration
	// Cost reads interrupt time with the eBPF collector (nil: estimated
	// from counts), as apply --verify does where the collector loads.
	Cost load.CostReader
	// Tolerance is verify's tolerance (verify.DefaultTolerance when 0).
	Tolerance float64
}

// PredictionRow is one policy's plan on one workload, verified.
type PredictionRow struct {
	Workload string `json:"workload"`
	Policy   string `json:"policy"`
	Round    int    `json:"round"`
	// Changes is how many kernel writes the plan made on the devices under
	// test (0: the policy kept the machine as it was).
	Changes int `json:"changes"`
	// Why is the plan's why line (auto says what it chose).
	Why string `json:"why,omitempty"`
	// Dropped are the plan's entries outside the devices under test, left
	// out of both the change and its prediction.
	Dropped []string `json:"dropped,omitempty"`
	// Verification is verify.Judge's result: the verdict and per CPU
	// before, predicted, measured and error.
	Verification *verify.Result `json:"verification,omitempty"`
	// WorkloadError is the workload's failure during the row, if any.
	WorkloadError string `json:"workload_error,omitempty"`
	Error         string `json:"error,omitempty"`
}

// Kept says the row's plan changed something: a policy's plan that is
// not empty (for auto: a change auto chose to keep, not "leave as is").
func (r PredictionRow) Kept() bool { return r.Changes > 0 }

// PredictionReport is a predictions campaign on one workload.
type PredictionReport struct {
	Workload      string          `json:"workload"`
	Host          string          `json:"host"`
	Kernel        string          `json:"kernel"`
	CPUs          int             `json:"cpus"`
	WindowSeconds float64         `json:"window_seconds"`
	Started       time.Time       `json:"started"`
	Finished      time.Time       `json:"finished"`
	Scope         *Scope          `json:"scope,omitempty"`
	Rows          []PredictionRow `json:"rows"`
	Restored      bool            `json:"restored"`
	Diff          []string        `json:"diff,omitempty"`
}

// Predictions is the model's report card on one workload: for each policy
// (r.Rounds times, interleaved as bench interleaves configurations) it
// starts the workload, measures a window, makes the policy's plan from that
// measurement with its prediction (policy.Predict, scoped to the devices
// under test as every bench configuration is), applies it, waits for moved
// IRQs, measures the same window again and judges the prediction with
// package verify — the code `apply --verify` runs — then reverts. The
// machine state is read before and after, as Bench does.
func Predictions(ctx context.Context, r *Runner, policies []string, o PredictionOptions) (rep *PredictionReport, err error) {
	if o.Window <= 0 {
		return nil, fmt.Errorf("predictions: window %v: must be positive", o.Window)
	}
	for _, p := range policies {
		if _, ok := policy.Policies[p]; !ok {
			return nil, fmt.Errorf("predictions: %q is not a policy (%v)", p, policy.PolicyNames())
		}
	}
	before, err := ReadMachineState(r.FS)
	if err != nil {
		return nil, err
	}
	rep = &PredictionReport{Workload: r.Workload.Name(), WindowSeconds: o.Window.Seconds(), Started: time.Now().UTC()}
	defer func() {
		if cerr := r.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("close workload: %w", cerr))
		}
		after, serr := ReadMachineState(r.FS)
		if serr != nil {
			err = errors.Join(err, serr)
			return
		}
		rep.Diff = before.Diff(after)
		rep.Restored = len(rep.Diff) == 0
		rep.Finished = time.Now().UTC()
	}()
	if err := r.Start(); err != nil {
		return rep, err
	}
	h := r.Host()
	rep.Host, rep.Kernel, rep.CPUs = h.Hostname, h.Kernel, len(h.CPUs)
	sc := r.Scope()
	rep.Scope = &sc
	if err := r.prime(ctx); err != nil {
		return rep, err
	}
	rounds := max(1, r.Rounds)
	for round := 0; round < rounds; round++ {
		for _, p := range RoundOrder(policies, round) {
			if err := ctx.Err(); err != nil {
				return rep, err
			}
			r.progress("round %d/%d  %-16s predict, apply, verify", round+1, rounds, p)
			row, err := r.predictOne(ctx, p, o)
			row.Round = round
			rep.Rows = append(rep.Rows, row)
			if err != nil {
				return rep, err
			}
			if v := row.Verification; v != nil {
				r.progress("  %s: %s (busy error mean %.1f worst %.1f, interrupts mean %.1f worst %.1f)", p, v.Verdict,
					v.MeanBusyError, v.MaxBusyError, v.MeanIRQError, v.MaxIRQError)
			}
		}
	}
	return rep, nil
}

// predictOne is one row: the workload runs through both windows; the
// policy's plan is made, applied and verified in between. A failure to
// apply or revert is returned; a workload failure is recorded in the row.
func (r *Runner) predictOne(ctx context.Context, pol string, o PredictionOptions) (row PredictionRow, err error) {
	row = PredictionRow{Workload: r.Workload.Name(), Policy: pol}
	app := r.currentApp()
	// The scenario's own placements (--client-cpus, --app-cpus) hold for
	// the whole row, as under bench's default configuration.
	base, err := r.Setup("default", app)
	if err != nil {
		return row, err
	}
	undoBase, err := r.applySetup("default (predictions)", base, app)
	if err != nil {
		return row, err
	}
	defer func() { err = errors.Join(err, undoBase()) }()

	// The workload runs for both windows and what lies between them; it is
	// started once so that the change lands under a running load, as it
	// does on a production machine.
	total := o.Warmup + 2*o.Window + settleMax + 3*time.Second
	started := make(chan struct{})
	var once sync.Once
	on := func() { once.Do(func() { close(started) }) }
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		var werr error
		if wl, ok := r.Workload.(workload.Windowed); ok {
			_, werr = wl.RunWindow(wctx, total, base.Placement(r.FS.Programs()), workload.Window{On: on})
		} else {
			_, werr = r.Workload.Run(wctx, total, base.Placement(r.FS.Programs()))
		}
		done <- werr
	}()
	defer func() {
		// A workload that ended by itself before both windows were
		// measured failed (its error is the row's); one still running is
		// stopped, and its error then is the stop's.
		select {
		case werr := <-done:
			if werr != nil {
				row.WorkloadError = werr.Error()
			}
		default:
			cancel()
			<-done
		}
	}()
	// A workload that marks its traffic (the udp flood) is measured from
	// its mark; the others start in milliseconds.
	if _, ok := r.Workload.(workload.Windowed); ok {
		select {
		case <-started:
		case werr := <-done:
			done <- werr
			row.Error = "the workload ended before its traffic started"
			return row, nil
		case <-time.After(5 * time.Second):
		case <-ctx.Done():
			return row, ctx.Err()
		}
	}
	if !sleepCtx(ctx, o.Warmup) {
		return row, ctx.Err()
	}

	sampler := load.NewSampler(r.FS)
	sampler.Tasks = true // the model moves the application's measured threads
	sampler.NetDevPID = r.netDevPID()
	sampler.Cost = o.Cost
	h := r.Host()
	beforeM, l, err := verify.Measure(ctx, sampler, h, o.Window)
	if err != nil {
		return row, fmt.Errorf("%s: measuring before the change: %w", pol, err)
	}

	// The plan, made from that measurement (it carries its prediction).
	app = r.currentApp()
	app.BaselineLoad = l
	s, err := r.Setup(pol, app)
	if err != nil {
		return row, err
	}
	row.Changes = len(s.Changes)
	if len(s.Notes) > 0 {
		row.Why = s.Notes[0]
	}
	pred, dropped := scopedPrediction(h, l, s.Plan, r.Scope(), app)
	row.Dropped = dropped
	if pred == nil {
		row.Error = "the policy made no plan to predict"
		return row, nil
	}

	undo, err := r.applySetup(pol, s, app)
	if err != nil {
		return row, err
	}
	defer func() { err = errors.Join(err, undo()) }()
	r.settle(ctx, s.Changes)
	afterM, _, err := verify.Measure(ctx, sampler, h, o.Window)
	if err != nil {
		return row, fmt.Errorf("%s: measuring after the change: %w", pol, err)
	}
	res := verify.Judge(pred, beforeM, afterM, verify.Options{Tolerance: o.Tolerance})
	row.Verification = &res
	return row, nil
}

// settleMax bounds how long a row waits for moved IRQs to take effect.
const settleMax = 3 * time.Second

// settle waits, as apply --verify does, until no IRQ the change moved is
// still served where it was (a move takes effect when the IRQ next fires),
// up to settleMax, then half a second for queues and backlogs to drain.
func (r *Runner) settle(ctx context.Context, changes []setting.Change) {
	var irqs []int
	for i := range changes {
		if sc := setting.ScopeOf(&changes[i]); sc.IRQ >= 0 {
			irqs = append(irqs, sc.IRQ)
		}
	}
	fs := r.FS
	deadline := time.Now().Add(settleMax)
	for len(irqs) > 0 && time.Now().Before(deadline) {
		pending := false
		for _, n := range irqs {
			allowed, err1 := fs.ReadIRQAffinity(n)
			effective, err2 := fs.ReadIRQEffectiveAffinity(n)
			if err1 == nil && err2 == nil && host.MovePending(allowed, effective) {
				pending = true
				break
			}
		}
		if !pending || !sleepCtx(ctx, 200*time.Millisecond) {
			break
		}
	}
	sleepCtx(ctx, 500*time.Millisecond)
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// scopedPrediction is the prediction for what bench applies of p: the
// plan's entries on the devices under test (the rest are dropped from the
// change by Scope.Restrict, so from the prediction too), with its
// application entry standing for every server process bench pins (the
// policy's selector names the first; nginx's and MariaDB's work is done by
// the others' threads). On a plan whose entries all lie inside the scope
// and whose application is one process, this is the prediction the plan
// carries.
func scopedPrediction(h *host.Host, l *load.Load, p *plan.Plan, sc Scope, app workload.AppInfo) (*plan.Prediction, []string) {
	if p == nil {
		return nil, nil
	}
	var dropped []string
	q := &plan.Plan{Version: p.Version, Policy: p.Policy}
	inDev := func(dev string) bool { return dev != "" && (dev == sc.NetDevice || dev == sc.Disk) }
	for _, e := range p.IRQs {
		switch {
		case e.IRQ != nil && sc.hasIRQ(*e.IRQ), e.IRQ == nil && inDev(e.Device):
			q.IRQs = append(q.IRQs, e)
		default:
			dropped = append(dropped, fmt.Sprintf("irq entry %s", irqEntryName(e)))
		}
	}
	for _, e := range p.RxQueues {
		if inDev(e.Device) {
			q.RxQueues = append(q.RxQueues, e)
		} else {
			dropped = append(dropped, "rx queues of "+e.Device)
		}
	}
	for _, e := range p.TxQueues {
		if inDev(e.Device) {
			q.TxQueues = append(q.TxQueues, e)
		} else {
			dropped = append(dropped, "tx queues of "+e.Device)
		}
	}
	for _, e := range p.NAPI {
		if inDev(e.Device) {
			q.NAPI = append(q.NAPI, e)
		} else {
			dropped = append(dropped, "NAPI of "+e.Device)
		}
	}
	for _, a := range p.Apps {
		if len(app.PIDs) == 0 {
			dropped = append(dropped, "application "+a.Selector())
			continue
		}
		a.PID, a.Comm, a.Unit, a.Cgroup = 0, "", "", ""
		q.Apps = append(q.Apps, a)
	}
	slices.Sort(dropped)
	return policy.Predict(h, l, q, app.PIDs), slices.Compact(dropped)
}

func irqEntryName(e plan.IRQEntry) string {
	switch {
	case e.IRQ != nil:
		return fmt.Sprintf("%d", *e.IRQ)
	case e.Device != "":
		return e.Device
	}
	return e.Action
}

// PredictionStats summarise rows: the mean over the rows' per-CPU absolute
// errors, the worst, and the verdicts. The errors are over the judged rows
// (not inconclusive); All are the same over every row with a measurement.
type PredictionStats struct {
	Rows          int            `json:"rows"`
	Judged        int            `json:"judged"`
	MeanBusyError float64        `json:"mean_abs_busy_error_pct"`
	MaxBusyError  float64        `json:"max_abs_busy_error_pct"`
	MeanIRQError  float64        `json:"mean_abs_irq_error_pct"`
	MaxIRQError   float64        `json:"max_abs_irq_error_pct"`
	All           ErrorStats     `json:"all"`
	Verdicts      map[string]int `json:"verdicts"`
}

// ErrorStats are mean and worst absolute errors, points.
type ErrorStats struct {
	Rows          int     `json:"rows"`
	MeanBusyError float64 `json:"mean_abs_busy_error_pct"`
	MaxBusyError  float64 `json:"max_abs_busy_error_pct"`
	MeanIRQError  float64 `json:"mean_abs_irq_error_pct"`
	MaxIRQError   float64 `json:"max_abs_irq_error_pct"`
}

func errorStats(rows []*verify.Result) ErrorStats {
	var e ErrorStats
	var n float64
	for _, v := range rows {
		e.Rows++
		for _, c := range v.CPUs {
			e.MeanBusyError += math.Abs(c.BusyError)
			e.MeanIRQError += math.Abs(c.IRQError)
			n++
		}
		e.MaxBusyError = math.Max(e.MaxBusyError, v.MaxBusyError)
		e.MaxIRQError = math.Max(e.MaxIRQError, v.MaxIRQError)
	}
	if n > 0 {
		e.MeanBusyError, e.MeanIRQError = round1(e.MeanBusyError/n), round1(e.MeanIRQError/n)
	}
	return e
}

// SummarisePredictions is the statistics of rows. Rows without a
// verification (an error) count in Rows only; inconclusive rows' errors
// are left out of the judged errors (the workload's packet rate moved
// under them, and the model predicts at the rate it measured) but count
// in All.
func SummarisePredictions(rows []PredictionRow) PredictionStats {
	st := PredictionStats{Verdicts: map[string]int{}}
	var judged, all []*verify.Result
	for _, r := range rows {
		st.Rows++
		v := r.Verification
		if v == nil {
			st.Verdicts["error"]++
			continue
		}
		st.Verdicts[string(v.Verdict)]++
		if len(v.CPUs) == 0 {
			continue
		}
		all = append(all, v)
		if v.Verdict != verify.Inconclusive {
			judged = append(judged, v)
		}
	}
	j := errorStats(judged)
	st.Judged = j.Rows
	st.MeanBusyError, st.MaxBusyError, st.MeanIRQError, st.MaxIRQError = j.MeanBusyError, j.MaxBusyError, j.MeanIRQError, j.MaxIRQError
	st.All = errorStats(all)
	return st
}
