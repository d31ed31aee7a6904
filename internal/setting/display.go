package setting

import "github.com/irqpilot/irqpilot/internal/cpuset"

// Display is a setting's value for people: one format per kind of value in
// every text output, so CPU sets read as cpulists ("0-3", "none"), never as
// the kernel's hex masks ("0000000f"). JSON and journals keep the kernel's
// form.
func Display(k Kind, v string) string {
	switch k {
	case KindRPSCPUs, KindXPSCPUs:
		if v == "" {
			return v
		}
		s, err := cpuset.ParseMask(v)
		if err != nil {
			return v
		}
		if s.IsEmpty() {
			return "none"
		}
		return s.String()
	}
	return v
}
