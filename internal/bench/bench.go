// Package bench is the A/B runner: it applies each configuration through
// the converge pipeline's Apply (journaled, reverted after every run),
// drives a workload (package workload) for a measured run while sampling
// per-CPU load, interleaves the configurations in balanced rounds, keeps
// every change to the devices under test (Scope), summarises the runs with
// package stats, proves the machine restored, and searches placements
// (tune, sweep). Its results (Report, Sweep) are drawn by package report.
package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Bench runs r's configurations and returns the report. The machine state
// (every IRQ affinity and queue steering value) is read before and after;
// the report says whether it was restored exactly and, if not, what differs.
// The workload is always closed (testbed removed), also on error.
func Bench(ctx context.Context, r *Runner, baseline string) (rep *Report, err error) {
	before, err := ReadMachineState(r.FS)
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
	runs, err := r.All(ctx)
	rep.Runs = runs
	rep.Summary = Summarize(r.Configs, runs, baseline, true)
	sc := r.Scope()
	rep.Scope = &sc
	rep.Dropped = r.Dropped
	rep.MachineWide = r.MachineWide
	for c, s := range r.Setups {
		none := s != nil && c != baseline && BaseConfig(c) != baseline && setupFingerprint(s) == ""
		if s == nil || (len(s.Notes) == 0 && len(s.Changes) == 0 && !none) {
			continue
		}
		if rep.Decisions == nil {
			rep.Decisions = map[string]Decision{}
		}
		rep.Decisions[c] = Decision{Notes: s.Notes, Changes: len(s.Changes), NoChange: none}
	}
	return rep, err
}

// ReadReport reads a bench JSON report (bench -o) and summarises its runs
// again with this version's statistics (Summarize, paired by round): a
// report saved by an older version reads the same as a new one.
//
// A non-empty baseline replaces the report's own: a configuration's full
// name, or "#TAG" for the one configuration labelled TAG ("#best").
func ReadReport(b []byte, baseline string) (*Report, error) {
	var rep Report
	if err := json.Unmarshal(b, &rep); err != nil {
		return nil, fmt.Errorf("not a bench report: %w", err)
	}
	if len(rep.Runs) == 0 {
		return nil, fmt.Errorf("bench report has no runs")
	}
	var configs []string
	for _, s := range rep.Summary {
		configs = append(configs, s.Config)
	}
	for _, r := range rep.Runs { // a report cut short may lack summaries
		if !slices.Contains(configs, r.Config) {
			configs = append(configs, r.Config)
		}
	}
	if baseline != "" {
		name, err := FindConfig(configs, baseline)
		if err != nil {
			return nil, err
		}
		rep.Baseline = name
	}
	if rep.Baseline == "" {
		rep.Baseline = configs[0]
	}
	if !slices.Contains(configs, rep.Baseline) {
		return nil, fmt.Errorf("bench report: baseline %q has no runs", rep.Baseline)
	}
	rep.Summary = Summarize(configs, rep.Runs, rep.Baseline, true)
	return &rep, nil
}

// WithTwin returns configs with an A/A twin of baseline (the first
// configuration when ""): "NAME#aa", the same configuration measured again
// under its own label, placed right after the baseline. Every ratio of the
// run is then read against the twin's (the noise floor). configs is
// returned as it is when it already has that twin.
func WithTwin(configs []string, baseline string) []string {
	if len(configs) == 0 {
		return configs
	}
	if baseline == "" {
		baseline = configs[0]
	}
	twin := BaseConfig(baseline) + "#aa"
	if slices.Contains(configs, twin) {
		return configs
	}
	i := slices.Index(configs, baseline)
	if i < 0 {
		return append(slices.Clone(configs), twin)
	}
	return slices.Insert(slices.Clone(configs), i+1, twin)
}

// FindConfig resolves a baseline named on the command line against a
// bench's or a report's configurations: the exact name, or "#TAG" for the single
// configuration whose name ends in that tag.
func FindConfig(configs []string, want string) (string, error) {
	if slices.Contains(configs, want) {
		return want, nil
	}
	if strings.HasPrefix(want, "#") {
		var hits []string
		for _, c := range configs {
			if strings.HasSuffix(c, want) {
				hits = append(hits, c)
			}
		}
		if len(hits) == 1 {
			return hits[0], nil
		}
		if len(hits) > 1 {
			return "", fmt.Errorf("baseline %q names %d configurations: %s", want, len(hits), strings.Join(hits, ", "))
		}
	}
	return "", fmt.Errorf("baseline %q is not one of the configurations (%s)", want, strings.Join(configs, ", "))
}
