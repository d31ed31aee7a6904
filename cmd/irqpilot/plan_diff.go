package main

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"github.com/irqpilot/irqpilot/internal/diagnose"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/outfile"
	"github.com/irqpilot/irqpilot/internal/plan"
	"github.com/irqpilot/irqpilot/internal/policy"
	"github.com/irqpilot/irqpilot/internal/setting"
)

// planDiff is `plan --json` (docs/json.md): the plan and what it would
// change against the host it was made for.
type planDiff struct {
	File   string     `json:"file,omitempty"` // the plan file written (-o), if any
	Policy string     `json:"policy"`         // the policy that made the plan (auto names its choice)
	Why    string     `json:"why,omitempty"`  // why the policy placed things so
	Plan   *plan.Plan `json:"plan,omitempty"` // the plan itself, when not written to a file
	Notes  []string   `json:"notes,omitempty"`
	// Counts is the number of settings per status.
	Counts   map[string]int `json:"counts"`
	Settings []planSetting  `json:"settings"`
}

// planSetting is one resolved setting with its status against the host, in
// the one status vocabulary of setting.Status: pending = would change,
// unchanged, skipped (Note says why), unknown (the current value could not be
// read). Old is the value in force.
type planSetting = setting.Change

// runPlan makes the plan for h, writes or prints it, and prints the changes.
func runPlan(w io.Writer, h *host.Host, f planOptions, asJSON bool, source string) error {
	o, err := f.options()
	if err != nil {
		return err
	}
	var p *plan.Plan
	if f.remedy != "" {
		p, err = remedyPlan(h, o, f.remedy)
	} else {
		p, err = policy.Make(f.policy, h, o)
	}
	if err != nil {
		return err
	}
	if f.netns != "" {
		plan.ScopeToNetNS(p, f.netns)
	}
	if f.all {
		for i := range p.Apps {
			if p.Apps[i].Comm != "" {
				p.Apps[i].All = true
			}
		}
	}
	if f.appNote != "" {
		p.Notes = append(p.Notes, f.appNote)
	}
	if !asJSON && f.errOut != nil {
		// What the default scope left out, where it is seen even when the
		// plan goes to a file or a pipe.
		for _, n := range p.Notes {
			if strings.HasPrefix(n, "left out ") {
				fmt.Fprintln(f.errOut, n)
			}
		}
	}
	settings, err := plan.Resolve(p, h)
	if err != nil {
		return fmt.Errorf("the %s plan does not fit this host (a bug): %w", f.policy, err)
	}
	d := planDiff{Policy: p.Policy, Why: p.Why, Notes: p.Notes, Counts: map[string]int{}, Settings: []planSetting{}}
	for _, s := range settings {
		s.Status = setting.StatusFor(&s)
		d.Counts[string(s.Status)]++
		d.Settings = append(d.Settings, s)
	}

	if f.output != "" {
		fileJSON := asJSON || strings.EqualFold(filepath.Ext(f.output), ".json")
		var data []byte
		if fileJSON {
			data, err = p.MarshalJSONFile()
		} else {
			data, err = planFile(p)
		}
		if err != nil {
			return err
		}
		if err := outfile.Write(f.output, data); err != nil {
			return err
		}
		d.File = f.output
		if asJSON {
			return writeJSONLine(w, d)
		}
		fmt.Fprintf(w, "wrote %s (policy %s)\n", f.output, p.Policy)
		writePlanChanges(w, d, source, "")
		if p.Prediction != nil {
			writePrediction(w, p.Prediction, "", false)
		}
		return nil
	}
	if asJSON {
		d.Plan = p
		return writeJSON(w, d)
	}
	data, err := planFile(p)
	if err != nil {
		return err
	}
	if _, err := w.Write(data); err != nil {
		return err
	}
	fmt.Fprintln(w)
	writePlanChanges(w, d, source, "# ")
	if p.Prediction != nil {
		writePrediction(w, p.Prediction, "# ", false)
	}
	return nil
}

// remedyPlan is doctor's remedy for the finding ref names on the measured
// load in o: the plan policy.Remedy makes, or an empty plan that says why
// there is none. The policy flags do not shape it.
func remedyPlan(h *host.Host, o policy.Options, ref string) (*plan.Plan, error) {
	if o.Load == nil || o.Load.Load == nil {
		return nil, fmt.Errorf("--remedy %s needs a measurement: on the live machine plan samples (--sample), on captured state give the later capture with --after", ref)
	}
	l := o.Load.Load
	fs := diagnose.Diagnose(h, l)
	f, ok := diagnose.Find(fs, ref)
	if !ok {
		if len(fs) == 0 {
			return nil, fmt.Errorf("--remedy %s: doctor finds nothing in this measurement", ref)
		}
		return nil, fmt.Errorf("--remedy %s: no such finding in this measurement (findings: %s)", ref, diagnose.Refs(fs))
	}
	// The options doctor gives: the remedy is the one doctor showed.
	p, why := policy.Remedy(h, l, f, policy.Options{})
	if p == nil {
		p = &plan.Plan{Version: plan.Version, Policy: policy.RemedyPolicy, Host: h.Hostname,
			Why: fmt.Sprintf("remedy for %s: none, nothing is changed: %s", f.Ref, why)}
	}
	return p, nil
}

