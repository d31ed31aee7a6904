package bench

import (
	"fmt"
	"strings"

	"github.com/irqpilot/irqpilot/internal/bench/workload"
	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/setting"
)

// CombineSep joins the parts of a combined configuration: "&", because
// "," lists configurations, "+" joins CPUs inside a spec, "/" starts run
// options and "#" a label's tag.
const CombineSep = "&"

// Combine makes the setup of "A&B&…": every part's changes together, for
// a placement measured with NAPI settings. A combination must be
// unambiguous, so it is refused when two parts write the same setting,
// place the application or the load generator differently, or nest a
// combination; irqbalance may be one part (its placement is measured at
// run time, the other parts' settings beside it).
func Combine(c Configurator, config string, h *host.Host, app workload.AppInfo) (*Setup, error) {
	parts := strings.Split(config, CombineSep)
	out := &Setup{Config: config}
	owner := map[string]string{} // setting key → the part that writes it
	for _, part := range parts {
		if part == "" {
			return nil, fmt.Errorf("configuration %q: an empty part around %q", config, CombineSep)
		}
		s, err := c.Setup(part, h, app)
		if err != nil {
			return nil, fmt.Errorf("configuration %q: %w", config, err)
		}
		for i := range s.Changes {
			k := setting.Key(&s.Changes[i])
			if prev, ok := owner[k]; ok {
				return nil, fmt.Errorf("configuration %q: %s and %s both set %s", config, prev, part, k)
			}
			owner[k] = part
		}
		out.Changes = append(out.Changes, s.Changes...)
		if !s.AppCPUs.IsEmpty() {
			if !out.AppCPUs.IsEmpty() && !out.AppCPUs.Equal(s.AppCPUs) {
				return nil, fmt.Errorf("configuration %q: the parts place the application on %s and on %s", config, out.AppCPUs, s.AppCPUs)
			}
			out.AppCPUs = s.AppCPUs
		}
		if !s.ClientCPUs.IsEmpty() {
			if !out.ClientCPUs.IsEmpty() && !out.ClientCPUs.Equal(s.ClientCPUs) {
				return nil, fmt.Errorf("configuration %q: the parts place the load generator on %s and on %s", config, out.ClientCPUs, s.ClientCPUs)
			}
			out.ClientCPUs = s.ClientCPUs
		}
		out.Irqbalance = out.Irqbalance || s.Irqbalance
		if s.Baseline != nil {
			out.Baseline = s.Baseline
		}
		out.Notes = append(out.Notes, s.Notes...)
		out.Dropped = append(out.Dropped, s.Dropped...)
	}
	return out, nil
}

// placementAndKnob says whether config is a placement (default aside) or
// a NAPI setting, the two kinds tune combines; a run option ("/") makes
// neither: its busy polling belongs to the label as a whole.
func placementAndKnob(config string) (placement, knob bool) {
	if config == "default" || strings.ContainsAny(config, "/#"+CombineSep) {
		return false, false
	}
	if strings.HasPrefix(config, "napi:") {
		return false, true
	}
	return true, false
}
