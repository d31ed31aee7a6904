package main

import (
	"github.com/irqpilot/irqpilot/internal/cpuset"
	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/setting"
)

// displayValue is a setting's value for people: one format per kind of
// value in every text output, so CPU sets read as cpulists ("0-3"), never
// as the kernel's hex masks ("0000000f"). JSON keeps the kernel's form.
func displayValue(k setting.Kind, v string) string {
	switch k {
	case setting.KindRPSCPUs, setting.KindXPSCPUs:
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

// netnsPrefix is what runs a command in ns when this shell may not be in it:
// "ip netns exec NAME " for a named namespace other than the initial one.
func netnsPrefix(ns *kernel.NetNS) string {
	if ns == nil || ns.Initial || ns.Name == "" {
		return ""
	}
	return "ip netns exec " + shellQuote(ns.Name) + " "
}
