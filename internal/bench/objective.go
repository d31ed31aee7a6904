package bench

import (
	"fmt"
	"strings"

	"github.com/irqpilot/irqpilot/internal/bench/workload"
)

// Objective is what tune optimises: one figure read from every run, and
// whether lower is better. The statistics are the bench's own: Project
// turns runs into runs whose Throughput is the objective's figure, so the
// ranking, the paired sign test, the intervals and the A/A noise floor
// (Summarize) judge any objective without a rule of their own.
type Objective string

// Objectives tune knows.
const (
	// ObjectiveThroughput: the workload's figure of merit (ops/s, req/s,
	// trx/s, IOPS), higher is better.
	ObjectiveThroughput Objective = "throughput"
	// ObjectiveP99: the 99th percentile latency in µs, lower is better
	// (sockperf's exact order statistic; sysbench's, wrk's and
	// memcaslap's from their histograms, at their resolution).
	ObjectiveP99 Objective = "p99"
	// ObjectiveCPUPerOp: the whole machine's busy CPU time per operation,
	// in µs (the inverse of Run.PerCPUSecond: server, load generator and
	// the kernel's interrupt work alike), lower is better. For a latency
	// workload the operations are the messages it exchanged.
	ObjectiveCPUPerOp Objective = "cpu-per-op"
)

// Objectives lists the objectives, in --help order.
var Objectives = []Objective{ObjectiveThroughput, ObjectiveP99, ObjectiveCPUPerOp}

// ParseObjective reads an objective's name ("" is the workload's own: see
// ObjectiveFor).
func ParseObjective(s string) (Objective, error) {
	for _, o := range Objectives {
		if string(o) == s {
			return o, nil
		}
	}
	if s == "" {
		return "", nil
	}
	names := make([]string, len(Objectives))
	for i, o := range Objectives {
		names[i] = string(o)
	}
	return "", fmt.Errorf("objective %q: want one of %s", s, strings.Join(names, ", "))
}

// lowerIsBetterWorkload: the workload's own figure is a latency (sockperf).
func lowerIsBetterWorkload(w workload.Workload) bool {
	l, ok := w.(interface{ LowerIsBetter() bool })
	return ok && l.LowerIsBetter()
}

// ObjectiveFor checks o against workload w and returns the objective tune
// uses: o itself, or when o is "" the workload's own (p99 for a latency
// workload, throughput otherwise). A latency workload has no throughput to
// maximise (its message rate is the load it was told to offer), so
// throughput is refused for it.
func ObjectiveFor(w workload.Workload, o Objective) (Objective, error) {
	lower := lowerIsBetterWorkload(w)
	switch {
	case o == "" && lower:
		return ObjectiveP99, nil
	case o == "":
		return ObjectiveThroughput, nil
	case o == ObjectiveThroughput && lower:
		return "", fmt.Errorf("objective throughput: %s measures latency at an offered rate, it has no throughput to maximise (use p99 or cpu-per-op)", w.Name())
	}
	if _, err := ParseObjective(string(o)); err != nil {
		return "", err
	}
	return o, nil
}

// LowerIsBetter: the objective is a latency or a cost.
func (o Objective) LowerIsBetter() bool { return o != ObjectiveThroughput }

// Describe names the objective for people, with its direction.
func (o Objective) Describe() string {
	switch o {
	case ObjectiveP99:
		return "p99 latency (µs, lower is better)"
	case ObjectiveCPUPerOp:
		return "CPU per operation (busy CPU µs of the whole machine per operation, lower is better)"
	}
	return "throughput (higher is better)"
}

// Value is run's figure for the objective; false when the run has none:
// it failed, its workload reports no p99 (udp, a command), its CPU time
// was not measured, or (throughput) its figure is a latency.
func (o Objective) Value(r Run) (float64, bool) {
	if r.Error != "" {
		return 0, false
	}
	switch o {
	case ObjectiveP99:
		return r.LatencyP99, r.LatencyP99 > 0
	case ObjectiveCPUPerOp:
		if r.PerCPUSecond <= 0 {
			return 0, false
		}
		return 1e6 / r.PerCPUSecond, true
	}
	if r.LowerIsBetter || r.Throughput <= 0 {
		return 0, false
	}
	return r.Throughput, true
}

// Project returns copies of runs whose Throughput is the objective's
// figure (Unit, Objective and LowerIsBetter set to match), for Summarize
// and the tests behind its verdicts. A run without the figure becomes a
// failed run that says what it lacked.
func (o Objective) Project(runs []Run) []Run {
	out := make([]Run, len(runs))
	for i, r := range runs {
		v, ok := o.Value(r)
		if !ok && r.Error == "" {
			r.Error = fmt.Sprintf("no %s measured", o)
		}
		r.Throughput = v
		switch o {
		case ObjectiveP99:
			r.Unit, r.Objective, r.LowerIsBetter = "µs", "p99 latency", true
		case ObjectiveCPUPerOp:
			r.Unit, r.Objective, r.LowerIsBetter = "CPU µs/op", "CPU per operation", true
		}
		out[i] = r
	}
	return out
}
