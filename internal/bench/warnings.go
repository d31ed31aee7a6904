package bench

import (
	"fmt"
	"strings"

	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/load"
)

// SaturatedIdlePct is the median %idle (idle + iowait, bench's per-CPU
// statistics: 100 − the busy time of load.CPU.Busy) below which a CPU the
// server ran on counts as saturated. A configuration measured on a
// saturated CPU is measured against the CPU's limit as much as against
// its settings: any change of who runs there (the load generator, the
// sampler, another build on a shared machine) moves its throughput.
//
// It is not the headroom of internal/diagnose (HeadroomBusyMaxPct, 80 % busy):
// that says whether work may be moved onto a CPU; this says whether a
// measurement ran into the CPU's ceiling, hence a threshold of its own.
const SaturatedIdlePct = 5.0

// Warning words in Summary.Warnings and the table's warnings column.
const (
	WarnSaturated = "saturated"
	WarnShared    = "shared"
)

// Warnings says what one configuration's runs cannot carry:
//
//   - "saturated CPU 0,1": a CPU the server ran on (the runs' AppCPUs, or
//     every CPU when the runs do not record them) was measured with a
//     median %idle under SaturatedIdlePct (cpus: the configuration's
//     per-CPU medians);
//   - "shared CPU 0-1": the load generator ran on CPUs the server also ran
//     on, so the configuration's ratio includes what it did to the load
//     generator's share of those CPUs.
func Warnings(runs []Run, cpus []CPU) []string {
	var app, shared cpuset.Set
	recorded := false
	for _, r := range runs {
		if r.Error != "" || r.AppCPUs == "" {
			continue
		}
		a, err := cpuset.Parse(r.AppCPUs)
		if err != nil {
			continue
		}
		recorded = true
		app = app.Union(a)
		if r.ClientCPUs != "" {
			if c, err := cpuset.Parse(r.ClientCPUs); err == nil {
				shared = shared.Union(a.Intersect(c))
			}
		}
	}
	var out []string
	var hot []string
	for _, c := range cpus {
		// A CPU whose counters did not advance (a run shorter than a
		// tick) reads all zeros: not measured, so not saturated either.
		measured := c.CPUTime != load.CPUTime{}
		if measured && (!recorded || app.Contains(c.ID)) && c.IdleOrIOWait() < SaturatedIdlePct {
			hot = append(hot, fmt.Sprint(c.ID))
		}
	}
	if len(hot) > 0 {
		out = append(out, WarnSaturated+" CPU "+strings.Join(hot, ","))
	}
	if !shared.IsEmpty() {
		out = append(out, WarnShared+" CPU "+shared.String())
	}
	return out
}

// placementRecorded reports whether the runs say where the server and the
// load generator ran (reports from before they did cannot tell).
func placementRecorded(runs []Run) bool {
	for _, r := range runs {
		if r.AppCPUs != "" {
			return true
		}
	}
	return false
}

// HasTwin reports whether the report measured its baseline twice (an A/A
// twin: "default#aa" beside "default"), the run's own noise floor.
func (r *Report) HasTwin() bool {
	for _, s := range r.Summary {
		if s.Config != r.Baseline && BaseConfig(s.Config) == BaseConfig(r.Baseline) {
			return true
		}
	}
	return false
}

// warningLines explain the table's warnings column and say what the whole
// run lacks: a twin, or a record of where things ran.
func (r *Report) warningLines() []string {
	var lines []string
	seen := map[string]bool{}
	for _, s := range r.Summary {
		for _, w := range s.Warnings {
			word, _, _ := strings.Cut(w, " ")
			seen[word] = true
		}
	}
	if seen[WarnSaturated] {
		lines = append(lines, fmt.Sprintf("warning: saturated: a CPU the server ran on was under %.0f %% idle (median over the runs): the configuration was measured against that CPU's limit, and whatever else ran there (the load generator, other work on the machine) moved its result", SaturatedIdlePct))
	}
	if seen[WarnShared] {
		lines = append(lines, "warning: shared: the load generator ran on CPUs the server ran on: the ratio includes what the configuration did to the load generator, which a real client on another machine would not see")
	}
	if !placementRecorded(r.Runs) && len(r.Runs) > 0 {
		lines = append(lines, "warning: this report does not record where the server and the load generator ran (an older report): whether they shared CPUs is unknown")
	}
	if !r.HasTwin() {
		lines = append(lines, fmt.Sprintf("warning: no A/A twin: %s was measured once per round, so this run's own noise floor is unknown (--aa measures a second copy of it)", r.Baseline))
	}
	return lines
}
