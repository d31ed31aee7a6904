package policy

import "github.com/irqpilot/irqpilot/internal/plan/plantest"

// synth and synthNIC are the small synthetic hosts of plantest, by the
// names these tests use.
type (
	synth    = plantest.Synth
	synthNIC = plantest.NIC
)
