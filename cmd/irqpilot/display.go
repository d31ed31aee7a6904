package main

import (
	"github.com/irqpilot/irqpilot/internal/kernel"
)

// netnsPrefix is what runs a command in ns when this shell may not be in it:
// "ip netns exec NAME " for a named namespace other than the initial one.
func netnsPrefix(ns *kernel.NetNS) string {
	if ns == nil || ns.Initial || ns.Name == "" {
		return ""
	}
	return "ip netns exec " + shellQuote(ns.Name) + " "
}
