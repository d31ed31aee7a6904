package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/irqpilot/irqpilot/internal/bench/stats"
)

// SweepParams are the workload parameters a sweep can vary.
var SweepParams = []string{"connections"}

// Sweep is one bench per value of a workload parameter (the load
// generator's concurrency): each value's report is a whole bench of the
// same configurations, with its own interleaved rounds and paired ratios.
// Values are not interleaved with each other: a sweep shows how each
// configuration's figure moves with the parameter; the verdicts stay the
// ones each value's bench reached.
type Sweep struct {
	Param  string       `json:"param"`
	Points []SweepPoint `json:"points"`
}

// SweepPoint is one value's bench.
type SweepPoint struct {
	Value  int     `json:"value"`
	Report *Report `json:"report"`
}

// ParseSweep reads "PARAM=V1,V2,…" (positive integers, increasing).
func ParseSweep(s string) (param string, values []int, err error) {
	param, list, ok := strings.Cut(s, "=")
	if !ok || list == "" {
		return "", nil, fmt.Errorf("sweep %q: want PARAM=V1,V2,… (PARAM one of %s)", s, strings.Join(SweepParams, ", "))
	}
	known := false
	for _, p := range SweepParams {
		known = known || p == param
	}
	if !known {
		return "", nil, fmt.Errorf("sweep parameter %q: want one of %s", param, strings.Join(SweepParams, ", "))
	}
	for _, f := range strings.Split(list, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v < 1 {
			return "", nil, fmt.Errorf("sweep %s: %q is not a positive integer", param, f)
		}
		if len(values) > 0 && v <= values[len(values)-1] {
			return "", nil, fmt.Errorf("sweep %s: values must increase (%d after %d)", param, v, values[len(values)-1])
		}
		values = append(values, v)
	}
	return param, values, nil
}

// RunSweep runs one bench per value, in order; runner builds the runner
// for a value. It stops at the first bench that fails and returns the
// points measured so far with the error (the failed bench's report, when
// there is one, included: its machine-restored check matters most then).
func RunSweep(ctx context.Context, param string, values []int, baseline string, runner func(v int) (*Runner, error), progress func(format string, args ...any)) (*Sweep, error) {
	sw := &Sweep{Param: param}
	for i, v := range values {
		if err := ctx.Err(); err != nil {
			return sw, err
		}
		r, err := runner(v)
		if err != nil {
			return sw, fmt.Errorf("%s=%d: %w", param, v, err)
		}
		if progress != nil {
			progress("sweep %s=%d (%d of %d)", param, v, i+1, len(values))
		}
		rep, err := Bench(ctx, r, baseline)
		if rep != nil {
			sw.Points = append(sw.Points, SweepPoint{Value: v, Report: rep})
		}
		if err != nil {
			return sw, fmt.Errorf("%s=%d: %w", param, v, err)
		}
	}
	return sw, nil
}

// Configs are the configurations of the sweep's benches, in the first
// report's order.
func (sw *Sweep) Configs() []string {
	var out []string
	seen := map[string]bool{}
	for _, p := range sw.Points {
		for _, s := range p.Report.Summary {
			if !seen[s.Config] {
				seen[s.Config] = true
				out = append(out, s.Config)
			}
		}
	}
	return out
}

func (sw *Sweep) summary(p SweepPoint, config string) *Summary {
	for i := range p.Report.Summary {
		if p.Report.Summary[i].Config == config {
			return &p.Report.Summary[i]
		}
	}
	return nil
}

// Objective is the sweep's figure of merit, its unit and whether lower is
// better.
func (sw *Sweep) Objective() (name, unit string, lower bool) {
	name = "throughput"
	for _, p := range sw.Points {
		if o, l := p.Report.Objective(); l {
			name, lower = o, true
		}
		for _, s := range p.Report.Summary {
			if s.Unit != "" {
				unit = s.Unit
			}
		}
	}
	return name, unit, lower
}

// WriteTable prints every value's bench, then the curve: per value and
// configuration, the median with its interval, and the ratio to the
// baseline with its verdict.
func (sw *Sweep) WriteTable(w io.Writer) error {
	for _, p := range sw.Points {
		fmt.Fprintf(w, "== %s=%d\n", sw.Param, p.Value)
		if err := p.Report.WriteTable(w); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}
	name, unit, lower := sw.Objective()
	dir := ""
	if lower {
		dir = ", lower is better"
	}
	fmt.Fprintf(w, "sweep of %s: %s in %s (median, %.0f %% interval%s; ratio to each bench's baseline, verdict)\n", sw.Param, name, unit, 100*stats.Confidence, dir)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	cs := sw.Configs()
	fmt.Fprintf(tw, "%s\t%s\t\n", sw.Param, strings.Join(cs, "\t"))
	for _, p := range sw.Points {
		cells := []string{strconv.Itoa(p.Value)}
		for _, c := range cs {
			s := sw.summary(p, c)
			if s == nil || math.IsNaN(s.Throughput.Point) {
				cells = append(cells, "—")
				continue
			}
			cell := fmtFigure(s.Throughput.Point, lower)
			if s.Throughput.Finite() {
				cell += " (" + fmtFigure(s.Throughput.Low, lower) + "–" + fmtFigure(s.Throughput.High, lower) + ")"
			}
			if s.Ratio != nil {
				cell += fmt.Sprintf(" %.3fx %s", s.Ratio.Point, s.Verdict)
			}
			cells = append(cells, cell)
		}
		fmt.Fprintf(tw, "%s\t\n", strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

func fmtFigure(v float64, lower bool) string {
	if lower {
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', 0, 64)
}

// Curve is one configuration's figure of merit across a sweep.
type Curve struct {
	Config string
	Points []CurvePoint
}

// CurvePoint is one value of the swept parameter: the median and the bar
// around it, the median's interval or, below MinRuns runs (where the
// interval has an infinite end), the range of the runs (Range).
type CurvePoint struct {
	Value             int
	Median, Low, High float64
	Range             bool
}

// Curves are the sweep's configurations' figures against the parameter, in
// the first report's order; a value a configuration has no successful run
// at is left out of its curve, and a configuration without any is left out.
func (sw *Sweep) Curves() []Curve {
	var out []Curve
	for _, c := range sw.Configs() {
		cv := Curve{Config: c}
		for _, pt := range sw.Points {
			s := sw.summary(pt, c)
			if s == nil || math.IsNaN(s.Throughput.Point) {
				continue
			}
			cp := CurvePoint{Value: pt.Value, Median: s.Throughput.Point, Low: s.Throughput.Point, High: s.Throughput.Point}
			if s.Throughput.Finite() {
				cp.Low, cp.High = s.Throughput.Low, s.Throughput.High
			} else if mn, mx, ok := runRange(pt.Report.Runs, c); ok {
				cp.Low, cp.High, cp.Range = mn, mx, true
			}
			cv.Points = append(cv.Points, cp)
		}
		if len(cv.Points) > 0 {
			out = append(out, cv)
		}
	}
	return out
}

// runRange is the smallest and largest figure of config's successful runs.
func runRange(runs []Run, config string) (lo, hi float64, ok bool) {
	for _, r := range runs {
		if r.Config != config || r.Error != "" {
			continue
		}
		if !ok || r.Throughput < lo {
			lo = r.Throughput
		}
		if !ok || r.Throughput > hi {
			hi = r.Throughput
		}
		ok = true
	}
	return lo, hi, ok
}
