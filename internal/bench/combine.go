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
		part = strings.TrimSpace(part)
		if part == "" {
			return nil, fmt.Errorf("configuration %q: an empty part around %q", config, CombineSep)
		}
		if strings.ContainsAny(part, "#/") { // a tag or run options would cut the label short
			return nil, fmt.Errorf("configuration %q: %q: a tag (#) or run options (/) go after the whole combination, not inside a part", config, part)
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

// setupKind says whether config, whose measured setup is s, is a
// placement or a NAPI setting, the two kinds tune combines: only NAPI
// settings (a napi: configuration, the efficiency policy) makes a setting;
// a placement of IRQs, RPS, threads, the application or the load generator
// with no NAPI setting (a spec:, a placement policy, irqbalance) makes a
// placement. default, an unmeasured configuration (nil), a setup that
// changes nothing (a policy with nothing to do here), a mix of both
// (latency where it also pins NAPI threads), a label with run options
// ("/": busy polling belongs to the label as a whole), a tag or a
// combination is neither.
func setupKind(config string, s *Setup) (placement, knob bool) {
	if s == nil || config == "default" || strings.ContainsAny(config, "/#"+CombineSep) {
		return false, false
	}
	napi := 0
	for _, c := range s.Changes {
		if setting.IsNAPI(c.Kind) {
			napi++
		}
	}
	places := len(s.Changes) > napi || !s.AppCPUs.IsEmpty() || !s.ClientCPUs.IsEmpty() || s.Irqbalance
	switch {
	case napi == 0 && places:
		return true, false
	case napi > 0 && !places:
		return false, true
	}
	return false, false
}
