package bench

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Bench runs r's configurations and returns the report. The machine state
// (every IRQ affinity and queue steering value) is read before and after;
// the report says whether it was restored exactly and, if not, what differs.
// The workload is always closed (testbed removed), also on error.
func Bench(ctx context.Context, r *Runner, baseline string) (rep *Report, err error) {
	before, err := ReadMachineState()
	if err != nil {
		return nil, err
	}
	rep = &Report{Workload: r.Workload.Name(), Rounds: r.Rounds, Duration: r.Duration, Started: time.Now().UTC()}
	if baseline == "" && len(r.Configs) > 0 {
		baseline = r.Configs[0]
	}
	rep.Baseline = baseline
	defer func() {
		if cerr := r.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("close workload: %w", cerr))
		}
		after, serr := ReadMachineState()
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
	runs, err := r.All(ctx)
	rep.Runs = runs
	rep.Summary = Summarize(r.Configs, runs, baseline)
	sc := r.Scope()
	rep.Scope = &sc
	rep.Dropped = r.Dropped
	rep.MachineWide = r.MachineWide
	for c, s := range r.Setups {
		if s == nil || (len(s.Notes) == 0 && len(s.Changes) == 0) {
			continue
		}
		if rep.Decisions == nil {
			rep.Decisions = map[string]Decision{}
		}
		rep.Decisions[c] = Decision{Notes: s.Notes, Changes: len(s.Changes)}
	}
	return rep, err
}
