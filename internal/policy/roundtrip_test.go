package policy

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/irqpilot/irqpilot/internal/plan"
	"github.com/irqpilot/irqpilot/internal/plan/plantest"
)

// Policy output survives a YAML and a JSON round trip unchanged.
func TestRoundTrip(t *testing.T) {
	h := synth{CPUs: 16, SMT: true, Balance: true, NICs: []synthNIC{{Name: "eth0", Queues: 4}, {Name: "eth0.7", Queues: 1, Kind: "vlan", Lower: "eth0"}}}.Build()
	for _, name := range PolicyNames() {
		for _, o := range []Options{{}, {App: "unit:memcached.service", Irqbalance: plan.IrqbalanceBan}} {
			p, err := Make(name, h, o)
			if name == "rps-spread" && o.Irqbalance == plan.IrqbalanceBan {
				// Nothing is isolated and no IRQ is placed: nothing to ban.
				if err == nil || !strings.Contains(err.Error(), "no CPU to ban") {
					t.Errorf("rps-spread ban: %v", err)
				}
				continue
			}
			if err != nil {
				t.Fatal(name, err)
			}
			y, err := p.MarshalFile()
			if err != nil {
				t.Fatal(err)
			}
			j, err := p.MarshalJSONFile()
			if err != nil {
				t.Fatal(err)
			}
			for file, data := range map[string][]byte{"p.yaml": y, "p.json": j} {
				q, err := plan.Parse(file, data)
				if err != nil {
					t.Fatalf("%s %s: %v\n%s", name, file, err, data)
				}
				if d := cmp.Diff(p, q, plantest.IgnoreWhere); d != "" {
					t.Errorf("%s %s: round trip differs (-made +read):\n%s", name, file, d)
				}
			}
		}
	}
}