// writePlanChanges prints the diff for people: each change (from → to, why),
// then skipped settings with their reason; unchanged ones are counted.
// prefix is prepended to every line ("# " keeps a printed plan valid YAML).
func writePlanChanges(w io.Writer, d planDiff, source, prefix string) {
	fmt.Fprintf(w, "%sAgainst %s: %d to change, %d unchanged, %d skipped, %d with unknown current value.\n",
		prefix, source, d.Counts[string(setting.StatusPending)], d.Counts[string(setting.StatusUnchanged)], d.Counts[string(setting.StatusSkipped)], d.Counts[string(setting.StatusUnknown)])
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	section := func(title string, want ...setting.Status) {
		first := true
		for _, s := range d.Settings {
			if !slices.Contains(want, s.Status) {
				continue
			}
			if first {
				fmt.Fprintf(tw, "%s\n%s%s\n", strings.TrimSpace(prefix), prefix, title)
				first = false
			}
			from := setting.Display(s.Kind, s.Old)
			if s.Old == "" {
				from = "?"
			}
			to := setting.Display(s.Kind, s.Value)
			why := s.Reason
			if s.Status == setting.StatusSkipped {
				to, why = "(skipped)", s.Note
			}
			fmt.Fprintf(tw, "%s  %s\t%s\t%s → %s\t%s\n", prefix, s.Target, s.Name(), from, to, why)
		}
		tw.Flush()
	}
	section("Changes (target, setting, from → to, why):", setting.StatusPending, setting.StatusUnknown)
	section("Skipped:", setting.StatusSkipped)
	if len(d.Notes) > 0 {
		fmt.Fprintf(w, "%s\n%sLeft alone:\n", strings.TrimSpace(prefix), prefix)
		for _, n := range d.Notes {
			for _, line := range wrapText(prefix+"  ", prefix+"    ", n) {
				fmt.Fprintln(w, line)
			}
		}
	}
}

// writePrediction prints a plan's prediction as a table: per CPU, busy and
// interrupt time measured before and predicted after, percent of the CPU.
// prefix starts every line ("# " keeps a printed plan valid YAML); with
// changedOnly, CPUs the plan is not predicted to change are left out.
func writePrediction(w io.Writer, p *plan.Prediction, prefix string, changedOnly bool) {
	how := "interrupt time estimated from interrupt counts"
	if p.Source == "bpf" {
		how = "interrupt time measured with eBPF"
	}
	fmt.Fprintf(w, "%s\n%sPrediction per CPU (%% of the CPU; measured over %.1f s, %s):\n", strings.TrimSpace(prefix), prefix, float64(p.IntervalMs)/1000, how)
	var table bytes.Buffer
	tw := tabwriter.NewWriter(&table, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "CPU\tbusy before\tbusy predicted\tirq before\tirq predicted\t\n")
	shown := 0
	for _, c := range p.CPUs {
		if changedOnly && math.Abs(c.PredictedBusy-c.BeforeBusy) < 0.1 && math.Abs(c.PredictedIRQ-c.BeforeIRQ) < 0.1 {
			continue
		}
		shown++
		fmt.Fprintf(tw, "%d\t%.1f\t%.1f\t%.1f\t%.1f\t\n", c.CPU, c.BeforeBusy, c.PredictedBusy, c.BeforeIRQ, c.PredictedIRQ)
	}
	tw.Flush()
	for _, line := range strings.Split(strings.TrimRight(table.String(), "\n"), "\n") {
		fmt.Fprintf(w, "%s%s\n", prefix, strings.TrimRight(line, " "))
	}
	if shown == 0 {
		fmt.Fprintf(w, "%s  (no CPU is predicted to change)\n", prefix)
	}
}

// planFile is the plan as YAML for people: p.MarshalFile with each long
// text (auto's why, a reason, a note) wrapped at width as the rest of the
// output is. A wrapped plain or single-quoted YAML scalar folds back into
// the same one-line text; a line whose wrapping would read back otherwise
// is left whole.
func planFile(p *plan.Plan) ([]byte, error) {
	data, err := p.MarshalFile()
	if err != nil {
		return nil, err
	}
	var want any
	if err := yaml.Unmarshal(data, &want); err != nil {
		return nil, err
	}
	lines := strings.Split(string(data), "\n")
	for i, line := range lines {
		wrapped, ok := wrapYAMLLine(line)
		if !ok {
			continue
		}
		try := slices.Clone(lines)
		try[i] = wrapped
		var got any
		if err := yaml.Unmarshal([]byte(strings.Join(try, "\n")), &got); err == nil && reflect.DeepEqual(got, want) {
			lines = try
		}
	}
	return []byte(strings.Join(lines, "\n")), nil
}

// yamlTextLine is a line of YAML holding a scalar: indentation, an optional
// sequence dash, an optional key, and the value.
var yamlTextLine = regexp.MustCompile(`^( *)(- )?([a-z_]+: )?(.*)$`)

// wrapYAMLLine wraps a line longer than width whose value is a plain or
// single-quoted scalar, its continuation lines indented below its key.
func wrapYAMLLine(line string) (string, bool) {
	if utf8.RuneCountInString(line) <= width || strings.HasPrefix(strings.TrimSpace(line), "#") {
		return "", false
	}
	m := yamlTextLine.FindStringSubmatch(line)
	value := m[4]
	if value == "" || strings.Contains(value, "  ") || strings.ContainsAny(value[:1], "\"|>&*!%@`{[") {
		return "", false
	}
	head := line[:len(line)-len(value)]
	indent := strings.Repeat(" ", len(m[1])+len(m[2]))
	if m[3] != "" {
		indent += "  "
	}
	return strings.Join(wrapText(head, indent, value), "\n"), true
}
