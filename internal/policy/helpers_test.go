package policy

import (
	"strings"
	"testing"

	"github.com/irqpilot/irqpilot/internal/host"
	"github.com/irqpilot/irqpilot/internal/plan"
	"github.com/irqpilot/irqpilot/internal/plan/plantest"
)

// synth and synthNIC are the small synthetic hosts of plantest, by the
// names these tests use.
type (
	synth    = plantest.Synth
	synthNIC = plantest.NIC
)

// mustMake is Make's plan of policy for h; the test fails on an error.
func mustMake(t testing.TB, policy string, h *host.Host, o Options) *plan.Plan {
	t.Helper()
	p, err := Make(policy, h, o)
	if err != nil {
		t.Fatalf("%s: %v", policy, err)
	}
	return p
}

// whyHas reports each of wants that why, a plan's or a refusal's
// explanation, lacks.
func whyHas(t testing.TB, why string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(why, want) {
			t.Errorf("why lacks %q:\n%s", want, why)
		}
	}
}
