package sim

import (
	"fmt"
	"strings"

	"github.com/irqpilot/irqpilot/internal/coalesce"
)

// Policies are the policy names the sweep knows, in output order.
var Policies = []string{"none", "mcc", "midl", "mcc+midl", "vic", "dim", "adaptive"}

// DefaultCIFs are the closed-loop depths of the sweep.
var DefaultCIFs = []int{1, 2, 4, 8, 16, 32, 64}

// PolicyParams are the coalescing parameters of the sweep's policies.
type PolicyParams struct {
	MCC          int   // mcc and mcc+midl: completions per interrupt (4)
	MCCBackstop  int64 // mcc alone: timeout that bounds a held completion (1 ms)
	MIDLNs       int64 // midl and mcc+midl: maximum delay (100 µs)
	VIC          coalesce.VICConfig
	AdaptiveThr  int   // adaptive: count threshold (32)
	AdaptiveGap  int64 // adaptive: quiet period Δ (6 µs)
	DIMBlockSize uint32
}

// DefaultPolicyParams documents the defaults (docs/coalescing.md).
func DefaultPolicyParams() PolicyParams {
	return PolicyParams{MCC: 4, MCCBackstop: 1_000_000, MIDLNs: 100_000, AdaptiveThr: 32, AdaptiveGap: 6_000, DIMBlockSize: 4096}
}

// NewPolicy builds a fresh policy by name.
func NewPolicy(name string, pp PolicyParams, epochNs int64) (coalesce.Policy, error) {
	switch name {
	case "none":
		return coalesce.None{}, nil
	case "mcc":
		return coalesce.NewFixed(name, pp.MCC, pp.MCCBackstop)
	case "midl":
		return coalesce.NewFixed(name, 0, pp.MIDLNs)
	case "mcc+midl":
		return coalesce.NewFixed(name, pp.MCC, pp.MIDLNs)
	case "vic":
		c := pp.VIC
		c.EpochNs = epochNs
		return coalesce.NewVIC(c)
	case "dim":
		return coalesce.NewDIMPolicy(nil, pp.DIMBlockSize), nil
	case "adaptive":
		return coalesce.NewAdaptive(pp.AdaptiveThr, pp.AdaptiveGap)
	}
	return nil, fmt.Errorf("sim: unknown policy %q (want one of %s)", name, strings.Join(Policies, ", "))
}

// Sweep runs every policy at every CIF (closed loop), or every policy once
// when cfg.OpenRate > 0 (cifs ignored). Each run uses cfg.Seed, so policies
// see the same random service times in the same order where their schedules
// agree.
func Sweep(cfg Config, pp PolicyParams, policies []string, cifs []int) ([]Result, error) {
	var out []Result
	runOne := func(c Config, name string) error {
		p, err := NewPolicy(name, pp, c.EpochNs)
		if err != nil {
			return err
		}
		r, err := Run(c, p)
		if err != nil {
			return fmt.Errorf("%s cif %d: %w", name, c.CIF, err)
		}
		out = append(out, r)
		return nil
	}
	for _, name := range policies {
		if cfg.OpenRate > 0 {
			c := cfg
			c.CIF = 0
			if err := runOne(c, name); err != nil {
				return nil, err
			}
			continue
		}
		for _, cif := range cifs {
			c := cfg
			c.CIF = cif
			if err := runOne(c, name); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// Find returns the result for policy at cif, or nil.
func Find(rs []Result, policy string, cif int) *Result {
	for i := range rs {
		if rs[i].Policy == policy && rs[i].CIF == cif {
			return &rs[i]
		}
	}
	return nil
}
