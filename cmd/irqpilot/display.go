package main

import (
	"github.com/irqpilot/irqpilot/internal/kernel"
	"github.com/irqpilot/irqpilot/internal/setting"
)

// displayValue is a setting's value for people (setting.Display): CPU
// sets as cpulists in every text output; JSON keeps the kernel's form.
func displayValue(k setting.Kind, v string) string { return setting.Display(k, v) }

// netnsPrefix is what runs a command in ns when this shell may not be in it:
// "ip netns exec NAME " for a named namespace other than the initial one.
func netnsPrefix(ns *kernel.NetNS) string {
	if ns == nil || ns.Initial || ns.Name == "" {
		return ""
	}
	return "ip netns exec " + shellQuote(ns.Name) + " "
}
