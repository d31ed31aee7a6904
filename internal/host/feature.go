package host

import "github.com/irqpilot/irqpilot/internal/kernel"

// Feature is something of the running kernel that a kind of setting needs,
// found by a probe of the kernel's files (or of the netdev netlink family),
// never guessed from the kernel's version: distributions backport features
// and configurations leave them out. The JSON names are a documented
// interface.
type Feature struct {
	Name string `json:"name"` // for people: "threaded NAPI"
	// Probe is what was looked for: "sys/class/net/DEV/threaded".
	Probe string `json:"probe"`
	// Supported is the probe's answer; nil when nothing on this machine
	// (or in this capture) can tell, e.g. no network device to look at.
	Supported *bool `json:"supported"`
	// Kinds are the setting kinds that need it (none: it only informs).
	Kinds []string `json:"kinds,omitempty"`
	// NetNS says the probe ran in a network namespace other than the
	// initial one, where the feature's files never exist (the kernel keeps
	// them in the initial namespace only): missing here says nothing of
	// the kernel.
	NetNS bool `json:"netns,omitempty"`
}

// Missing says whether the probe found the feature absent.
func (f Feature) Missing() bool { return f.Supported != nil && !*f.Supported }

// Where names what lacks a missing feature: "this kernel", or "this network
// namespace" when the probe ran outside the initial one.
func (f Feature) Where() string {
	if f.NetNS {
		return "this network namespace"
	}
	return "this kernel"
}

// FeatureProbe fills a host's Features once the rest of it is read. The
// setting registry, which owns the probes (one per kind), installs it:
// host sits below setting and cannot name the kinds itself.
var FeatureProbe func(fs *kernel.FS, h *Host) []Feature

// MissingFeatures are the features the probes found absent.
func (h *Host) MissingFeatures() []Feature {
	var out []Feature
	for _, f := range h.Features {
		if f.Missing() {
			out = append(out, f)
		}
	}
	return out
}
