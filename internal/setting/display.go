package setting

import "github.com/irqpilot/irqpilot/internal/cpuset"

// Display is a setting's value for people: one format per kind of value in
// every text output, so CPU sets read as cpulists ("0-3", "none"), never as
// the kernel's hex masks ("0000000f"). JSON and journals keep the kernel's
// form (with MaskCPUList beside it where that form is a mask).
func Display(k Kind, v string) string {
	l, ok := MaskCPUList(k, v)
	switch {
	case !ok || v == "":
		return v
	case l == "":
		return "none"
	}
	return l
}

// MaskCPUList is the cpulist of a value a kind holds as the kernel's hex
// mask (rps_cpus, xps_cpus: "00000003" → "0-1", an empty mask → ""); ok is
// false for every other kind and for a value that is not a mask.
func MaskCPUList(k Kind, v string) (list string, ok bool) {
	switch k {
	case KindRPSCPUs, KindXPSCPUs:
		if v == "" {
			return "", false
		}
		s, err := cpuset.ParseMask(v)
		if err != nil {
			return "", false
		}
		return s.String(), true
	}
	return "", false
}
