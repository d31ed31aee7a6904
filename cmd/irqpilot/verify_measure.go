package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/signal"
	"text/tabwriter"
	"time"

	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/load"
	"github.com/irqpilot/irqpilot/internal/plan"
	"github.com/irqpilot/irqpilot/internal/policy"
	"github.com/irqpilot/irqpilot/internal/verify"
)

// liveMeter measures windows of the live machine with one sampler, made
// as doctor's and plan's are (measureSpec.sampler: the eBPF collector where
// it loads, the threads) and the consumers marked the same way, so that a
// prediction made from a window rests on what plan would have measured.
type liveMeter struct {
	fs      *kernel.FS
	sampler *load.Sampler
	stop    func()
	note    string
	ctx     context.Context
	cancel  context.CancelFunc
}

func newLiveMeter(fs *kernel.FS, cost string) (*liveMeter, error) {
	if !fs.IsLive() {
		return nil, errors.New("verification measures the live machine; it cannot run on --root or --snapshot")
	}
	s, stop, note, err := measureSpec{Cost: cost, Tasks: true}.sampler(fs)
	if err != nil {
		return nil, err
	}
	ctx, cancel := signal.NotifyContext(context.Background(), stopSignals...)
	return &liveMeter{fs: fs, sampler: s, stop: stop, note: note, ctx: ctx, cancel: cancel}, nil
}

func (m *liveMeter) close() { m.stop(); m.cancel() }

// measure is one window and its halves. The window's load has its
// consumers marked where the sockets can be read (without them the model
// spreads RFS-steered work as RPS alone would).
func (m *liveMeter) measure(h *host.Host, d time.Duration) (verify.Measurement, *load.Load, error) {
	x, l, err := verify.Measure(m.ctx, m.sampler, h, d)
	if err == nil {
		_ = serveConsumers(m.fs, l)
	}
	return x, l, err
}

// settle waits, up to a few seconds, until no IRQ the change moved is
// still served where it was (a move takes effect when the IRQ next fires),
// then a moment for queues and backlogs to drain.
func (m *liveMeter) settle(irqs []int) {
	deadline := time.Now().Add(3 * time.Second)
	for len(irqs) > 0 && time.Now().Before(deadline) {
		pending := false
		for _, n := range irqs {
			allowed, err1 := m.fs.ReadIRQAffinity(n)
			effective, err2 := m.fs.ReadIRQEffectiveAffinity(n)
			if err1 == nil && err2 == nil && host.MovePending(allowed, effective) {
				pending = true
				break
			}
		}
		if !pending {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	select {
	case <-m.ctx.Done():
	case <-time.After(500 * time.Millisecond):
	}
}

// appPIDs are the processes a plan's app entries name by PID (the model
// moves their measured threads; entries by name are predicted as moving
// nothing).
func appPIDs(p *plan.Plan) []int {
	var out []int
	for _, a := range p.Apps {
		if a.PID != 0 {
			out = append(out, a.PID)
		}
	}
	return out
}

// predictionFor is the prediction a verification checks: the plan's own
// when it still describes the machine as measured now, else one made now
// by the same model from that measurement (note says which and why;
// repredicted says why the plan's own was set aside, "" when it was not).
func predictionFor(h *host.Host, p *plan.Plan, before verify.Measurement, l *load.Load, o verify.Options) (pred *plan.Prediction, note, repredicted string) {
	if p.Prediction != nil {
		ok, why := verify.Agrees(p.Prediction, before, o)
		if ok {
			return p.Prediction, "", ""
		}
		note = "the plan's prediction was made on another load (" + why + "): predicted again from the measurement before the change"
		return policy.Predict(h, l, p, appPIDs(p)), note, note
	}
	return policy.Predict(h, l, p, appPIDs(p)), "the plan carries no prediction: predicted from the measurement before the change", ""
}

// verdictExit is the exit status of a verification's verdict.
func verdictExit(v verify.Verdict) error {
	switch v {
	case verify.Missed:
		return &exitError{code: exitMissed}
	case verify.Worse:
		return &exitError{code: exitWorse}
	case verify.Inconclusive:
		return &exitError{code: exitInconclusive}
	}
	return nil
}

// printVerification is the verification's table and verdict.
func printVerification(w io.Writer, v *verificationJSON, costNote string) {
	fmt.Fprintf(w, "\nverification over %.1f s before and after the change (%s); tolerance ±%.0f points plus each CPU's noise:\n", v.Seconds, costNote, v.Tolerance)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "CPU\tBUSY BEFORE\tPREDICTED\tMEASURED\tERROR\tNOISE\t\tIRQ BEFORE\tPREDICTED\tMEASURED\tERROR\tNOISE\t")
	for _, c := range v.CPUs {
		fmt.Fprintf(tw, "%d\t%.1f\t%.1f\t%.1f\t%+.1f\t%.1f\t\t%.1f\t%.1f\t%.1f\t%+.1f\t%.1f\t\n", c.CPU,
			c.BeforeBusy, c.PredictedBusy, c.MeasuredBusy, c.BusyError, c.Noise, c.BeforeIRQ, c.PredictedIRQ, c.MeasuredIRQ, c.IRQError, c.IRQNoise)
	}
	tw.Flush()
	fmt.Fprintf(w, "packets/s: %.0f before, %.0f after\n", v.TrafficBefore, v.TrafficAfter)
	if v.Note != "" {
		fmt.Fprintf(w, "note: %s\n", v.Note)
	}
	fmt.Fprintf(w, "verdict: %s — %s\n", v.Verdict, v.Reason)
}
